// Naive data parallelism: after the whole backward, one all-reduce per
// parameter's gradient, each waited for before the next. The simplest
// correct DDP, and the baseline the bucketed, overlapped one (ddp.h) is
// measured against (train --ddp naive; bench/bench_ddp.sh): it pays the
// collective's latency once per parameter (GPT-2 small has 148) and starts
// communicating only when the backward has ended, so nothing overlaps.
#pragma once
#include <vector>

#include "comm/communicator.h"
#include "engine/tensor.h"

namespace eng::comm {

// grad <- mean over the communicator's ranks of grad, for every parameter
// (in registration order, the same on every rank: collectives must be
// called in the same order everywhere). Every parameter must have a
// gradient (a one-line error names the first that has none).
void all_reduce_each_gradient(const std::vector<Tensor>& params, Communicator& comm);

}  // namespace eng::comm
