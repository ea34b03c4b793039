// The step profile of train (models/train/step_profile.h).
#include "models/train/step_profile.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/durable_file.h"

namespace eng::models {

namespace {
const char* kind_name(kprof::Kind k) {
  switch (k) {
    case kprof::Kind::gemm:
      return "gemm";
    case kprof::Kind::attention_forward:
      return "attention_forward";
    case kprof::Kind::attention_backward:
      return "attention_backward";
    case kprof::Kind::host:
      return "host";
    case kprof::Kind::memory:
      break;
  }
  return "memory";
}

double total_model_ms(const std::vector<KernelRow>& rows) {
  double ms = 0;
  for (const KernelRow& r : rows) ms += r.model_ms;
  return ms;
}
}  // namespace

StepProfile::StepProfile(int64_t step, Device dev, Precision level, const std::string& model_gpu, std::string out_dir,
                         bool writes)
    : step_(step),
      dev_(dev),
      level_(level),
      gpu_(gpu_model(model_gpu)),
      out_dir_(std::move(out_dir)),
      writes_(writes) {}

void StepProfile::before(int64_t step) {
  if (step != step_) return;
  profile_ = std::make_unique<KernelProfile>(dev_);
  profile_->start();
}

std::string StepProfile::after(int64_t step) {
  if (step != step_ || !profile_) return "";
  profile_->stop();
  const std::vector<KernelCall>& calls = profile_->calls();
  const std::vector<KernelRow> rows = kernel_rows(calls, gpu_, level_, ModelAttention::as_run);
  const std::vector<KernelRow> cudnn = kernel_rows(calls, gpu_, level_, ModelAttention::cudnn);
  const bool measured = dev_.type == DeviceType::cuda;
  std::string out =
      kernel_table(rows, cat("kernel profile of step ", step, " on ", dev_.str(), " at ", precision_name(level_),
                             measured ? " (ms: measured with CUDA events around each call of the eager step)" : "",
                             "; model ms: modelled on an ", gpu_.peak->label, " (engine/gpu_model.cpp)"));
  double launches = 0, launches_cudnn = 0;
  for (const KernelRow& r : rows) launches += double(r.launches);
  for (const KernelRow& r : cudnn) launches_cudnn += double(r.launches);
  out += cat("modelled step on an ", gpu_.peak->label, ": ", total_model_ms(rows), " ms with the attention it ran, ",
             total_model_ms(cudnn), " ms with cuDNN's in place of ours; ", launches, " launches (", launches_cudnn,
             " with cuDNN's)\n");

  nlohmann::json j{{"step", step},
                   {"device", dev_.str()},
                   {"precision", precision_name(level_)},
                   {"model_gpu", gpu_.key},
                   {"model_ms", total_model_ms(rows)},
                   {"model_ms_cudnn_attention", total_model_ms(cudnn)},
                   {"launches_cudnn_attention", launches_cudnn}};
  nlohmann::json& jr = j["rows"] = nlohmann::json::array();
  double measured_ms = 0;
  for (const KernelRow& r : rows) {
    jr.push_back({{"name", r.name},
                  {"kind", kind_name(r.kind)},
                  {"calls", r.calls},
                  {"launches", r.launches},
                  {"bytes", r.bytes},
                  {"flops", r.flops},
                  {"model_ms", r.model_ms},
                  {"basis", r.basis}});
    if (measured) jr.back()["ms"] = r.measured_ms, measured_ms += r.measured_ms;
  }
  if (measured) j["measured_ms"] = measured_ms;
  if (writes_) write_file_durably(out_dir_ + "/kernel_profile.json", j.dump(1) + "\n");
  profile_.reset();
  return out;
}

std::string StepProfile::replay_line(int64_t step, double seconds) const {
  return cat("kernel profile: step ", step, ", one CUDA graph replay of the same step, took ", seconds * 1e3,
             " ms (wall, host included)");
}

}  // namespace eng::models
