// Checks of the weights and optimizer state a run loaded (loaded_checks.h).
#include "models/train/loaded_checks.h"

#include <cmath>
#include <cstdint>

#include "base/error.h"

namespace eng::models {

namespace {

bool floating(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// Index of the first element that is not finite, or (nonneg) negative; -1 if none.
int64_t first_bad(const Tensor& t, bool nonneg, float* value) {
  const Tensor host = t.to(kCPU).to(DType::f32);
  const float* v = host.data<float>();
  for (int64_t i = 0; i < host.numel(); ++i)
    if (!std::isfinite(v[i]) || (nonneg && v[i] < 0)) {
      *value = v[i];
      return i;
    }
  return -1;
}

// Second moments and 8-bit scales are never negative.
bool nonnegative_kind(const std::string& name) {
  return name.rfind("exp_avg_sq", 0) == 0 || name.find("absmax") != std::string::npos;
}

}  // namespace

void check_loaded_weights(const NamedTensors& params, const std::string& file) {
  for (const auto& [name, p] : params) {
    if (!floating(p.dtype())) continue;
    float v = 0;
    const int64_t i = first_bad(p, false, &v);
    ENGINE_USER_CHECK(i < 0, file, ": parameter '", name, "' holds ", v, " at element ", i, " of ", p.numel(),
                      ": a damaged file, or one saved after the run diverged; start from another");
  }
}

void check_loaded_state(const NamedTensors& state, const std::string& file) {
  for (const auto& [name, t] : state) {
    if (!floating(t.dtype())) continue;
    const bool nonneg = nonnegative_kind(name);
    float v = 0;
    const int64_t i = first_bad(t, nonneg, &v);
    ENGINE_USER_CHECK(i < 0, file, ": optimizer state '", name, "' holds ", v, " at element ", i, " of ", t.numel(),
                      std::isfinite(v) ? " (second moments and scales are >= 0)" : "",
                      ": a damaged file, or one saved after the run diverged; resume from another checkpoint, or "
                      "start afresh with --overwrite");
  }
}

}  // namespace eng::models
