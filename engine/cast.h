// Element-type conversion of n contiguous elements in host memory.
#pragma once
#include <cstdint>

#include "base/dtype.h"

namespace eng {
void cast(const void* src, DType src_t, void* dst, DType dst_t, int64_t n);
}
