// The "spirals" toy dataset (cs231n's classic): K interleaved spiral arms in
// 2-D, one class per arm, with Gaussian noise. A linear model gets ~1/K
// accuracy, so learning it needs the hidden layer: a small but real test.
#pragma once
#include <cstdint>

#include "engine/tensor.h"

namespace eng::models {

struct Spirals {
  Tensor x;  // (N, 2) f32
  Tensor y;  // (N) i32 class labels
};

// points_per_class * classes points; noise is the std of the angle jitter.
Spirals make_spirals(int64_t points_per_class, int classes, float noise, uint64_t seed);

}  // namespace eng::models
