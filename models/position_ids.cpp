// PositionIds: built on the host once per shape and device, then reused.
#include "models/position_ids.h"

#include <vector>

namespace eng::models {

const Tensor& PositionIds::get(int64_t B, int64_t T, Device dev, int64_t first) const {
  const auto key = std::make_tuple(B, T, first, dev.str());
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  std::vector<int32_t> pos(static_cast<size_t>(B * T));
  for (int64_t i = 0; i < B * T; ++i) pos[size_t(i)] = int32_t(first + i % T);
  return cache_.emplace(key, Tensor::from_ints(pos, {B, T}, dev)).first->second;
}

}  // namespace eng::models
