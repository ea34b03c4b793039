// --attention checks (models/train/attention_option.h).
#include "models/train/attention_option.h"

#include "base/error.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "kernels/cudnn/cudnn.h"

namespace eng::models {

void check_attention_option(const TrainConfig& c) {
  if (parse_attention_impl(c.s("attention")) != AttentionImpl::cudnn) return;
  const Precision p = parse_precision(c.s("precision"));
  ENGINE_USER_CHECK(p == Precision::O2 || p == Precision::O2_fp16 || p == Precision::O3,
                    "config: attention cudnn runs ", "in bf16/fp16 only: precision O2, O2-fp16 or O3 (got ",
                    c.s("precision"), ")");
  const int64_t C = c.i("n_embd"), NH = c.i("n_head");
  if (NH <= 0 || C % NH != 0) return;  // the model's own check names n_embd and n_head
  SdpaShape s;
  s.B = s.T = 1, s.NH = NH, s.HS = C / NH;
  const std::string why = cudnn_sdpa_unsupported(s);
  ENGINE_USER_CHECK(why.empty(), "config: attention cudnn: n_embd / n_head = ", s.HS, ": ", why);
}

void check_attention_device(const TrainConfig& c, Device dev) {
  if (parse_attention_impl(c.s("attention")) != AttentionImpl::cudnn) return;
  ENGINE_USER_CHECK(dev.type == DeviceType::cuda,
                    "config: attention cudnn needs the cuda device (cuDNN runs on NVIDIA ", "GPUs); this run is on ",
                    dev.str(), " (use --attention ours there)");
}

void check_cudnn_loads(const TrainConfig& c) {
  if (parse_attention_impl(c.s("attention")) != AttentionImpl::cudnn) return;
  const std::string why = cudnn_unavailable_reason();
  ENGINE_USER_CHECK(why.empty(), "attention cudnn: cuDNN is unavailable: ", why);
}

}  // namespace eng::models
