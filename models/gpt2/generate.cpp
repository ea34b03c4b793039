// generate: continues a prompt with a trained GPT-2, token by token through a
// KV cache (models/gpt2/kv_decoder.h), and says how fast. The model is a
// train checkpoint directory or a Hugging Face GPT-2 directory: config.json
// for the shape, model.safetensors for the weights (Hugging Face's names,
// with or without "transformer.").
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/device.h"
#include "io/durable_file.h"
#include "models/gpt2/cli_args.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_io.h"
#include "models/gpt2/hellaswag.h"
#include "models/gpt2/kv_decoder.h"
#include "models/gpt2/sample.h"
#include "models/gpt2/sample_text.h"

namespace fs = std::filesystem;
using namespace eng;
using namespace eng::models;

static const char* kUsage =
    "usage: generate --model DIR [options]\n"
    "Continues --prompt with the GPT-2 in DIR (a train checkpoint, or a Hugging Face GPT-2 directory:\n"
    "config.json and model.safetensors) and prints the text, then the tokens/s.\n"
    "  --prompt TEXT       the text to continue (default: <|endoftext|> under gpt2, a newline under bytes)\n"
    "  --prompt_ids IDS    the prompt as token ids instead, space- or comma-separated (\"50256 464\")\n"
    "  --max_tokens N      new tokens per sample (default 64)\n"
    "  --temperature T     softmax temperature (default 1.0; 0: greedy, the most likely token)\n"
    "  --top_k K           sample among the K most likely tokens (default 0: all)\n"
    "  --top_p P           then among the fewest whose probability reaches P (default 1.0: all)\n"
    "  --seed S            the draws' seed (default 1337); sample i uses S + i\n"
    "  --num_samples N     samples, one after another (default 1)\n"
    "  --device D          auto (default: cuda if a GPU answers, else cpu) | cpu | cuda | cuda:N | emu\n"
    "  --tokenizer KIND    auto (default) | bytes | gpt2 | ids (as train's option)\n"
    "  --tokenizer_file P  GPT-2's ranks file or a directory with vocab.json and merges.txt (default: DIR if it\n"
    "                      has them, else $ENGINE_GPT2_VOCAB, else .deps/gpt2/gpt2.tiktoken)\n"
    "  --no_kv_cache       rerun the whole window for every token (the reference path; slower)\n"
    "  --eval_hellaswag F  instead of generating: HellaSwag's accuracy on the jsonl F (ctx, endings, label):\n"
    "                      acc (lowest summed loss of the ending) and acc_norm (lowest mean loss, llm.c's)\n"
    "  --limit N           with --eval_hellaswag: the first N examples only (default 0: all)\n"
    "  --scores FILE       with --eval_hellaswag: each example's losses and predictions as jsonl\n"
    "  --ignore_eot        go on past <|endoftext|> (default: a sample ends there)\n";

static GPT2Config read_config(const fs::path& dir) {
  const fs::path p = dir / "config.json";
  std::ifstream in(p);
  if (!in)
    throw UserError(cat(p.string(), ": missing; --model takes a train checkpoint or a Hugging Face GPT-2 directory"));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(cat(p.string(), ": not JSON (", e.what(), ")"));
  }
  if (j.value("model_type", std::string("gpt2")) != "gpt2")
    throw UserError(cat(p.string(), ": model_type '", j.value("model_type", std::string()), "'; generate runs gpt2"));
  if (j.value("activation_function", std::string("gelu_new")) != "gelu_new")
    throw UserError(cat(p.string(), ": activation_function '", j["activation_function"].get<std::string>(),
                        "'; GPT-2 here is gelu_new (tanh)"));
  GPT2Config c;
  auto get = [&](const char* key) -> int64_t {
    if (!j.contains(key) || !j[key].is_number_integer()) throw UserError(cat(p.string(), ": no integer '", key, "'"));
    return j[key].get<int64_t>();
  };
  c.vocab_size = get("vocab_size");
  c.block_size = get("n_positions");
  c.n_layer = get("n_layer");
  c.n_head = get("n_head");
  c.n_embd = get("n_embd");
  c.validate();
  return c;
}

// generate --eval_hellaswag: scores every example, prints the accuracies.
static int eval_hellaswag(const GPT2& model, const SampleText& text, const std::string& path, int64_t limit,
                          const std::string& scores_path) {
  if (!text.tokenizer()) throw UserError("--eval_hellaswag needs a tokenizer (bytes or gpt2), not ids");
  const auto examples = load_hellaswag(path, *text.tokenizer(), limit);
  const auto t0 = std::chrono::steady_clock::now();
  const auto scores = score_hellaswag(model, examples, 0, 1, 4);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!scores_path.empty()) {
    std::string out;
    for (const auto& sc : scores)
      out += nlohmann::json{{"index", sc.index},         {"label", sc.label},       {"pred", sc.pred},
                            {"pred_norm", sc.pred_norm}, {"sum_loss", sc.sum_loss}, {"avg_loss", sc.avg_loss}}
                 .dump() +
             "\n";
    write_file_durably(scores_path, out);  // through a temporary name: whole or absent
  }
  const HellaSwagTally t = tally(scores);
  std::printf("hellaswag: %.0f examples, acc_norm %.4f (%.0f), acc %.4f (%.0f); %.1f s (%s)\n", t.examples,
              t.correct_norm / t.examples, t.correct_norm, t.correct / t.examples, t.correct, s,
              model.device().str().c_str());
  return 0;
}

int main(int argc, char** argv) {
  try {
    std::string model_dir, prompt, prompt_ids, tokenizer = "auto", tokenizer_file, device = "auto", hellaswag, scores;
    int64_t limit = 0;
    int64_t max_tokens = 64, num_samples = 1;
    SampleOptions so;
    bool kv_cache = true, stop_at_eot = true;
    for (CliArgs args(argc, argv); args.next();) {
      const std::string& arg = args.arg();
      auto value = [&] { return args.value(); };
      auto number = [&](double lo, double hi) { return args.number(lo, hi); };
      if (arg == "--help") return std::printf("%s", kUsage), 0;
      if (arg == "--model")
        model_dir = value();
      else if (arg == "--prompt")
        prompt = value();
      else if (arg == "--prompt_ids")
        prompt_ids = value();
      else if (arg == "--max_tokens")
        max_tokens = int64_t(number(1, 1e7));
      else if (arg == "--temperature")
        so.temperature = number(0, 1e6);
      else if (arg == "--top_k")
        so.top_k = int64_t(number(0, 1e9));
      else if (arg == "--top_p")
        so.top_p = number(1e-9, 1);
      else if (arg == "--seed")
        so.seed = uint64_t(number(0, 9e15));
      else if (arg == "--num_samples")
        num_samples = int64_t(number(1, 1e6));
      else if (arg == "--device")
        device = value();
      else if (arg == "--tokenizer")
        tokenizer = value();
      else if (arg == "--tokenizer_file")
        tokenizer_file = value();
      else if (arg == "--no_kv_cache")
        kv_cache = false;
      else if (arg == "--ignore_eot")
        stop_at_eot = false;
      else if (arg == "--eval_hellaswag")
        hellaswag = value();
      else if (arg == "--limit")
        limit = int64_t(number(0, 1e9));
      else if (arg == "--scores")
        scores = value();
      else
        throw UserError(cat("unknown argument '", arg, "' (see --help)"));
    }
    if (model_dir.empty()) return std::fprintf(stderr, "%s", kUsage), 2;
    const GPT2Config cfg = read_config(model_dir);
    const fs::path weights = fs::path(model_dir) / "model.safetensors";
    if (!fs::exists(weights)) throw UserError(cat(weights.string(), ": missing (generate reads safetensors weights)"));
    if (tokenizer_file.empty() && fs::exists(fs::path(model_dir) / "vocab.json") &&
        fs::exists(fs::path(model_dir) / "merges.txt"))
      tokenizer_file = model_dir;
    const SampleText text(tokenizer, tokenizer_file, prompt, cfg.vocab_size);
    if (!text.note().empty()) std::fprintf(stderr, "generate: %s\n", text.note().c_str());
    std::vector<int32_t> start = text.prompt();
    if (!prompt_ids.empty()) {
      if (!prompt.empty()) throw UserError("--prompt and --prompt_ids: give one");
      start.clear();
      for (char& ch : prompt_ids) ch = ch == ',' ? ' ' : ch;
      std::istringstream in(prompt_ids);
      for (long long id; in >> id;) {
        if (id < 0 || id >= cfg.vocab_size)
          throw UserError(cat("--prompt_ids: token ", id, " is outside the model's vocabulary of ", cfg.vocab_size));
        start.push_back(int32_t(id));
      }
      if (!in.eof() || start.empty()) throw UserError(cat("--prompt_ids: expected token ids, got '", prompt_ids, "'"));
    }
    const Device dev = Device::parse(device);
    GPT2 model(cfg, 0, dev);
    load_gpt2_weights(weights.string(), model);

    if (!hellaswag.empty()) return eval_hellaswag(model, text, hellaswag, limit, scores);

    int64_t generated = 0;
    double seconds = 0;
    for (int64_t s = 0; s < num_samples; ++s) {
      SampleOptions o = so;
      o.seed = so.seed + uint64_t(s);
      KvDecoder dec(model, kv_cache);
      std::vector<int32_t> out = start;
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<float> logits = dec.append(out);
      for (int64_t k = 0; k < max_tokens; ++k) {
        const int32_t tok = pick_token(logits.data(), cfg.vocab_size, o, uint64_t(k));
        out.push_back(tok);
        ++generated;
        if ((stop_at_eot && tok == text.eot()) || k + 1 == max_tokens) break;
        logits = dec.append({tok});
      }
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (num_samples > 1) std::printf("---- sample %lld ----", static_cast<long long>(s + 1));
      const std::string t = text.render(out, prompt_ids.empty());
      std::fwrite(t.data(), 1, t.size(), stdout);
      std::printf("\n");
      std::fflush(stdout);
    }
    std::fprintf(stderr, "generate: %lld tokens in %.2f s, %.1f tokens/s (%s, %s, %s)\n",
                 static_cast<long long>(generated), seconds, double(generated) / seconds,
                 kv_cache ? "kv cache" : "no kv cache", dev.str().c_str(), text.kind().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "generate: error: %s\n", e.what());
    return 1;
  }
}
