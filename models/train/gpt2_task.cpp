// GPT-2 on token files as a training task (see gpt2_task.h).
#include "models/train/gpt2_task.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "base/error.h"
#include "comm/cp_mappings.h"
#include "comm/pipeline_schedule.h"
#include "comm/tp_mappings.h"
#include "comm/world.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "io/token_file.h"
#include "models/gpt2/gpt2_io.h"
#include "models/gpt2/gpt2_tp.h"
#include "models/gpt2/hellaswag.h"
#include "models/gpt2/sample.h"
#include "models/gpt2/sample_text.h"
#include "models/train/lm_models.h"
#include "models/train/memory_plan.h"
#include "models/train/token_batches.h"
#include "models/train/tp_checkpoint.h"

namespace eng::models {

GPT2Config gpt2_config(const TrainConfig& c) {
  GPT2Config g;
  g.vocab_size = c.i("vocab_size");
  g.block_size = c.i("block_size");
  g.n_layer = c.i("n_layer");
  g.n_head = c.i("n_head");
  g.n_embd = c.i("n_embd");
  g.attention = parse_attention_impl(c.s("attention"));
  g.validate();
  ENGINE_USER_CHECK(c.i("seq_len") > 0 && c.i("seq_len") <= g.block_size, "config: seq_len ", c.i("seq_len"),
                    " must be in [1, block_size = ", g.block_size, "]");
  for (const char* k : {"sample_every", "sample_tokens", "top_k"})
    ENGINE_USER_CHECK(c.i(k) >= 0, "config: ", k, " must be >= 0, got ", c.i(k));
  ENGINE_USER_CHECK(c.f("temperature") > 0, "config: temperature must be > 0");
  return g;
}

std::vector<int64_t> gpt2_stage_layers(const TrainConfig& c) {
  const double C = double(c.i("n_embd")), T = double(c.i("seq_len")), V = double(c.i("vocab_size"));
  const std::vector<double> blocks(size_t(c.i("n_layer")), 24 * C * C + 4 * T * C);
  return comm::stage_layers(c.s("pp_layers"), blocks, 0.0, 2 * V * C, int(c.i("pp")));
}

namespace {

// Made at the start, on the rank that writes checkpoints: a ranks file whose
// merges cannot be recovered fails before the first step, not at its first save.
ExtraFiles checkpoint_tokenizer_files(const SampleText& text, int64_t block_size) {
  const text::Tokenizer* tok = text.tokenizer();
  if (comm::world().rank != 0 || !tok || !tok->bpe()) return {};
  return gpt2_tokenizer_files(*tok->bpe(), block_size);
}

std::vector<HellaSwagExample> load_eval_hellaswag(const TrainConfig& c, const SampleText& text) {
  if (c.s("eval_hellaswag").empty()) return {};
  ENGINE_USER_CHECK(text.tokenizer(), "config: eval_hellaswag needs a tokenizer (bytes or gpt2), not ", text.kind());
  return load_hellaswag(c.s("eval_hellaswag"), *text.tokenizer(), c.i("hellaswag_limit"));
}

class GPT2Task : public TrainTask {
 public:
  GPT2Task(const TrainConfig& c, const BatchPlan& plan, Device dev, const ModelGrid& mg)
      : cfg_(c),
        plan_(plan),
        g_(gpt2_config(c)),
        T_(c.i("seq_len")),
        seed_(uint64_t(c.i("seed"))),
        recompute_(c.b("recompute") ? Recompute::yes : Recompute::no),
        data_(c, plan, g_.vocab_size, mg),
        sample_text_(c.s("tokenizer"), c.s("tokenizer_file"), c.s("prompt"), g_.vocab_size),
        hellaswag_(load_eval_hellaswag(c, sample_text_)),
        tokenizer_files_(checkpoint_tokenizer_files(sample_text_, g_.block_size)),
        dev_(dev),
        mg_(mg),
        m_(g_, seed_, dev, mg, c.b("sequence_parallel")) {}

  Module& model() override { return m_.module(); }
  std::string summary() const override {
    char buf[300];
    std::snprintf(buf, sizeof buf, "GPT-2 %lld layers, %lld heads, %lld wide, %.2fM parameters; %lld tokens/step",
                  (long long)g_.n_layer, (long long)g_.n_head, (long long)g_.n_embd, double(full_parameters()) / 1e6,
                  (long long)items_per_step());
    std::string out = buf;
    const int P = mg_.tp_size(), cp = mg_.cp_size();
    if (P > 1)
      out += cat("; tensor parallel over ", P, " ranks", cfg_.b("sequence_parallel") ? " (sequence parallel)" : "",
                 ": ", m_.split->num_parameters() / 1e6, "M parameters on each (", g_.n_head / P,
                 " heads, vocabulary padded to ", comm::padded_vocab(g_.vocab_size, P), ")");
    if (cp > 1) out += cat("; context parallel over ", cp, " ranks: ", T_ / cp, " positions of each window on each");
    if (mg_.pp)
      out +=
          cat("; ", stage_summary(mg_.stage_layers), " (embeddings on the first, ln_f and the tied head on the last)");
    return out;
  }
  std::string data_summary() const override { return data_.describe(); }
  const char* unit() const override { return "tok"; }
  std::string checkpoint_note() const override { return "load with GPT2LMHeadModel, see docs/train.md"; }
  int64_t items_per_step() const override { return plan_.global() * T_; }
  double flops_per_step() const override { return gpt2_flops_per_token(g_, T_) * double(items_per_step()); }
  PeakGemm peak_gemm() const override { return {plan_.micro * T_, 4 * g_.n_embd, g_.n_embd}; }  // like c_fc
  double activation_bytes_per_sample(Precision p) const override {
    const int64_t tp = mg_.tp_size();
    // A pipeline stage keeps its own blocks' activations (and, on the last, the logits).
    const int64_t layers = mg_.pp ? mg_.stage_layers[size_t(mg_.pp_rank())] : g_.n_layer;
    const BlockStack s{
        layers,       T_, g_.n_embd, g_.n_head, tp, tp > 1 && cfg_.b("sequence_parallel"), recompute_ == Recompute::yes,
        mg_.cp_size()};
    // fp32 logits and the cross-entropy's probabilities over this rank's vocabulary shard.
    const double head = mg_.last_stage() ? 8.0 * double(comm::padded_vocab(g_.vocab_size, int(tp))) / double(tp) : 0.0;
    return models::activation_bytes_per_sample(s, dev_, p, head);
  }
  std::vector<std::string> shape_keys() const override {
    return {"vocab_size", "block_size", "n_layer", "n_head", "n_embd"};
  }

  void start(int64_t step) override { data_.start(step); }
  MicroBatch next(int64_t m) override { return data_.next(m); }
  Tensor loss(const Tensor& x, const Tensor& y, const Autocast& ac) const override {
    return m_.loss(x, y, recompute_, ac);
  }
  const TpGrads& tp_grads() const override { return m_.tp_grads; }

  Tensor stage_forward(const Tensor& in, const MicroBatch& b, const Autocast& ac) const override {
    return m_.stage_forward(in, b, recompute_, ac);
  }
  StageIo stage_io(const Autocast& ac) const override { return m_.stage_io(plan_.micro, T_, ac); }
  std::vector<Tensor> tied_parameters() const override {
    if (!mg_.pp || mg_.pp_size() == 1 || !m_.split->wte) return {};
    return {m_.split->wte->weight};
  }

  EvalResult evaluate(const Autocast& ac) override {
    NoGradGuard ng;
    EvalResult r;
    const auto loss = [&](const MicroBatch& b) {
      return m_.loss(b.x.to(dev_), b.y.to(dev_), Recompute::no, ac).item();
    };
    const auto stage = [&](const Tensor& in, const MicroBatch& b) { return stage_forward(in, b, ac); };
    r.loss =
        data_.validation_loss(cfg_.i("val_batches"), loss, m_.pipe.get(), stage, m_.pipe ? stage_io(ac) : StageIo{});
    if (!hellaswag_.empty()) {  // dp only (config_checks): rank r scores examples r, r + dp, ...
      const HellaSwagTally t = tally(score_hellaswag(*m_.serial, hellaswag_, plan_.dp_rank, plan_.dp, 4, ac));
      const double n = comm::all_reduce_host(t.examples, comm::HostOp::sum, "the HellaSwag count");
      const double ok = comm::all_reduce_host(t.correct, comm::HostOp::sum, "the HellaSwag count");
      const double ok_norm = comm::all_reduce_host(t.correct_norm, comm::HostOp::sum, "the HellaSwag count");
      r.metrics["val_hellaswag_acc"] = ok / n;
      r.metrics["val_hellaswag_acc_norm"] = ok_norm / n;
      r.line = cat("hellaswag acc_norm ", ok_norm / n, " (", ok_norm, "/", n, "), acc ", ok / n);
    }
    return r;
  }
  bool has_samples() const override { return true; }
  // Under tp and cp every rank of the model's group runs the loop: the logits are gathered over both.
  bool sample_on_every_rank() const override { return m_.split != nullptr; }
  // Samples run our attention whatever --attention says (GPT2::forward says why).
  std::string sample(int64_t step) override {
    LogitsFn logits = [this](const std::vector<int32_t>& window) {
      return m_.logits(window, g_.block_size, g_.vocab_size);
    };
    const SampleOptions so{cfg_.f("temperature"), cfg_.i("top_k"), 1.0, seed_ * 977 + uint64_t(step)};
    const std::vector<int32_t> out =
        generate(logits, g_.vocab_size, g_.block_size, sample_text_.prompt(), cfg_.i("sample_tokens"), so);
    const std::string& note = sample_text_.note();  // auto fell back to ids: say why
    return "---- sample at step " + std::to_string(step) + (note.empty() ? "" : " (" + note + ")") + " ----" +
           sample_text_.render(out) + "\n----";
  }

  void init_from(const std::string& path) override {
    m_.init_from([&](GPT2& m) { load_gpt2_weights(path, m); });
  }
  // Under a split: each parameter from one stage: the tables from the first, ln_f from the last, a block from its own.
  std::vector<std::pair<std::string, Tensor>> gather_for_checkpoint(
      std::vector<std::pair<std::string, Tensor>> opt_state) override {
    return m_.gather(std::move(opt_state), [this](const std::string& name) { return owner_stage(name); });
  }
  void save_checkpoint(const std::string& dir, const std::vector<std::pair<std::string, Tensor>>& opt_state,
                       int64_t step, const nlohmann::json& config, const nlohmann::json& extra) const override {
    models::save_checkpoint(dir, m_.to_save(), opt_state, step, config, extra, tokenizer_files_);
  }
  nlohmann::json load_checkpoint(const std::string& dir, Optimizer& opt) override {
    return m_.load_checkpoint(opt, [&](GPT2& m, Optimizer& o) { return models::load_checkpoint(dir, m, o); });
  }
  nlohmann::json data_state(int64_t done) const override { return data_.data_state(done); }
  void check_resume(const std::string& dir, const nlohmann::json& state) const override {
    data_.check_resume(dir, state);
  }

 private:
  const TrainConfig& cfg_;
  BatchPlan plan_;
  GPT2Config g_;
  int64_t T_;
  uint64_t seed_;
  Recompute recompute_;
  TokenBatches data_;
  SampleText sample_text_;
  std::vector<HellaSwagExample> hellaswag_;  // --eval_hellaswag's examples, tokenized
  ExtraFiles tokenizer_files_;               // rank 0 of a gpt2 run: the tokenizer beside the weights
  Device dev_;
  ModelGrid mg_;
  LmModels<GPT2Config, GPT2, GPT2Tp, GPT2TpOptions> m_;

  int owner_stage(const std::string& name) const { return parameter_stage(name, "h.", {"ln_f."}, mg_.stage_layers); }

  int64_t full_parameters() const {
    if (!m_.split) return m_.serial->num_parameters();
    // The serial count: per layer 12 C^2 + 13 C, plus the tables and ln_f.
    const int64_t C = g_.n_embd;
    return g_.n_layer * (12 * C * C + 13 * C) + (g_.vocab_size + g_.block_size) * C + 2 * C;
  }
};

}  // namespace

std::unique_ptr<TrainTask> make_gpt2_task(const TrainConfig& c, const BatchPlan& plan, Device dev,
                                          const ModelGrid& mg) {
  return std::make_unique<GPT2Task>(c, plan, dev, mg);
}

}  // namespace eng::models
