// The ViT on HDF5 images or weather fields as a training task (see vit_task.h).
#include "models/train/vit_task.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "base/error.h"
#include "comm/pipeline_schedule.h"
#include "comm/world.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "io/image_dataset.h"
#include "io/weather_dataset.h"
#include "models/checkpoint.h"
#include "models/train/memory_plan.h"
#include "models/train/tp_checkpoint.h"
#include "models/vit/forecast_metrics.h"
#include "models/vit/vit.h"
#include "models/vit/vit_io.h"
#include "models/vit/vit_tp.h"

namespace eng::models {

namespace {
std::vector<int> channels(const std::string& list) { return list.empty() ? std::vector<int>{} : parse_channels(list); }
}  // namespace

void check_vit_options(const TrainConfig& c) {
  const std::string ds = c.s("dataset");
  ENGINE_USER_CHECK(ds == "images" || ds == "weather", "config: dataset '", ds, "': images or weather");
  for (const char* k : {"img_h", "img_w", "data_workers"})
    ENGINE_USER_CHECK(c.i(k) >= 0, "config: ", k, " must be >= 0, got ", c.i(k));
  ENGINE_USER_CHECK(c.i("patch") > 0, "config: patch must be > 0, got ", c.i("patch"));
  ENGINE_USER_CHECK(c.i("dt") > 0, "config: dt must be > 0, got ", c.i("dt"));
  const std::string rp = c.s("read_path");
  ENGINE_USER_CHECK(rp == "auto" || rp == "hdf5" || rp == "pread", "config: read_path '", rp, "': auto, hdf5 or pread");
  if (ds == "weather") {
    ENGINE_USER_CHECK(!c.s("stats").empty(),
                      "config: dataset weather needs stats (the file of per-channel mean and std)");
    channels(c.s("in_channels"));  // syntax errors now, ranges once the files are open
    channels(c.s("out_channels"));
  } else {
    for (const char* k : {"stats", "in_channels", "out_channels"})
      ENGINE_USER_CHECK(c.s(k).empty(), "config: ", k, " is for dataset weather (dataset is images)");
    ENGINE_USER_CHECK(c.i("dt") == 1, "config: dt is for dataset weather (dataset is images)");
  }
}

namespace {

h5::ReadPath read_path(const std::string& s) {
  return s == "hdf5" ? h5::ReadPath::hdf5 : s == "pread" ? h5::ReadPath::pread : h5::ReadPath::automatic;
}

std::string fmt(double v, const char* f = "%.4f") {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

class ViTTask : public TrainTask {
 public:
  ViTTask(const TrainConfig& c, const BatchPlan& plan, Device dev, const ModelGrid& mg)
      : cfg_(c), mg_(mg), plan_(plan), dev_(dev), seed_(uint64_t(c.i("seed"))), weather_(c.s("dataset") == "weather") {
    const h5::ReadPath rp = read_path(c.s("read_path"));
    if (weather_) {
      WeatherOptions o;
      o.stats = c.s("stats"), o.dt = c.i("dt"), o.height = c.i("img_h"), o.width = c.i("img_w");
      o.in_channels = channels(c.s("in_channels"));  // empty: every channel
      o.out_channels = channels(c.s("out_channels"));
      o.read_path = rp;
      o.dir = c.s("train_data");
      auto train = std::make_unique<WeatherDataset>(o);
      o.dir = c.s("val_data");
      auto val = std::make_unique<WeatherDataset>(o);
      weather_val_ = val.get();
      train_ = std::move(train), val_ = std::move(val);
    } else {
      auto train = std::make_unique<ImageDataset>(c.s("train_data"), rp);
      auto val = std::make_unique<ImageDataset>(c.s("val_data"), rp);
      ENGINE_USER_CHECK(val->classes() <= train->classes(), c.s("val_data"), ": labels reach class ",
                        val->classes() - 1, ", the training set ", c.s("train_data"), " has ", train->classes(),
                        " classes");
      classes_ = train->classes();
      train_ = std::move(train), val_ = std::move(val);
    }
    const std::vector<int64_t> in = train_->input_shape(), out = train_->target_shape();
    ENGINE_USER_CHECK(val_->input_shape() == in && val_->target_shape() == out, c.s("val_data"), ": samples ",
                      shape_str(val_->input_shape()), " -> ", shape_str(val_->target_shape()),
                      ", the training set's are ", shape_str(in), " -> ", shape_str(out));
    if (!weather_)
      for (const auto& [k, dim] : {std::pair<const char*, int64_t>{"img_h", in[1]}, {"img_w", in[2]}})
        ENGINE_USER_CHECK(c.i(k) == 0 || c.i(k) == dim, "config: ", k, " = ", c.i(k), ": ", c.s("train_data"),
                          " holds ", in[1], " x ", in[2], " images (images are not cropped; use 0)");
    ViTConfig v;
    v.in_channels = in[0], v.img_h = in[1], v.img_w = in[2], v.patch = c.i("patch");
    v.embed = c.i("n_embd"), v.depth = c.i("n_layer"), v.heads = c.i("n_head");
    v.attention = parse_attention_impl(c.s("attention"));
    v.head = weather_ ? ViTHead::dense : ViTHead::classify;
    if (weather_)
      v.out_channels = out[0];
    else
      v.classes = classes_;
    v.validate();
    vit_ = v;
    if (mg.split()) {
      const int P = mg.tp_size(), cp = mg.cp_size();
      const bool sp = c.b("sequence_parallel") && P > 1;
      // Every rank reads the same shapes: said once (WorldError).
      if (v.tokens() % cp != 0)
        throw WorldError(cat("config: cp = ", cp, ": ", v.img_h, " x ", v.img_w, " images in patches of ", v.patch,
                             " make ", v.tokens(), " tokens, which do not divide by cp (change patch or cp)"));
      if (sp && (plan.micro * v.tokens() / cp) % P != 0)
        throw WorldError(cat("config: sequence_parallel: batch_size x tokens", cp > 1 ? " / cp" : "", " = ", plan.micro,
                             " x ", v.tokens() / cp, " token rows do not divide by tp = ", P,
                             " (change batch_size or patch)"));
      ViTTpOptions o{sp, mg.cp};
      if (mg.pp) {
        std::tie(o.layer_begin, o.layer_end) = stage_blocks(mg.stage_layers, mg.pp_rank());
        pipe_ = std::make_unique<PipelineStep>(*mg.pp, comm::PipeSchedule::afab, 1);  // validation
      }
      tp_model_ = std::make_unique<ViTTp>(v, seed_, dev, *mg.tp, o);
      if (P > 1) tp_ = tp_grads_of(*tp_model_);
    } else {
      model_ = std::make_unique<ViT>(v, seed_, dev);
    }
    const int64_t slots = plan.accum * plan.dp;
    sampler_ = std::make_unique<EpochSampler>(train_->size(), plan.micro, slots, seed_, Shuffle::yes);
    ENGINE_USER_CHECK(sampler_->steps_per_epoch() > 0, c.s("train_data"), ": ", train_->size(),
                      " samples, fewer than one global batch of ", plan.global());
    val_sampler_ = std::make_unique<EpochSampler>(val_->size(), plan.micro, slots, 0, Shuffle::no);
    ENGINE_USER_CHECK(val_sampler_->steps_per_epoch() > 0, c.s("val_data"), ": ", val_->size(),
                      " samples, fewer than one global batch of ", plan.global(),
                      " (validation splits it as training does)");
    lopt_.workers = int(c.i("data_workers"));
  }

  Module& model() override { return tp_model_ ? static_cast<Module&>(*tp_model_) : *model_; }
  std::string summary() const override {
    const ViTConfig& v = vit_;
    const std::string head =
        v.head == ViTHead::classify ? cat(v.classes, " classes") : cat(v.out_channels, " channels (dense head)");
    return cat("ViT ", v.depth, " blocks, ", v.heads, " heads, ", v.embed, " wide, patch ", v.patch, " on ",
               v.in_channels, " x ", v.img_h, " x ", v.img_w, " (", v.tokens(), " tokens) -> ", head, ", ",
               fmt(double(full_parameters()) / 1e6, "%.2f"), "M parameters; ", items_per_step(), " images/step",
               mg_.tp_size() > 1 ? cat("; tensor parallel over ", mg_.tp_size(), " ranks",
                                       cfg_.b("sequence_parallel") ? " (sequence parallel)" : "", ": ",
                                       fmt(double(tp_model_->num_parameters()) / 1e6, "%.2f"), "M parameters on each (",
                                       v.heads / mg_.tp_size(), " heads)")
                                 : std::string(),
               mg_.cp_size() > 1 ? cat("; context parallel over ", mg_.cp_size(),
                                       " ranks: ", v.tokens() / mg_.cp_size(), " tokens of each image on each")
                                 : std::string(),
               mg_.pp ? cat("; ", stage_summary(mg_.stage_layers),
                            " (patch embedding on the first, norm and head on the last)")
                      : std::string());
  }
  std::string data_summary() const override {
    return cat(train_->describe(), "; ", val_->describe(), "; loader: ", lopt_.workers, " reader thread(s), ",
               lopt_.depth, " host buffers, normalised on the readers; ", sampler_->steps_per_epoch(),
               " steps per epoch");
  }
  const char* unit() const override { return "img"; }
  std::string checkpoint_note() const override { return "timm names, see docs/data.md"; }
  int64_t items_per_step() const override { return plan_.global(); }
  double flops_per_step() const override { return vit_flops_per_image(vit_) * double(items_per_step()); }
  double activation_bytes_per_sample(Precision p) const override {
    const int64_t tp = mg_.tp_size();
    const int64_t blocks = mg_.pp ? mg_.stage_layers[size_t(mg_.pp_rank())] : vit_.depth;  // this stage's
    const BlockStack s{blocks, vit_.tokens(), vit_.embed, vit_.heads, tp, tp > 1 && cfg_.b("sequence_parallel"),
                       false,  mg_.cp_size()};
    // The patches in (and the fields out, dense head): about 22 bytes per pixel value, measured.
    const int64_t pixels = vit_.patch * vit_.patch * (vit_.in_channels + (weather_ ? vit_.out_channels : 0));
    return models::activation_bytes_per_sample(s, dev_, p, 22.0 * double(pixels));
  }
  PeakGemm peak_gemm() const override { return {plan_.micro * vit_.tokens(), 4 * vit_.embed, vit_.embed}; }  // fc1
  std::vector<std::string> shape_keys() const override {
    return {"dataset", "n_layer", "n_head", "n_embd", "patch", "img_h", "img_w", "dt"};  // channels: check_resume
  }

  void start(int64_t step) override {
    const int64_t spe = sampler_->steps_per_epoch();
    loader_ = std::make_unique<Loader>(*train_, *sampler_, plan_.dp_rank * plan_.accum, plan_.accum, dev_, lopt_,
                                       SamplePosition{step / spe, step % spe, 0});
  }
  MicroBatch next(int64_t m) override {
    const Batch b = loader_->next();
    ENGINE_CHECK(b.pos.micro == m, "vit: the loader is at micro-batch ", b.pos.micro, ", the step asks for ", m);
    return {b.x, b.y};
  }
  Tensor loss(const Tensor& x, const Tensor& y, const Autocast& ac) const override {
    return tp_model_ ? tp_model_->loss(x, y, ac) : model_->loss(x, y, ac);
  }
  Tensor forward(const Tensor& x, const Autocast& ac) const {
    return tp_model_ ? tp_model_->forward(x, ac) : model_->forward(x, ac);
  }
  const TpGrads& tp_grads() const override { return tp_; }
  std::optional<LoaderStats> take_data_stats() override { return loader_->take_stats(); }

  // The loader's batch is valid until its next call, which the pipeline
  // makes before this micro-batch's backward: the pass keeps copies.
  Tensor stage_forward(const Tensor& in, const MicroBatch& b, const Autocast& ac) const override {
    const Tensor out = tp_model_->stage_forward(in, b.x.to(dev_).clone(), ac);
    return mg_.last_stage() ? tp_model_->stage_loss(out, b.y.to(dev_).clone(), ac) : out;
  }
  StageIo stage_io(const Autocast& ac) const override {
    return {tp_model_->stage_rows(plan_.micro), stage_dtype(ac.policy().compute, dev_)};
  }

  EvalResult evaluate(const Autocast& ac) override;

  // Under tp every rank reads the file into a serial model on the host and keeps its shards.
  void init_from(const std::string& path) override {
    if (!tp_model_) return load_vit_weights(path, *model_);
    ViT full(vit_, seed_, kCPU);
    load_vit_weights(path, full);
    tp_model_->load_full_state(full.named_parameters());
  }
  // Under tp: the weights gathered into a serial model on rank 0 (the file
  // it writes) and the moments to full shapes (tp_checkpoint.h).
  std::vector<std::pair<std::string, Tensor>> gather_for_checkpoint(
      std::vector<std::pair<std::string, Tensor>> opt_state) override {
    if (!tp_model_) return opt_state;
    if (comm::world().rank == 0) full_ = std::make_unique<ViT>(vit_, seed_, kCPU);
    if (!pipe_) return gather_tp_checkpoint(*tp_model_, full_.get(), std::move(opt_state), dev_);
    StageGather g{mg_.pp,
                  [this](const std::string& name) {
                    return parameter_stage(name, "blocks.", {"norm.", "head."}, mg_.stage_layers);
                  },
                  mg_.stage_leader};
    return gather_pipeline_checkpoint(*tp_model_, full_.get(), std::move(opt_state), dev_, g);
  }
  void save_checkpoint(const std::string& dir, const std::vector<std::pair<std::string, Tensor>>& opt_state,
                       int64_t step, const nlohmann::json& config, const nlohmann::json& extra) const override {
    const ViT& m = tp_model_ ? *full_ : *model_;
    save_checkpoint_dir(
        dir, [&](const std::string& path) { save_vit_weights(path, m); }, vit_config_json(vit_), opt_state, step,
        config, extra);
  }
  // Under tp: the one-process checkpoint into a serial model and AdamW on the host, then this rank's shards.
  nlohmann::json load_checkpoint(const std::string& dir, Optimizer& opt) override {
    if (!tp_model_)
      return load_checkpoint_dir(
          dir, [&](const std::string& path) { load_vit_weights(path, *model_); }, opt);
    ViT full(vit_, seed_, kCPU);
    return load_tp_checkpoint(*tp_model_, full, opt, dev_, [&](Optimizer& o) {
      return load_checkpoint_dir(
          dir, [&](const std::string& path) { load_vit_weights(path, full); }, o);
    });
  }
  nlohmann::json data_state(int64_t done) const override {
    const int64_t spe = sampler_->steps_per_epoch();
    return {{"order", "shuffled per epoch"}, {"seed", seed_},       {"global_batch", plan_.global()},
            {"samples", train_->size()},     {"epoch", done / spe}, {"step_of_epoch", done % spe}};
  }
  // The epoch permutations depend on the number of samples and the global
  // batch: a checkpoint continues only with both unchanged.
  void check_resume(const std::string& dir, const nlohmann::json& state) const override {
    const nlohmann::json s = state.value("sampler", nlohmann::json::object());
    const int64_t g = s.value("global_batch", int64_t(0)), n = s.value("samples", int64_t(0));
    ENGINE_USER_CHECK(g == plan_.global(), dir, ": checkpoint was trained with a global batch of ", g,
                      " images, this run has ", plan_.global(),
                      " (batch_size x grad_accum x ranks; set global_batch = ", g, ")");
    ENGINE_USER_CHECK(n == train_->size(), dir, ": checkpoint was trained on ", n, " samples, ", cfg_.s("train_data"),
                      " holds ", train_->size(), " (the epochs' order would change)");
    // Channel lists compared as lists: "0-3" continues a run of "0,1,2,3".
    const nlohmann::json saved = state.value("config", nlohmann::json::object());
    for (const char* k : {"in_channels", "out_channels"}) {
      const std::string was = saved.value(k, std::string());
      ENGINE_USER_CHECK(channels(was) == channels(cfg_.s(k)), dir, ": checkpoint has ", k, " = \"", was,
                        "\", the config asks for \"", cfg_.s(k), "\"");
    }
  }

 private:
  const TrainConfig& cfg_;
  ModelGrid mg_;
  BatchPlan plan_;
  Device dev_;
  uint64_t seed_;
  bool weather_;
  int64_t classes_ = 0;
  std::unique_ptr<SampleDataset> train_, val_;
  const WeatherDataset* weather_val_ = nullptr;
  ViTConfig vit_;
  std::unique_ptr<ViT> model_;       // one process holds the whole model, or
  std::unique_ptr<ViTTp> tp_model_;  // tp > 1: this rank's shards
  TpGrads tp_;
  std::unique_ptr<ViT> full_;           // rank 0 under tp: the gathered weights being saved
  std::unique_ptr<PipelineStep> pipe_;  // pp: forward through the stages (validation)
  int64_t full_parameters() const {
    if (!tp_model_) return model_->num_parameters();
    int64_t n = 0;
    for (const Tensor& p : tp_model_->replicated_parameters()) n += p.numel();
    return n + (tp_model_->num_parameters() - n) * mg_.tp_size();  // the split ones are 1/tp each
  }
  std::unique_ptr<EpochSampler> sampler_, val_sampler_;
  LoaderOptions lopt_;
  std::unique_ptr<Loader> loader_;
};

// The first val_batches global batches of the validation set in file order,
// each rank reading its slots as in training; sums over the ranks.
EvalResult ViTTask::evaluate(const Autocast& ac) {
  NoGradGuard ng;
  const int64_t steps = std::min(cfg_.i("val_batches"), val_sampler_->steps_per_epoch());
  Loader loader(*val_, *val_sampler_, plan_.dp_rank * plan_.accum, plan_.accum, dev_, lopt_);
  const int64_t B = plan_.micro;
  double loss_sum = 0, correct = 0;
  std::unique_ptr<ForecastMetrics> fm;
  // The persistence forecast of output channel c is input channel persist[c]
  // of the same sample; there is none when an output channel is no input.
  std::vector<int64_t> persist;
  bool has_persistence = weather_;
  if (weather_) {
    const WeatherDataset& w = *weather_val_;
    fm = std::make_unique<ForecastMetrics>(w.latitudes(), vit_.out_channels, vit_.img_w, w.climatology());
    for (int oc : w.out_channels()) {
      const auto it = std::find(w.in_channels().begin(), w.in_channels().end(), oc);
      has_persistence = has_persistence && it != w.in_channels().end();
      persist.push_back(it - w.in_channels().begin());
    }
  }
  const int64_t HW = vit_.img_h * vit_.img_w, Co = vit_.out_channels, Ci = vit_.in_channels;
  std::vector<float> persistence(size_t(has_persistence ? B * Co * HW : 0));
  for (int64_t k = 0; k < steps * plan_.accum; ++k) {
    const Batch b = loader.next();
    Tensor out;
    if (pipe_) {  // through the stages; the last has the output
      const auto outs =
          pipe_->forward_only(1, [&](int64_t, const Tensor& in) { return tp_model_->stage_forward(in, b.x, ac); },
                              {tp_model_->stage_rows(B), stage_dtype(ac.policy().compute, dev_)});
      if (outs.empty()) continue;
      out = ac.f32(tp_model_->stage_output(outs[0], ac));
    } else {
      out = ac.f32(forward(b.x, ac));
    }
    loss_sum += (weather_ ? mse_loss(out, b.y) : cross_entropy(out, b.y)).item();
    const std::vector<float> o = out.to_vector(), y = b.y.to_vector();
    if (!weather_) {
      for (int64_t i = 0; i < B; ++i) {
        const float* row = &o[size_t(i * vit_.classes)];
        correct += double(std::max_element(row, row + vit_.classes) - row == int64_t(y[size_t(i)]));
      }
      continue;
    }
    if (has_persistence) {
      const std::vector<float> x = b.x.to_vector();
      for (int64_t i = 0; i < B; ++i)
        for (int64_t c = 0; c < Co; ++c)
          std::copy_n(&x[size_t((i * Ci + persist[size_t(c)]) * HW)], HW, &persistence[size_t((i * Co + c) * HW)]);
    }
    fm->add(o.data(), y.data(), has_persistence ? persistence.data() : nullptr, B);
  }
  const double batches = double(steps * plan_.accum * plan_.dp), samples = batches * double(B);
  // The tp and cp ranks of a dp rank hold the same output (on the last stage): the first alone adds its sums.
  if (tp_model_ && (mg_.tp->rank() != 0 || mg_.cp_rank() != 0 || !mg_.last_stage())) {
    loss_sum = correct = 0;
    if (fm) fm->set_sums(std::vector<double>(fm->sums().size(), 0.0));
  }
  EvalResult r;
  r.loss = comm::all_reduce_host(loss_sum, comm::HostOp::sum, "the validation loss") / batches;
  if (!weather_) {
    const double acc = comm::all_reduce_host(correct, comm::HostOp::sum, "the validation accuracy") / samples;
    r.metrics = {{"val_accuracy", acc}, {"val_samples", int64_t(samples)}};
    r.line = cat("accuracy ", fmt(100 * acc, "%.2f"), "% on ", int64_t(samples), " images");
    return r;
  }
  fm->set_sums(comm::all_reduce_host(fm->sums(), comm::HostOp::sum, "the validation RMSE and ACC sums"));
  const ForecastMetrics::Result m = fm->result();
  const std::vector<int>& chans = weather_val_->out_channels();
  // "rmse 0:0.120 1:0.200 (persistence 0.220 0.290)": per channel, then persistence's.
  auto per_channel = [&](const char* name, const std::vector<double>& v, const std::vector<double>& p) {
    std::string out = name;
    for (size_t c = 0; c < chans.size(); ++c) out += cat(" ", chans[c], ":", fmt(v[c], "%.3f"));
    if (!has_persistence) return out;
    out += " (persistence";
    for (size_t c = 0; c < chans.size(); ++c) out += cat(" ", fmt(p[c], "%.3f"));
    return out + ")";
  };
  std::string line =
      cat(per_channel("rmse", m.rmse, m.rmse_persistence), " | ", per_channel("acc", m.acc, m.acc_persistence));
  r.metrics = {{"val_rmse", m.rmse}, {"val_acc", m.acc}, {"val_samples", m.samples}, {"channels", chans}};
  if (has_persistence) {
    r.metrics["val_rmse_persistence"] = m.rmse_persistence;
    r.metrics["val_acc_persistence"] = m.acc_persistence;
    // The mean over channels of RMSE / persistence RMSE: below 1 beats
    // persistence. A channel that persistence forecasts exactly (constant
    // in time) has no ratio.
    double ratio = 0;
    int counted = 0;
    for (size_t c = 0; c < chans.size(); ++c)
      if (m.rmse_persistence[c] > 0) ratio += m.rmse[c] / m.rmse_persistence[c], ++counted;
    if (counted > 0) {
      r.metrics["val_rmse_vs_persistence"] = ratio / counted;
      line += cat(" | rmse/persistence ", fmt(ratio / counted, "%.3f"));
    }
  }
  r.line = line;
  return r;
}

}  // namespace

std::vector<int64_t> vit_stage_layers(const TrainConfig& c) {
  return comm::stage_layers(c.s("pp_layers"), std::vector<double>(size_t(c.i("n_layer")), 1.0), 0.0, 0.0,
                            int(c.i("pp")));
}

std::unique_ptr<TrainTask> make_vit_task(const TrainConfig& c, const BatchPlan& plan, Device dev, const ModelGrid& mg) {
  return std::make_unique<ViTTask>(c, plan, dev, mg);
}

}  // namespace eng::models
