// Option table, strict merging and --help for the train program.
#include "models/train/train_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace eng::models {

using Json = nlohmann::json;

const std::vector<OptionSpec>& train_options() {
  static const std::vector<OptionSpec> specs = {
      {"model", "gpt2",
       "gpt2 (GPT-2 on token files) | llama (a Llama: RMSNorm, rotary positions, SwiGLU, grouped K/V heads; on token "
       "files; docs/llama.md) | vit (a Vision Transformer on HDF5 images or fields)"},
      {"device", "auto", "auto | cpu | cuda | cuda:N | emu (auto: cuda if a GPU answers, else cpu)"},
      {"train_bin", "data/fortunes/train.bin",
       "training tokens (little-endian uint16 headerless, or llm.c shards: GPT-2's uint16, Llama 3's uint32): a file, "
       "a glob pattern or a directory",
       "lm"},
      {"val_bin", "data/fortunes/val.bin", "validation tokens (as train_bin)", "lm"},
      {"vocab_size", 256, "vocabulary size (256 for byte-level tokens)", "lm"},
      {"block_size", 128, "the model's maximum sequence length (n_positions)", "lm"},
      {"n_layer", 4, "transformer blocks (the ViT's depth)"},
      {"n_head", 4, "attention heads per block"},
      {"n_embd", 128, "embedding width C (a multiple of n_head)"},
      {"n_kv_head", 0, "K/V heads (grouped-query attention), dividing n_head (0: n_head)", "llama"},
      {"ffn_hidden", 0, "the MLP's hidden width, intermediate_size (0: 8 n_embd / 3 rounded up to a multiple of 64)",
       "llama"},
      {"rope_theta", 10000.0, "the rotary embedding's base (Llama 3: 500000)", "llama"},
      {"rope_scaling_factor", 0.0,
       "Llama 3's rope_scaling: factor (0: off); with rope_low_freq_factor, rope_high_freq_factor and "
       "rope_original_max_positions",
       "llama"},
      {"rope_low_freq_factor", 1.0, "Llama 3's rope_scaling: low_freq_factor", "llama"},
      {"rope_high_freq_factor", 4.0, "Llama 3's rope_scaling: high_freq_factor", "llama"},
      {"rope_original_max_positions", 8192, "Llama 3's rope_scaling: original_max_position_embeddings", "llama"},
      {"rms_eps", 1e-5, "RMSNorm's epsilon (rms_norm_eps)", "llama"},
      {"tie_embeddings", false, "the lm_head shares the token embedding's matrix (tie_word_embeddings)", "llama"},
      {"batch_size", 16, "sequences (images, samples) per micro-batch, per data-parallel rank"},
      {"seq_len", 128, "tokens per sequence (at most block_size)", "lm"},
      {"dataset", "images",
       "images (one HDF5 file: images, labels; classifier head) | weather (a directory of "
       "yearly HDF5 files of fields; dense forecasting head); docs/data.md",
       "vit"},
      {"train_data", "data/fashion-mnist/train.h5", "images: the HDF5 file; weather: the directory of yearly files",
       "vit"},
      {"val_data", "data/fashion-mnist/test.h5", "validation images file or fields directory", "vit"},
      {"stats", "",
       "weather: HDF5 file with per-channel mean and std (and climatology, for the ACC), or a directory laid out as "
       "the NERSC tutorial's stats/ (global_means.npy, global_stds.npy; time_means.npy, the climatology)",
       "vit"},
      {"img_h", 0, "weather: crop height from the top (0: the whole field; images: their height)", "vit"},
      {"img_w", 0, "weather: crop width from the left (0: the whole field)", "vit"},
      {"patch", 4, "patch size in pixels (divides img_h and img_w)", "vit"},
      {"in_channels", "", "weather: input channels, e.g. 0-3,7 (empty: all)", "vit"},
      {"out_channels", "", "weather: channels forecast (empty: all)", "vit"},
      {"dt", 1, "weather: forecast lead in time steps of the files", "vit"},
      {"data_workers", 2, "reader threads of the HDF5 loader (0: read on the training thread)", "vit"},
      {"read_path", "auto", "auto (pread for contiguous datasets, else HDF5) | hdf5 | pread", "vit"},
      {"grad_accum", 1, "micro-batches per optimizer step, per rank (derived when global_batch is set)"},
      {"global_batch", 0,
       "sequences per optimizer step over all ranks: batch_size x grad_accum x dp (0: whatever those give); set, "
       "it fixes the run's batch whatever the number of ranks, and grad_accum follows"},
      {"steps", 600, "optimizer steps (the LR schedule's length)"},
      {"stop_after", 0, "end this run after N steps with a checkpoint, to --resume later (0: run to the end)"},
      {"lr", 3e-3, "peak learning rate"},
      {"min_lr", 3e-4, "learning rate at the end of the decay (cosine, linear, wsd)"},
      {"warmup_steps", 50, "linear warmup steps"},
      {"lr_schedule", "cosine",
       "after the warmup: cosine (decay to min_lr) | linear (to min_lr) | constant (lr) | wsd (lr, then 1 - sqrt to "
       "min_lr over the last wsd_decay_fraction of the steps)"},
      {"wsd_decay_fraction", 0.2, "wsd: the share of the steps its decay takes (llm.c: 0.2)"},
      {"optimizer", "adamw",
       "adamw | adamw8bit (both moments in 8 bits with a scale per 256 values: 2.03 B/param of state) | adafactor "
       "(factored second moments: rows + columns per matrix) | sgd (cpu only; momentum beta1); docs/optimizers.md"},
      {"weight_decay", 0.1, "decoupled weight decay (sgd: coupled), applied to matrices only"},
      {"beta1", 0.9, "adamw and adamw8bit beta1; sgd's momentum"},
      {"beta2", 0.95, "adamw and adamw8bit beta2"},
      {"adafactor_beta1", 0.0, "adafactor: first-moment decay (0: no first moment, Adafactor's default)"},
      {"adafactor_relative_step", false,
       "adafactor: transformers' relative step min(1e-2, 1/sqrt(t)) in place of lr and its schedule"},
      {"adafactor_scale_parameter", false, "adafactor: multiply the step by max(1e-3, RMS(parameter))"},
      {"adafactor_warmup_init", false, "adafactor: with the relative step, min(1e-6 t, 1/sqrt(t))"},
      {"grad_clip", 1.0, "global gradient-norm clip (0: off)"},
      {"loss_scale_init", 65536.0, "O2-fp16: the initial dynamic loss scale (torch GradScaler's default 2^16)"},
      {"loss_scale_growth_interval", 2000, "O2-fp16: clean steps before the loss scale doubles"},
      {"seed", 1337, "seed for initialisation, batches and sampling"},
      {"recompute", false, "activation checkpointing: recompute each block in backward", "lm"},
      {"attention", "ours",
       "ours (our fused FlashAttention-2 style kernels: on tensor cores in bf16/fp16 at head size 64 or 128, on "
       "CUDA cores otherwise) | ours_cuda_cores (our CUDA-core kernels always) | cudnn (cuDNN's fused attention: "
       "the cuda device at precision O2, O2-fp16 or O3; an error elsewhere, never a fallback)"},
      {"gemm", "cublaslt",
       "cublaslt (the vendor's GEMMs on cuda; our tiled GEMM stands in on emu) | mma (our tensor-core GEMM for "
       "every bf16/fp16 product it takes, cublaslt for the rest: emu or cuda at O2, O2-fp16 or O3)"},
      {"precision", "O0",
       "O0 fp32 | O1 TF32 GEMMs (cuda) | O2 bf16 autocast | O2-fp16 fp16 + dynamic loss scaling | O3 O2 + the step "
       "captured as a CUDA graph (cuda; emulated on emu; O2 on cpu); docs/precision.md"},
      {"val_every", 100, "validation loss every N steps (0: only at the end)"},
      {"val_batches", 8, "global batches per validation (vit: at most what the validation set holds)"},
      {"sample_every", 200, "print a text sample every N steps (0: only at the end)", "lm"},
      {"sample_tokens", 160, "tokens per sample", "lm"},
      {"temperature", 0.8, "sampling temperature", "lm"},
      {"top_k", 40, "sample from the k most likely tokens (0: all)", "lm"},
      {"tokenizer", "auto",
       "how samples read: auto (bytes up to vocab_size 256, gpt2 from 50257 when its file is there, else ids) | bytes "
       "| gpt2 (GPT-2's BPE) | ids",
       "lm"},
      {"tokenizer_file", "",
       "gpt2: its ranks file or a directory with vocab.json and merges.txt (empty: "
       "$ENGINE_GPT2_VOCAB, else .deps/gpt2/gpt2.tiktoken)",
       "lm"},
      {"eval_hellaswag", "",
       "HellaSwag's validation jsonl (ctx, endings, label): acc and acc_norm at every validation, the examples "
       "split over the dp ranks (docs/generate.md)",
       "gpt2"},
      {"hellaswag_limit", 0, "score only the first N HellaSwag examples (0: all)", "gpt2"},
      {"prompt", "", "text the samples continue (empty: a newline under bytes, <|endoftext|> under gpt2)", "lm"},
      {"log_every", 10, "progress line every N steps when stdout is not a terminal"},
      {"out_dir", "out/gpt2-tiny", "where metrics.jsonl and checkpoints go"},
      {"tensorboard", "",
       "directory of the TensorBoard event file (empty: out_dir/tb; off: none); `tensorboard --logdir out_dir`"},
      {"keep_checkpoints", 0,
       "also keep the last N checkpoints as out_dir/checkpoints/step_NNNNNN (0: only out_dir/checkpoint, the latest)"},
      {"resume_from", "",
       "with --resume: continue from this checkpoint directory (a kept step_NNNNNN) instead of "
       "out_dir/checkpoint"},
      {"checkpoint_every", 0, "save a checkpoint every N steps (0: only at the end)"},
      {"checkpoint_minutes", 30.0,
       "also save a checkpoint when this many minutes have passed since the last one (0: off), so a crash loses at "
       "most about that much"},
      {"resume", false,
       "continue from out_dir/checkpoint (bit-exact on cpu); auto: continue when out_dir holds a checkpoint, else "
       "start (what a requeued job passes)"},
      {"overwrite", false,
       "start afresh in an out_dir that holds an earlier run, deleting its checkpoint, metrics.jsonl and tb/ (without "
       "it, "
       "such a run is refused)"},
      {"init_from", "",
       "initialise weights from a safetensors file (gpt2: Hugging Face's layout; vit: a checkpoint's "
       "model.safetensors or timm's names)"},
      {"comm", "auto",
       "collectives backend: auto (nccl on cuda, mpi on cpu/emu) | mpi | nccl (on emu: the look-alike)"},
      {"tp", 1,
       "tensor-parallel ranks: heads and MLP (gpt2: and the vocabulary) split over tp adjacent ranks (world = dp x "
       "tp); n_head and 4 n_embd must divide by tp"},
      {"sequence_parallel", false,
       "with tp > 1: layernorms and the residual stream on 1/tp of the token rows (all-gather + reduce-scatter in "
       "place of all-reduce)"},
      {"cp", 1,
       "context-parallel ranks: each takes a contiguous slice of every sequence (gpt2: seq_len / cp positions; vit: "
       "tokens / cp of each image), attention gathers the keys and values over cp (world = dp x cp x tp, cp between "
       "tp and dp); seq_len or the token count must divide by cp"},
      {"pp", 1,
       "pipeline-parallel stages: the blocks split into pp contiguous stages over the outermost ranks (world = pp x "
       "dp x cp x tp); the first stage holds the embeddings, the last the final norm, head and loss; "
       "docs/pipeline.md"},
      {"pp_layers", "",
       "with pp > 1: blocks per stage, comma-separated (e.g. 3,3,2; summing to n_layer); empty: balanced by FLOPs "
       "(gpt2: the tied head counts on the last stage; vit: as even as they go)"},
      {"pp_schedule", "1f1b",
       "with pp > 1: afab (all forward, all backward: GPipe; holds every micro-batch's activations) | 1f1b (one "
       "forward, one backward: PipeDream-Flush; holds at most pp); micro-batches are grad_accum's"},
      {"memory_limit_gb", 0.0,
       "before the first step, refuse a run whose planned memory per rank (weights, gradients, optimizer state and "
       "activations) exceeds this many GB (0: the device's free memory: cudaMemGetInfo, or on the host the least of "
       "MemAvailable, the cgroup limit and ulimit -v, shared by the node's ranks; -1: no check)"},
      {"ddp", "bucketed",
       "data parallel: bucketed (gradients in buckets, each all-reduced as soon as its gradients are final, "
       "overlapping the backward) | naive (one all-reduce per parameter after the backward, for comparison: "
       "comm/ddp_naive.cpp)"},
      {"bucket_mb", 25.0, "data parallel: gradient bucket size (MiB)"},
      {"comm_timeout", 600.0,
       "distributed: end the job when a collective has not completed after S seconds, naming it (0: off)"},
      {"zero", 0,
       "1: ZeRO-1, AdamW state sharded over the dp ranks (gradients reduce-scattered, weights all-gathered); 0: off"},
      {"profile_steps", "",
       "A:B: the CUDA profiler records steps A to B only (cudaProfilerStart/Stop; nsys "
       "--capture-range=cudaProfilerApi, "
       "ncu --profile-from-start off); NVTX ranges name each step, phase and layer on cuda; docs/profiling.md"},
      {"kernel_profile", 0,
       "N: record step N's GPU kernels and print a table per kernel (calls, launches, bytes, FLOPs, time, GB/s, "
       "TFLOP/s, share) with the step modelled on --model_gpu; measured with CUDA events on cuda (at O3 step N runs "
       "eagerly, the capture follows it); emu: modelled only; written to OUT_DIR/kernel_profile.json; "
       "docs/profiling.md (0: off)"},
      {"model_gpu", "h100", "the GPU --kernel_profile models the step on: h100 | h200 | a100 (SXM parts)"},
      {"check_replicas", 0,
       "every N steps compare the dp replicas' parameter checksums (and, with tp, the replicated parameters across "
       "tp); drift is an error naming the tensor (0: off)"},
      {"first_bucket_mb", 1.0, "data parallel: the first bucket's size (MiB), small so communication starts early"},
  };
  return specs;
}

static const OptionSpec* find_spec(const std::string& key) {
  for (const OptionSpec& s : train_options())
    if (s.key == key) return &s;
  return nullptr;
}

static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> d(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = d[0];
    d[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cur = d[j];
      d[j] = std::min({d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return d[b.size()];
}

static std::string suggestion(const std::string& key) {
  std::string best;
  size_t best_d = 4;  // suggest only near misses
  for (const OptionSpec& s : train_options()) {
    const size_t dist = edit_distance(key, s.key);
    if (dist < best_d) best_d = dist, best = s.key;
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

TrainConfig::TrainConfig() {
  for (const OptionSpec& s : train_options()) values_[s.key] = s.default_value;
}

namespace {

// What an option's value must be, in a user's words.
std::string kind_of(const std::string& key, const Json& d) {
  if (key == "resume") return "true, false or auto";
  return d.is_boolean()          ? "true or false"
         : d.is_number_integer() ? "an integer"
         : d.is_number_float()   ? "a number"
                                 : "a string";
}

// The first byte of s that is not UTF-8, or npos. The configuration is
// JSON (printed, compared across ranks, saved in checkpoints), which holds
// UTF-8 text only.
size_t bad_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return i;
    i += n;
  }
  return std::string::npos;
}

}  // namespace

void TrainConfig::set(const std::string& key, const Json& v, const std::string& source, const std::string& raw) {
  const OptionSpec* spec = find_spec(key);
  ENGINE_USER_CHECK(spec, source, ": unknown key '", key, "'", suggestion(key), "; see --help");
  const Json& d = spec->default_value;
  const bool ok = (d.is_boolean() && v.is_boolean()) || (d.is_string() && v.is_string()) ||
                  (d.is_number_integer() && v.is_number_integer()) || (d.is_number_float() && v.is_number()) ||
                  (key == "resume" && v == "auto");  // resume: true, false or auto
  const std::string name = source == "command line" ? cat("option '--", key, "'") : cat("key '", key, "'");
  const std::string got = raw.empty() ? v.dump() : cat("'", raw, "'");
  if (!ok && d.is_number_integer() && v.is_number_float()) {  // 1e3, 5.5
    const double x = v.get<double>();
    ENGINE_USER_FAIL(source, ": ", name, " must be an integer, got ", got,
                     x == std::floor(x) && std::abs(x) < 9e15 ? cat(" (write ", int64_t(x), ")") : std::string());
  }
  ENGINE_USER_CHECK(ok, source, ": ", name, " must be ", kind_of(key, d), ", got ", got);
  if (v.is_string()) {
    const size_t at = bad_utf8(v.get<std::string>());
    ENGINE_USER_CHECK(at == std::string::npos, source, ": the value of ", name, " is not UTF-8 text (byte ", at,
                      "); the configuration is kept as JSON, which holds UTF-8 only: rename the file or directory");
  }
  values_[key] = d.is_number_float() ? Json(v.get<double>()) : v;
  set_keys_.push_back(key);
}

void TrainConfig::merge_file(const std::string& path) {
  std::ifstream in(path);
  ENGINE_USER_CHECK(in, path, ": cannot open config file");
  Json j;
  try {
    j = Json::parse(in);
  } catch (const std::exception& e) {
    ENGINE_USER_FAIL(path, ": bad JSON: ", e.what());
  }
  ENGINE_USER_CHECK(j.is_object(), path, ": a config file is one JSON object of key: value");
  for (auto it = j.begin(); it != j.end(); ++it) set(it.key(), it.value(), path);
}

void TrainConfig::set_from_cli(const std::string& key, const std::string& value) {
  const OptionSpec* spec = find_spec(key);
  ENGINE_USER_CHECK(spec, "command line: unknown option '--", key, "'", suggestion(key), "; see --help");
  Json v;
  if (spec->default_value.is_string() || (key == "resume" && value == "auto")) {
    v = value;
  } else {
    try {
      v = Json::parse(value);
    } catch (const std::exception&) {
      ENGINE_USER_FAIL("command line: option '--", key, "' must be ", kind_of(key, spec->default_value), ", got '",
                       value, "'");
    }
  }
  set(key, v, "command line", value);
}

bool TrainConfig::parse_args(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> kv;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "--help" || arg == "-h") return false;
    ENGINE_USER_CHECK(arg.rfind("--", 0) == 0, "command line: expected --key value, got '", arg, "'");
    arg = arg.substr(2);
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else {
      std::string key = arg;
      std::replace(key.begin(), key.end(), '-', '_');
      const OptionSpec* spec = find_spec(key);
      // An unknown name is blamed on itself, not on the value after it (--resum --lr 0.001).
      ENGINE_USER_CHECK(spec || key == "config", "command line: unknown option '--", arg, "'", suggestion(key),
                        "; see --help");
      // A bare boolean flag (--resume) means true.
      if (spec && spec->default_value.is_boolean() && (a + 1 >= argc || std::string(argv[a + 1]).rfind("--", 0) == 0)) {
        value = "true";
      } else {
        ENGINE_USER_CHECK(a + 1 < argc, "command line: option '--", arg, "' needs a value");
        value = argv[++a];
      }
    }
    std::replace(arg.begin(), arg.end(), '-', '_');  // --grad-clip == --grad_clip
    kv.emplace_back(arg, value);
  }
  for (auto& [k, v] : kv)
    if (k == "config") merge_file(v);
  for (auto& [k, v] : kv)
    if (k != "config") set_from_cli(k, v);
  return true;
}

int64_t TrainConfig::i(const std::string& key) const { return values_.at(key).get<int64_t>(); }
double TrainConfig::f(const std::string& key) const { return values_.at(key).get<double>(); }
bool TrainConfig::b(const std::string& key) const { return values_.at(key).get<bool>(); }
std::string TrainConfig::s(const std::string& key) const { return values_.at(key).get<std::string>(); }

std::string TrainConfig::help_text() const {
  std::ostringstream os;
  os << "usage: train [--config FILE.json] [--key value | --key=value]...\n"
        "Trains GPT-2 (--model gpt2) or a Llama (--model llama) on token files, or a ViT on HDF5 data\n"
        "(--model vit).\n"
        "Options (a config file sets the same keys; command-line values override it; [gpt2], [llama]\n"
        "and [vit] mark the options only that model reads, [lm] those both language models read):\n"
        "  --config FILE          JSON object of the keys below (configs/*.json)\n";
  for (const OptionSpec& s : train_options()) {
    std::string left = "  --" + s.key + " ";
    left.resize(std::max<size_t>(left.size() + 1, 25), ' ');
    os << left << (s.model.empty() ? "" : "[" + s.model + "] ") << s.help << " (default " << s.default_value.dump()
       << ")\n";
  }
  return os.str();
}

bool option_read_by(const OptionSpec& s, const std::string& model) {
  return s.model.empty() || s.model == model || (s.model == "lm" && (model == "gpt2" || model == "llama"));
}

bool TrainConfig::is_set(const std::string& key) const {
  return std::count(set_keys_.begin(), set_keys_.end(), key) > 0;
}

std::string TrainConfig::foreign_options(const std::string& model) const {
  std::string out;
  for (const OptionSpec& s : train_options())
    if (!option_read_by(s, model) && is_set(s.key)) out += (out.empty() ? "" : ", ") + s.key;
  return out;
}

}  // namespace eng::models
