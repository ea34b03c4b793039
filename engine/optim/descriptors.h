// Shared by the fused GPU optimizers (adamw.cpp, adamw8bit.cpp,
// adafactor.cpp): the per-tensor descriptors of one launch copied to the
// device, and the check of a device grad_scale.
#pragma once
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "engine/graph.h"
#include "engine/ops/op_common.h"
#include "engine/tensor.h"

namespace eng::detail {

// The descriptors in a device i32 tensor (8-byte aligned: the allocator
// aligns every buffer), uploaded in stream order (graph.h). Inside a capture
// the upload reads *keep, which prepare_replay() rewrites before each replay.
template <typename Desc>
Tensor upload_descriptors(const std::vector<Desc>& d, Device dev, std::shared_ptr<std::vector<uint8_t>>* keep) {
  static_assert(sizeof(Desc) % 4 == 0);
  const size_t bytes = d.size() * sizeof(Desc);
  auto host = std::make_shared<std::vector<uint8_t>>(bytes);
  std::memcpy(host->data(), d.data(), bytes);
  Tensor t = Tensor::empty({int64_t(bytes / 4)}, DType::i32, dev);
  if (keep) *keep = host;
  upload(dev, host, t.data_ptr());
  return t;
}

inline void check_grad_scale(const char* who, const Tensor& grad_scale) {
  ENGINE_CHECK(grad_scale.numel() == 1 && grad_scale.dtype() == DType::f32 && on_gpu(grad_scale), who,
               "::step: grad_scale must be one f32 on a GPU device, got ", grad_scale.desc());
}

}  // namespace eng::detail
