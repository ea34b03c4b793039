// What the cuDNN frontend translation units share (cudnn_sdpa.cpp,
// cudnn_layernorm.cpp; not for code outside kernels/cudnn/): a built graph
// with its workspace size, cached in the context per key, and the frontend's
// status turned into the engine's error.
// The frontend is third-party code, included as a system header (our
// warnings do not apply to it; kernels/CMakeLists.txt), and calls libcudnn
// through the dlopen'ed handle (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING).
#pragma once
#include <cudnn_frontend.h>

#include <functional>
#include <unordered_map>

#include "kernels/cudnn/cudnn_impl.h"
#include "kernels/kernel_cost.h"

namespace eng {

namespace fe = cudnn_frontend;

struct GraphPlan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;  // bytes
};

// A frontend status that is not OK becomes the engine's error, naming the step and what was built.
inline void fe_check(fe::error_t status, const char* step, const std::string& what) {
  ENGINE_CHECK(status.is_good(), "cuDNN ", what, ": ", step, " failed: ", status.get_message());
}

// The plan cached under key, built on first use from make() (a graph with
// its tensors and ids, not yet validated): validated, lowered to cuDNN's
// operation graph, the heuristic's engines checked for support and the
// first one built. A failed build leaves nothing cached and throws, naming
// `what` and the step.
inline GraphPlan& cached_plan(CudnnContext& ctx, const std::string& key, const std::string& what,
                              const std::function<std::shared_ptr<fe::graph::Graph>()>& make) {
  auto& slot = ctx.impl().plans[key];
  if (slot) return *slot;
  try {
    auto plan = std::make_shared<GraphPlan>();
    plan->graph = make();
    fe::graph::Graph& g = *plan->graph;
    fe_check(g.validate(), "validating the graph", what);
    fe_check(g.build_operation_graph(ctx.impl().handle), "building the operation graph", what);
    fe_check(g.create_execution_plans({fe::HeurMode_t::A}), "the heuristic query", what);
    fe_check(g.check_support(), "the support check (cuDNN has no engine for this on this GPU)", what);
    fe_check(g.build_plans(), "building the plan", what);
    fe_check(g.get_workspace_size(plan->workspace), "the workspace query", what);
    slot = plan;
  } catch (...) {
    ctx.impl().plans.erase(key);
    throw;
  }
  return *slot;
}

// The frontend's own checks of a graph built for a GPU architecture without
// a device (the *_validate functions of cudnn.h): "" or its message.
inline std::string validate_deviceless(const std::shared_ptr<fe::graph::Graph>& g) {
  cudnn_symbol("cudnnGetVersion");  // the library loaded (the frontend asks it its version), or why not
  fe::error_t status = g->validate();
  return status.is_good() ? "" : status.get_message();
}

// Runs a cached plan on `stream` with the tensors' addresses by id.
inline void execute_plan(CudnnContext& ctx, GraphPlan& plan, std::unordered_map<int64_t, void*>& pack, void* workspace,
                         void* stream, const std::string& what) {
  ENGINE_CHECK(plan.workspace == 0 || workspace, "cuDNN ", what, ": needs ", plan.workspace,
               " bytes of workspace, got none");
  cudnn_set_stream(ctx, stream);
  kprof::count_launch();  // counted as one: how many kernels cuDNN runs for a plan is its own
  fe_check(plan.graph->execute(ctx.impl().handle, pack, workspace), "execution", what);
}

}  // namespace eng
