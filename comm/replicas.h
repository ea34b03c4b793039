// Replica drift check (--check_replicas N): data-parallel replicas must hold
// bit-identical parameters after every step (they start from rank 0's
// weights and apply the same averaged gradients). A rank whose copy drifted
// (a non-deterministic kernel, a missed all-reduce, a bad GPU) would
// otherwise train on quietly. Each rank hashes every tensor's bytes; the
// hashes are gathered over the group and compared.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "comm/group.h"
#include "engine/tensor.h"

namespace eng::comm {

// Drift, found alike by every rank of the group (each compares all hashes).
struct ReplicaDrift : Error {
  using Error::Error;
};

// Collective over g. Throws ReplicaDrift naming the first tensor and rank
// that differ from the group's rank 0 (every rank throws the same message).
void check_replicas(const std::vector<std::pair<std::string, Tensor>>& named, const Group& g);

}  // namespace eng::comm
