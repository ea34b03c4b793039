// Persistent compute-dtype copies of master weights (engine/compute_copies.h).
#include "engine/compute_copies.h"

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/graph.h"
#include "engine/ops.h"

namespace eng {

ComputeCopies::ComputeCopies(const std::vector<Tensor>& masters) {
  for (const Tensor& m : masters) masters_.insert(m.impl());
}

bool ComputeCopies::holds(const Tensor& x) const { return x.defined() && masters_.count(x.impl()) > 0; }

const Tensor& ComputeCopies::get(const Tensor& master, int64_t rows) {
  ENGINE_CHECK(holds(master), "ComputeCopies: ", master.desc(), " is not one of the model's parameters");
  ENGINE_CHECK(master.dtype() == DType::f32 && master.device().type != DeviceType::cpu,
               "ComputeCopies: a copy is of an fp32 master on emu/cuda, got ", master.desc());
  auto it = copies_.find(master.impl());
  if (it != copies_.end()) {
    ENGINE_CHECK(it->second.size(0) == rows, "ComputeCopies: ", master.desc(), " was copied with ", it->second.size(0),
                 " rows, now asked for ", rows);
    return it->second;
  }
  ENGINE_CHECK(!capturing(), "ComputeCopies: the first copy of ", master.desc(),
               " would be made during a CUDA graph capture (run one eager step first)");
  const NoGradGuard ng;
  return copies_.emplace(master.impl(), pad_rows(master.detach(), rows, DType::bf16)).first->second;
}

void* ComputeCopies::written_by_optimizer(const Tensor& master) const {
  auto it = copies_.find(master.impl());
  return it == copies_.end() ? nullptr : it->second.data_ptr();
}

int64_t ComputeCopies::bytes() const {
  int64_t b = 0;
  for (const auto& [impl, copy] : copies_) b += int64_t(copy.nbytes());
  return b;
}

}  // namespace eng
