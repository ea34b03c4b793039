// The checks of train's options that need no data (config_checks.h).
#include "models/train/config_checks.h"

#include "base/error.h"
#include "comm/pipeline_schedule.h"
#include "engine/gpu_model.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/profile.h"
#include "models/checkpoint.h"
#include "models/train/attention_option.h"
#include "models/train/gpt2_task.h"
#include "models/train/llama_task.h"
#include "models/train/optimizer_option.h"
#include "models/train/tasks.h"
#include "models/train/vit_task.h"

namespace eng::models {

void validate_config(const TrainConfig& c) {
  const std::string model = c.s("model");
  ENGINE_USER_CHECK(model == "gpt2" || model == "llama" || model == "vit", "config: model '", model,
                    "': gpt2, llama or vit");
  const std::string foreign = c.foreign_options(model);
  ENGINE_USER_CHECK(foreign.empty(), "config: ", foreign, ": not read by model ", model,
                    " (see --help: the options marked for the other models)");
  for (const char* k : {"batch_size", "grad_accum", "steps", "val_batches", "log_every"})
    ENGINE_USER_CHECK(c.i(k) > 0, "config: ", k, " must be > 0, got ", c.i(k));
  for (const char* k : {"check_replicas", "stop_after", "warmup_steps", "val_every", "checkpoint_every"})
    ENGINE_USER_CHECK(c.i(k) >= 0, "config: ", k, " must be >= 0, got ", c.i(k));
  ENGINE_USER_CHECK(c.i("warmup_steps") <= c.i("steps"), "config: warmup_steps (", c.i("warmup_steps"),
                    ") must not exceed steps (", c.i("steps"), ")");
  ENGINE_USER_CHECK(c.f("lr") > 0 && c.f("min_lr") >= 0 && c.f("min_lr") <= c.f("lr"),
                    "config: need lr > 0 and 0 <= min_lr <= lr");
  const int64_t tp = c.i("tp");
  ENGINE_USER_CHECK(tp >= 1, "config: tp must be >= 1, got ", tp);
  if (tp > 1) {
    ENGINE_USER_CHECK(c.i("n_head") % tp == 0, "config: n_head = ", c.i("n_head"), " does not divide by tp = ", tp,
                      " (each tp rank takes whole heads)");
    ENGINE_USER_CHECK(4 * c.i("n_embd") % tp == 0, "config: the MLP width 4 n_embd = ", 4 * c.i("n_embd"),
                      " does not divide by tp = ", tp);
    ENGINE_USER_CHECK(
        parse_precision(c.s("precision")) != Precision::O2_fp16, "config: O2-fp16 with tp = ", tp,
        " is not supported yet (the loss scaler's overflow check would need the tp ranks' agreement); use "
        "O2 (bf16)");
  }
  const int64_t cp = c.i("cp");
  ENGINE_USER_CHECK(cp >= 1, "config: cp must be >= 1, got ", cp);
  if (cp > 1) {
    ENGINE_USER_CHECK(parse_attention_impl(c.s("attention")) != AttentionImpl::cudnn, "config: attention ",
                      c.s("attention"), " with cp = ", cp,
                      ": context parallelism runs our attention (a slice of the queries against every key); use "
                      "--attention ours");
    ENGINE_USER_CHECK(parse_precision(c.s("precision")) != Precision::O2_fp16, "config: O2-fp16 with cp = ", cp,
                      " is not supported yet; use O2 (bf16)");
    if (model != "vit") {
      ENGINE_USER_CHECK(c.i("seq_len") % cp == 0, "config: seq_len = ", c.i("seq_len"), " does not divide by cp = ", cp,
                        " (each cp rank takes seq_len / cp positions; change seq_len or cp)");
      ENGINE_USER_CHECK(!c.b("sequence_parallel") || c.i("batch_size") * c.i("seq_len") / cp % tp == 0,
                        "config: sequence_parallel: batch_size x seq_len / cp = ", c.i("batch_size"), " x ",
                        c.i("seq_len") / cp, " token rows do not divide by tp = ", tp);
    }
  }
  const int64_t pp = c.i("pp");
  ENGINE_USER_CHECK(pp >= 1, "config: pp must be >= 1, got ", pp);
  ENGINE_USER_CHECK(pp > 1 || c.s("pp_layers").empty(), "config: pp_layers '", c.s("pp_layers"),
                    "' with pp = 1 (set pp to the number of stages listed)");
  if (pp > 1) {
    comm::parse_pipe_schedule(c.s("pp_schedule"));
    model_stage_layers(c);  // pp within n_layer, pp_layers well formed
    ENGINE_USER_CHECK(
        parse_precision(c.s("precision")) != Precision::O2_fp16, "config: O2-fp16 with pp = ", pp,
        " is not supported yet (the loss scaler's overflow check would need every stage's agreement); use "
        "O2 (bf16)");
  }
  ENGINE_USER_CHECK(c.i("global_batch") >= 0, "config: global_batch must be >= 0");
  ENGINE_USER_CHECK(c.i("keep_checkpoints") >= 0, "config: keep_checkpoints must be >= 0");
  ENGINE_USER_CHECK(c.s("resume_from").empty() || c.json()["resume"] == true, "config: resume_from ",
                    c.s("resume_from"), " needs --resume (the run continues in out_dir from that checkpoint)");
  if (model == "gpt2" && !c.s("eval_hellaswag").empty()) {
    ENGINE_USER_CHECK(tp == 1 && cp == 1 && pp == 1,
                      "config: eval_hellaswag runs on data-parallel ranks only (the "
                      "examples split over them); tp, cp and pp must be 1, got ",
                      tp, ", ", cp, ", ", pp);
    ENGINE_USER_CHECK(c.i("hellaswag_limit") >= 0, "config: hellaswag_limit must be >= 0");
  }
  check_optimizer_options(c);
  ENGINE_USER_CHECK(c.i("zero") == 0 || c.i("zero") == 1, "config: zero = ", c.i("zero"),
                    ": 0 (off) or 1 (ZeRO-1) only");
  ENGINE_USER_CHECK(c.s("ddp") == "bucketed" || c.s("ddp") == "naive", "config: ddp '", c.s("ddp"),
                    "': bucketed or naive");
  ENGINE_USER_CHECK(c.s("ddp") == "bucketed" || c.i("zero") == 0,
                    "config: ddp naive with zero 1: ZeRO shards the buckets; use --ddp bucketed");
  ENGINE_USER_CHECK(c.i("zero") == 0 || parse_precision(c.s("precision")) != Precision::O2_fp16,
                    "config: zero 1 with O2-fp16 is not supported ",
                    "(the loss scaler's overflow check would need the shards' agreement); use O2 (bf16)");
  ENGINE_USER_CHECK(!(c.json()["resume"] != false && c.b("overwrite")),
                    "config: resume and overwrite together: ", "--resume continues ", c.s("out_dir"),
                    ", --overwrite deletes its run; choose one");
  ENGINE_USER_CHECK(c.f("checkpoint_minutes") >= 0, "config: checkpoint_minutes must be >= 0 (0: off), got ",
                    c.f("checkpoint_minutes"));
  ENGINE_USER_CHECK(c.f("comm_timeout") >= 0, "config: comm_timeout must be >= 0 seconds");
  profile::parse_step_window(c.s("profile_steps"), c.i("steps"), "config: profile_steps");
  ENGINE_USER_CHECK(c.i("kernel_profile") >= 0 && c.i("kernel_profile") <= c.i("steps"), "config: kernel_profile ",
                    c.i("kernel_profile"), ": expected a step from 1 to steps (", c.i("steps"), "), or 0 for none");
  ENGINE_USER_CHECK(c.i("kernel_profile") == 0 || Device::parse(c.s("device")).type != DeviceType::cpu,
                    "config: kernel_profile on the cpu device: the cpu launches no GPU kernels; profile on emu "
                    "(modelled; ENGINE_EMU_COUNT_ONLY=1 for a model too large to emulate) or cuda (measured)");
  gpu_model(c.s("model_gpu"));  // a one-line error naming the choices
  check_attention_option(c);
  // --gemm mma: our tensor-core GEMM takes bf16/fp16 products on emu or cuda; anywhere else it would do nothing.
  if (parse_gemm_impl(c.s("gemm")) == GemmImpl::mma) {
    const Precision p = parse_precision(c.s("precision"));
    ENGINE_USER_CHECK(p == Precision::O2 || p == Precision::O2_fp16 || p == Precision::O3,
                      "config: gemm mma runs bf16/fp16 products only: precision O2, O2-fp16 or O3 (got ",
                      c.s("precision"), ")");
    ENGINE_USER_CHECK(Device::parse(c.s("device")).type != DeviceType::cpu,
                      "config: gemm mma is a GPU kernel: device emu or cuda (the cpu's GEMMs are OpenBLAS)");
  }
  if (model == "gpt2")
    gpt2_config(c);
  else if (model == "llama")
    llama_config(c);
  else
    check_vit_options(c);
}

void check_resumed_config(const std::string& ckpt_dir, const nlohmann::json& state, const TrainConfig& cfg,
                          const std::vector<std::string>& shape_keys, int64_t steps) {
  for (const std::string& k : shape_keys) {
    ENGINE_USER_CHECK(state["config"].value(k, nlohmann::json()) == cfg.json()[k], ckpt_dir, ": checkpoint has ", k,
                      " = ", state["config"].value(k, nlohmann::json()).dump(), ", the config asks for ",
                      cfg.json()[k].dump());
  }
  ENGINE_USER_CHECK(state["config"].value("seed", nlohmann::json()) == cfg.json()["seed"], ckpt_dir,
                    ": checkpoint was trained with seed ", state["config"].value("seed", nlohmann::json()).dump(),
                    ", the config asks for ", cfg.json()["seed"].dump(), " (the batch order would change)");
  const int64_t start = state["step"].get<int64_t>();
  ENGINE_USER_CHECK(start <= steps, ckpt_dir, ": checkpoint is at step ", start, ", beyond steps = ", steps);
}

void check_resume_optimizer(const std::string& ckpt_dir, const TrainConfig& cfg) {
  const nlohmann::json saved = read_checkpoint_state(ckpt_dir).value("config", nlohmann::json::object());
  const std::string opt = saved.is_object() ? saved.value("optimizer", std::string("adamw")) : "adamw";
  // 8-bit state of a split parameter is quantized in the shard's own blocks.
  const int64_t saved_tp = saved.is_object() ? saved.value("tp", int64_t(1)) : 1;
  ENGINE_USER_CHECK(opt != "adamw8bit" || saved_tp == cfg.i("tp"), ckpt_dir,
                    ": the checkpoint's 8-bit AdamW state was quantized in the blocks of tp = ", saved_tp,
                    " shards; resume it at tp = ", saved_tp, " (this run has tp = ", cfg.i("tp"), ")");
}

}  // namespace eng::models
