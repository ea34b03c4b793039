// One all-reduce per gradient after the backward (see ddp_naive.h).
#include "comm/ddp_naive.h"

#include "base/error.h"
#include "comm/watchdog.h"

namespace eng::comm {

void all_reduce_each_gradient(const std::vector<Tensor>& params, Communicator& comm) {
  for (size_t k = 0; k < params.size(); ++k) {
    Tensor g = params[k].grad();
    ENGINE_CHECK(g.defined(), "ddp naive: parameter ", k, " ", params[k].desc(),
                 " received no gradient in this backward (unused in the loss?)");
    set_op_label(cat("the gradient of parameter ", k, " of ", params.size()));  // for the watchdog's message
    comm.all_reduce(g, ReduceOp::avg).wait();                                   // in place, averaged
    set_op_label("");
  }
}

}  // namespace eng::comm
