// Position ids for learned position embeddings (GPT-2's wpe, the ViT's
// pos_embed): a (B, T) i32 tensor holding 0..T-1 in every row.
// Made once per (B, T, device) and kept, so a forward inside a CUDA graph
// capture finds them on the device already (uploading them there would be a
// host copy the graph cannot replay).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "engine/tensor.h"

namespace eng::models {

class PositionIds {
 public:
  const Tensor& get(int64_t B, int64_t T, Device dev) const;

 private:
  mutable std::map<std::tuple<int64_t, int64_t, std::string>, Tensor> cache_;
};

}  // namespace eng::models
