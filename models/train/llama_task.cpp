// A Llama on token files as a training task (see llama_task.h).
#include "models/train/llama_task.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "comm/pipeline_schedule.h"
#include "comm/vocab_parallel.h"
#include "engine/ops.h"
#include "models/gpt2/sample.h"
#include "models/gpt2/sample_text.h"
#include "models/llama/llama_io.h"
#include "models/llama/llama_tp.h"
#include "models/train/lm_models.h"
#include "models/train/memory_plan.h"
#include "models/train/token_batches.h"

namespace eng::models {

LlamaConfig llama_config(const TrainConfig& c) {
  LlamaConfig l;
  l.vocab_size = c.i("vocab_size");
  l.block_size = c.i("block_size");
  l.n_layer = c.i("n_layer");
  l.n_head = c.i("n_head");
  l.n_kv_head = c.i("n_kv_head") > 0 ? c.i("n_kv_head") : c.i("n_head");
  l.n_embd = c.i("n_embd");
  l.ffn_hidden = c.i("ffn_hidden");
  l.rms_eps = c.f("rms_eps");
  l.rope.theta = c.f("rope_theta");
  l.rope.factor = c.f("rope_scaling_factor");
  l.rope.low_freq_factor = c.f("rope_low_freq_factor");
  l.rope.high_freq_factor = c.f("rope_high_freq_factor");
  l.rope.original_max_positions = c.i("rope_original_max_positions");
  l.tie_embeddings = c.b("tie_embeddings");
  l.attention = parse_attention_impl(c.s("attention"));
  ENGINE_USER_CHECK(c.i("n_kv_head") >= 0, "config: n_kv_head must be >= 0 (0: n_head), got ", c.i("n_kv_head"));
  try {
    l.validate();
  } catch (const Error& e) {
    ENGINE_USER_FAIL("config: ", e.what());
  }
  ENGINE_USER_CHECK(c.i("seq_len") > 0 && c.i("seq_len") <= l.block_size, "config: seq_len ", c.i("seq_len"),
                    " must be in [1, block_size = ", l.block_size, "]");
  const int64_t tp = c.i("tp");
  ENGINE_USER_CHECK(tp < 1 || (l.n_head % tp == 0 && l.n_kv_head % tp == 0 && l.hidden() % tp == 0),
                    "config: tp = ", tp, ": n_head ", l.n_head, ", n_kv_head ", l.n_kv_head, " and ffn_hidden ",
                    l.hidden(),
                    " must divide by tp (each rank takes whole query and K/V heads; K/V heads are not replicated)");
  for (const char* k : {"sample_every", "sample_tokens", "top_k"})
    ENGINE_USER_CHECK(c.i(k) >= 0, "config: ", k, " must be >= 0, got ", c.i(k));
  ENGINE_USER_CHECK(c.f("temperature") > 0, "config: temperature must be > 0");
  return l;
}

std::vector<int64_t> llama_stage_layers(const TrainConfig& c) {
  // A block's forward FLOPs per token: 2 x its matmul parameters (the qkv
  // and o projections, the MLP's three) plus attention's 4 T C; the head's 2 V C on the last stage.
  const double C = double(c.i("n_embd")), T = double(c.i("seq_len")), V = double(c.i("vocab_size"));
  const double NH = double(c.i("n_head")), NKV = double(c.i("n_kv_head") > 0 ? c.i("n_kv_head") : c.i("n_head"));
  const double F = double(c.i("ffn_hidden") > 0 ? c.i("ffn_hidden") : (8 * c.i("n_embd") / 3 + 63) / 64 * 64);
  const double block = 2 * (C * C * (NH + 2 * NKV) / NH + C * C + 3 * C * F) + 4 * T * C;
  const std::vector<double> blocks(size_t(c.i("n_layer")), block);
  return comm::stage_layers(c.s("pp_layers"), blocks, 0.0, 2 * V * C, int(c.i("pp")));
}

void llama_shape_from_init(TrainConfig& c) {
  namespace fs = std::filesystem;
  if (c.s("model") != "llama" || c.s("init_from").empty()) return;
  const fs::path from(c.s("init_from"));
  const fs::path file = fs::is_directory(from) ? from / "config.json" : from.parent_path() / "config.json";
  ENGINE_USER_CHECK(fs::exists(file), "config: init_from ", from.string(), ": no config.json ",
                    fs::is_directory(from) ? "in it" : "beside it",
                    " (a LlamaForCausalLM directory has one; its shape is the model's)");
  const LlamaConfig l = llama_config_from_hf(file.string());
  const nlohmann::json shape{{"vocab_size", l.vocab_size},
                             {"block_size", l.block_size},
                             {"n_layer", l.n_layer},
                             {"n_head", l.n_head},
                             {"n_kv_head", l.n_kv_head},
                             {"n_embd", l.n_embd},
                             {"ffn_hidden", l.ffn_hidden},
                             {"rms_eps", l.rms_eps},
                             {"rope_theta", l.rope.theta},
                             {"rope_scaling_factor", l.rope.factor},
                             {"rope_low_freq_factor", l.rope.low_freq_factor},
                             {"rope_high_freq_factor", l.rope.high_freq_factor},
                             {"rope_original_max_positions", l.rope.original_max_positions},
                             {"tie_embeddings", l.tie_embeddings}};
  for (const auto& [key, value] : shape.items()) {
    const nlohmann::json mine = c.json()[key];
    if (c.is_set(key)) {
      const bool same =
          mine.is_number() && value.is_number() ? mine.get<double>() == value.get<double>() : mine == value;
      // 0 asks for the default (n_kv_head: n_head; ffn_hidden: 8 C / 3): the
      // file's value then; a shorter block_size only shortens the rotary table.
      const bool automatic = (key == "n_kv_head" || key == "ffn_hidden") && mine == 0;
      if (key == "block_size" && mine.get<int64_t>() <= value.get<int64_t>()) continue;
      ENGINE_USER_CHECK(same || automatic, "config: ", key, " = ", mine.dump(), " but ", file.string(), " says ",
                        value.dump(), " (the model's shape comes from init_from: leave ", key,
                        " out of the config file and the command line)");
    }
    c.set_from_cli(key, value.is_string() ? value.get<std::string>() : value.dump());
  }
}

namespace {

class LlamaTask : public TrainTask {
 public:
  LlamaTask(const TrainConfig& c, const BatchPlan& plan, Device dev, const ModelGrid& mg)
      : cfg_(c),
        plan_(plan),
        l_(llama_config(c)),
        T_(c.i("seq_len")),
        seed_(uint64_t(c.i("seed"))),
        recompute_(c.b("recompute") ? Recompute::yes : Recompute::no),
        data_(c, plan, l_.vocab_size, mg),
        sample_text_(c.s("tokenizer"), c.s("tokenizer_file"), c.s("prompt"), l_.vocab_size),
        dev_(dev),
        mg_(mg),
        m_(l_, seed_, dev, mg, c.b("sequence_parallel")) {}

  Module& model() override { return m_.module(); }
  std::string summary() const override {
    std::string out = cat("Llama ", l_.n_layer, " layers, ", l_.n_head, " heads on ", l_.n_kv_head, " K/V heads, ",
                          l_.n_embd, " wide, MLP ", l_.hidden(), ", ", l_.tie_embeddings ? "tied" : "untied", " head, ",
                          double(full_parameters()) / 1e6, "M parameters; ", items_per_step(), " tokens/step");
    const int P = mg_.tp_size(), cp = mg_.cp_size();
    if (P > 1)
      out += cat("; tensor parallel over ", P, " ranks", cfg_.b("sequence_parallel") ? " (sequence parallel)" : "",
                 ": ", m_.split->num_parameters() / 1e6, "M parameters on each (", l_.n_head / P, " heads, ",
                 l_.n_kv_head / P, " K/V heads, vocabulary padded to ", comm::padded_vocab(l_.vocab_size, P), ")");
    if (cp > 1) out += cat("; context parallel over ", cp, " ranks: ", T_ / cp, " positions of each window on each");
    if (mg_.pp)
      out += cat("; ", stage_summary(mg_.stage_layers), " (the embedding on the first, the head on the last)");
    return out;
  }
  std::string data_summary() const override { return data_.describe(); }
  const char* unit() const override { return "tok"; }
  std::string checkpoint_note() const override {
    return "load with LlamaForCausalLM.from_pretrained(dir), see docs/llama.md";
  }
  int64_t items_per_step() const override { return plan_.global() * T_; }
  double flops_per_step() const override { return llama_flops_per_token(l_, T_) * double(items_per_step()); }
  PeakGemm peak_gemm() const override { return {plan_.micro * T_, 2 * l_.hidden(), l_.n_embd}; }  // gate_up_proj
  // GPT-2's accounting (memory_plan.h: 16 C-wide tensors a block) for the
  // Llama block's: 6 C-wide tensors, the qkv (at most 3 C) and the MLP's 3
  // F, which is 8 C at F = 8 C / 3 (more counted when F is wider); fp32
  // logits and their softmax over this rank's vocabulary shard.
  double activation_bytes_per_sample(Precision p) const override {
    const int64_t tp = mg_.tp_size();
    const int64_t layers = mg_.pp ? mg_.stage_layers[size_t(mg_.pp_rank())] : l_.n_layer;
    const BlockStack s{
        layers,       T_, l_.n_embd, l_.n_head, tp, tp > 1 && cfg_.b("sequence_parallel"), recompute_ == Recompute::yes,
        mg_.cp_size()};
    const double wider_mlp = std::max(0.0, 3.0 * double(l_.hidden()) - 8.0 * double(l_.n_embd)) / double(tp);
    const double extra = recompute_ == Recompute::yes ? 0.0 : double(layers) * wider_mlp * 4.0 / double(mg_.cp_size());
    const double head = mg_.last_stage() ? 8.0 * double(comm::padded_vocab(l_.vocab_size, int(tp))) / double(tp) : 0.0;
    return models::activation_bytes_per_sample(s, dev_, p, head + extra);
  }
  std::vector<std::string> shape_keys() const override {
    return {"vocab_size",
            "block_size",
            "n_layer",
            "n_head",
            "n_kv_head",
            "n_embd",
            "ffn_hidden",
            "tie_embeddings",
            "rms_eps",
            "rope_theta",
            "rope_scaling_factor",
            "rope_low_freq_factor",
            "rope_high_freq_factor",
            "rope_original_max_positions"};
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
  // Tied: the table on the first stage and the head's on the last.
  std::vector<Tensor> tied_parameters() const override {
    if (!mg_.pp || mg_.pp_size() == 1 || !l_.tie_embeddings || !m_.split->embed_tokens) return {};
    return {m_.split->embed_tokens->weight};
  }

  EvalResult evaluate(const Autocast& ac) override {
    const auto loss = [&](const MicroBatch& b) {
      return m_.loss(b.x.to(dev_), b.y.to(dev_), Recompute::no, ac).item();
    };
    const auto stage = [&](const Tensor& in, const MicroBatch& b) { return stage_forward(in, b, ac); };
    EvalResult r;
    r.loss =
        data_.validation_loss(cfg_.i("val_batches"), loss, m_.pipe.get(), stage, m_.pipe ? stage_io(ac) : StageIo{});
    return r;
  }
  bool has_samples() const override { return true; }
  bool sample_on_every_rank() const override { return m_.split != nullptr; }
  std::string sample(int64_t step) override {
    LogitsFn logits = [this](const std::vector<int32_t>& window) {
      return m_.logits(window, l_.block_size, l_.vocab_size);
    };
    const SampleOptions so{cfg_.f("temperature"), cfg_.i("top_k"), 1.0, seed_ * 977 + uint64_t(step)};
    const std::vector<int32_t> out =
        generate(logits, l_.vocab_size, l_.block_size, sample_text_.prompt(), cfg_.i("sample_tokens"), so);
    const std::string& note = sample_text_.note();
    return "---- sample at step " + std::to_string(step) + (note.empty() ? "" : " (" + note + ")") + " ----" +
           sample_text_.render(out) + "\n----";
  }

  void init_from(const std::string& path) override {
    m_.init_from([&](Llama& m) { load_llama_weights(path, m); });
  }
  std::vector<std::pair<std::string, Tensor>> gather_for_checkpoint(
      std::vector<std::pair<std::string, Tensor>> opt_state) override {
    return m_.gather(std::move(opt_state), [this](const std::string& name) { return owner_stage(name); });
  }
  void save_checkpoint(const std::string& dir, const std::vector<std::pair<std::string, Tensor>>& opt_state,
                       int64_t step, const nlohmann::json& config, const nlohmann::json& extra) const override {
    save_llama_checkpoint(dir, m_.to_save(), opt_state, step, config, extra);
  }
  nlohmann::json load_checkpoint(const std::string& dir, Optimizer& opt) override {
    return m_.load_checkpoint(opt, [&](Llama& m, Optimizer& o) { return load_llama_checkpoint(dir, m, o); });
  }
  nlohmann::json data_state(int64_t done) const override { return data_.data_state(done); }
  void check_resume(const std::string& dir, const nlohmann::json& state) const override {
    data_.check_resume(dir, state);
  }

 private:
  const TrainConfig& cfg_;
  BatchPlan plan_;
  LlamaConfig l_;
  int64_t T_;
  uint64_t seed_;
  Recompute recompute_;
  TokenBatches data_;
  SampleText sample_text_;
  Device dev_;
  ModelGrid mg_;
  LmModels<LlamaConfig, Llama, LlamaTp, LlamaTpOptions> m_;

  // The stage that sends a parameter: a block's own, the norm and head the
  // last, the table the first (tied: held by both, sent by neither; rank 0 has it).
  int owner_stage(const std::string& name) const {
    return parameter_stage(name, "model.layers.", {"model.norm.", "lm_head."}, mg_.stage_layers);
  }
  int64_t full_parameters() const {
    if (!m_.split) return m_.serial->num_parameters();
    const int64_t C = l_.n_embd, HS = l_.head_size();
    const int64_t block = C * (l_.n_head + 2 * l_.n_kv_head) * HS + C * C + 3 * C * l_.hidden() + 2 * C;
    return l_.n_layer * block + l_.vocab_size * C * (l_.tie_embeddings ? 1 : 2) + C;
  }
};

}  // namespace

std::unique_ptr<TrainTask> make_llama_task(const TrainConfig& c, const BatchPlan& plan, Device dev,
                                           const ModelGrid& mg) {
  return std::make_unique<LlamaTask>(c, plan, dev, mg);
}

}  // namespace eng::models
