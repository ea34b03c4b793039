// Position ids for learned position embeddings (GPT-2's wpe, the ViT's
// pos_embed): a (B, T) i32 tensor holding first..first+T-1 in every row
// (first > 0: a context-parallel rank's slice of the sequence).
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
  const Tensor& get(int64_t B, int64_t T, Device dev, int64_t first = 0) const;

 private:
  mutable std::map<std::tuple<int64_t, int64_t, int64_t, std::string>, Tensor> cache_;
};

}  // namespace eng::models
