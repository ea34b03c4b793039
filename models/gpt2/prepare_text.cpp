// prepare_text: turns text files into token files with a train/validation
// split, through the bytes tokenizer (vocabulary 256: each byte its own
// token, as a character-level nanoGPT run) or GPT-2's BPE (vocabulary 50257).
// Each file is a document, or with --split_on LINE each stretch of a file
// between lines equal to LINE (fortune files separate theirs by "%"). Under
// gpt2 every document starts with <|endoftext|> (50256), as llm.c's data
// scripts write them; bytes has no such token and joins them as they are.
// The last VAL_FRACTION of the tokens is validation; under gpt2 the split
// moves on to the next document's start when the validation part holds one
// (and keeps more than 256 tokens), so a document is cut only when it does not.
// Two formats (io/token_file.h): flat (headerless train.bin / val.bin,
// nanoGPT's) and shards (llm.c's: NAME_val_000000.bin, NAME_train_000000.bin,
// ... with the 1024-byte header, --shard_tokens each). The whole text is held
// in memory: FineWeb-sized corpora are llm.c's dev/data scripts' job (their
// shards train as they are).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/token_file.h"
#include "io/tokenizer.h"
#include "models/gpt2/cli_args.h"

namespace fs = std::filesystem;
using namespace eng;

static const char* kUsage =
    "usage: prepare_text [options] OUT_DIR VAL_FRACTION FILE_OR_DIR...\n"
    "Tokenizes the files (a directory adds its regular files by name, skipping fortune's *.dat) and writes\n"
    "the train and validation token files; the last VAL_FRACTION (e.g. 0.1) of the tokens is validation.\n"
    "  --tokenizer KIND    bytes (default: one token a byte, vocabulary 256) or gpt2 (GPT-2's BPE, 50257)\n"
    "  --vocab PATH        gpt2: its ranks file or a directory with vocab.json and merges.txt\n"
    "                      (default $ENGINE_GPT2_VOCAB, else .deps/gpt2/gpt2.tiktoken from scripts/setup.sh)\n"
    "  --format F          flat: OUT_DIR/train.bin and val.bin, headerless (the default for bytes);\n"
    "                      shards: llm.c's NAME_val_000000.bin, NAME_train_000000.bin, ... (the default for gpt2)\n"
    "  --name NAME         the shards' name (default: OUT_DIR's last component)\n"
    "  --shard_tokens N    tokens a shard at most (default 100000000, llm.c's)\n"
    "  --split_on LINE     a line equal to LINE ends a document (fortune files: %); default: a file a document\n"
    "  --overwrite         replace OUT_DIR's shards of that name (default: refuse)\n"
    "gpt2 starts every document with <|endoftext|> (50256), as llm.c's data scripts do.\n";

static std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  ENGINE_CHECK(in, p.string(), ": cannot open");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The documents of one file: the whole text, or its stretches between lines
// equal to sep (the separator lines dropped, empty stretches skipped).
static std::vector<std::string> documents(const std::string& text, const std::string& sep) {
  if (sep.empty()) return {text};
  std::vector<std::string> docs;
  std::string cur;
  for (size_t i = 0; i < text.size();) {
    size_t e = text.find('\n', i);
    e = e == std::string::npos ? text.size() : e + 1;
    const std::string_view line(text.data() + i, e - i);
    const std::string_view bare = line.substr(0, line.size() - (line.back() == '\n'));
    if (bare == sep) {
      if (!cur.empty()) docs.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.append(line);
    }
    i = e;
  }
  if (!cur.empty()) docs.push_back(std::move(cur));
  return docs;
}

static void write_shards(const fs::path& dir, const std::string& name, const char* split,
                         const std::vector<uint16_t>& toks, size_t from, size_t to, size_t per_shard) {
  for (size_t s = 0, at = from; at < to; ++s, at += per_shard) {
    char file[64];
    std::snprintf(file, sizeof file, "_%s_%06zu.bin", split, s);
    const size_t end = std::min(to, at + per_shard);
    write_token_file((dir / (name + file)).string(),
                     std::vector<uint16_t>(toks.begin() + std::ptrdiff_t(at), toks.begin() + std::ptrdiff_t(end)),
                     true);
  }
}

int main(int argc, char** argv) {
  try {
    std::string kind = "bytes", vocab, format, name, split_on;
    long long shard_tokens = 100'000'000;
    bool overwrite = false;
    std::vector<std::string> pos;
    for (CliArgs args(argc, argv); args.next();) {
      const std::string& arg = args.arg();
      auto value = [&] { return args.value(); };
      if (arg == "--help") return std::printf("%s", kUsage), 0;
      if (arg == "--tokenizer")
        kind = value();
      else if (arg == "--vocab")
        vocab = value();
      else if (arg == "--format")
        format = value();
      else if (arg == "--name")
        name = value();
      else if (arg == "--split_on")
        split_on = value();
      else if (arg == "--overwrite")
        overwrite = true;
      else if (arg == "--shard_tokens")
        shard_tokens = (long long)args.number(1, 1e15);
      else if (args.is_option())
        throw UserError(cat("unknown option ", arg, " (see --help)"));
      else
        pos.push_back(arg);
    }
    if (pos.size() < 3) return std::fprintf(stderr, "%s", kUsage), 2;
    const text::Tokenizer tok = text::Tokenizer::make(kind, vocab);
    if (format.empty()) format = kind == "gpt2" ? "shards" : "flat";
    if (format != "flat" && format != "shards")
      throw UserError(cat("--format must be flat or shards, got '", format, "'"));
    if (tok.vocab_size() > 65536)
      throw UserError(cat("the tokenizer's vocabulary of ", tok.vocab_size(), " does not fit uint16 token files"));
    const fs::path out_dir = pos[0];
    char* end = nullptr;
    const double frac = std::strtod(pos[1].c_str(), &end);
    ENGINE_CHECK(end && *end == '\0' && frac > 0 && frac < 1, "VAL_FRACTION must be in (0, 1), got '", pos[1], "'");
    if (name.empty()) name = fs::absolute(out_dir).lexically_normal().filename().string();
    if (name.empty()) name = fs::absolute(out_dir).lexically_normal().parent_path().filename().string();

    std::vector<fs::path> files;
    for (size_t a = 2; a < pos.size(); ++a) {
      const fs::path p = pos[a];
      ENGINE_CHECK(fs::exists(p), p.string(), ": no such file or directory");
      if (fs::is_directory(p)) {
        std::vector<fs::path> in_dir;
        for (const auto& e : fs::directory_iterator(p))
          if (e.is_regular_file() && e.path().extension() != ".dat" && !e.is_symlink()) in_dir.push_back(e.path());
        std::sort(in_dir.begin(), in_dir.end());
        files.insert(files.end(), in_dir.begin(), in_dir.end());
      } else {
        files.push_back(p);
      }
    }
    std::vector<int> ids;
    size_t n_docs = 0;
    for (const auto& f : files)
      for (const std::string& doc : documents(read_file(f), split_on)) {
        if (tok.eot() >= 0) ids.push_back(tok.eot());
        tok.encode(doc, ids);
        ++n_docs;
      }
    const std::vector<uint16_t> tokens(ids.begin(), ids.end());
    size_t n_val = size_t(double(tokens.size()) * frac);
    ENGINE_CHECK(tokens.size() > 1000 && n_val > 256, "only ", tokens.size(),
                 " tokens of text: too little to train on");
    if (tok.eot() >= 0) {  // start validation at a document's start
      auto it = std::find(tokens.end() - std::ptrdiff_t(n_val), tokens.end(), uint16_t(tok.eot()));
      if (it != tokens.end() && size_t(tokens.end() - it) > 256) n_val = size_t(tokens.end() - it);
    }
    const size_t n_train = tokens.size() - n_val;
    fs::create_directories(out_dir);
    if (format == "flat") {
      write_token_file((out_dir / "train.bin").string(),
                       std::vector<uint16_t>(tokens.begin(), tokens.begin() + std::ptrdiff_t(n_train)));
      write_token_file((out_dir / "val.bin").string(),
                       std::vector<uint16_t>(tokens.begin() + std::ptrdiff_t(n_train), tokens.end()));
      std::printf("prepare_text: %zu tokens (%s) -> %s/train.bin (%zu), val.bin (%zu)\n", tokens.size(), kind.c_str(),
                  out_dir.string().c_str(), n_train, n_val);
      return 0;
    }
    // Shards of an earlier run left beside new ones would join their glob.
    std::vector<fs::path> old;
    for (const auto& e : fs::directory_iterator(out_dir)) {
      const std::string f = e.path().filename().string();
      for (const char* split : {"_train_", "_val_"}) {  // exactly NAME_train_NNNNNN.bin, NAME_val_NNNNNN.bin
        const std::string head = name + split;
        if (f.size() == head.size() + 10 && f.rfind(head, 0) == 0 && f.compare(f.size() - 4, 4, ".bin") == 0 &&
            f.find_first_not_of("0123456789", head.size()) == f.size() - 4)
          old.push_back(e.path());
      }
    }
    std::sort(old.begin(), old.end());
    if (!old.empty() && !overwrite)
      throw UserError(cat(old.front().string(), " exists: pass --overwrite to replace ", out_dir.string(), "'s ", name,
                          "_* shards, or choose another OUT_DIR or --name"));
    for (const auto& p : old) fs::remove(p);
    write_shards(out_dir, name, "val", tokens, n_train, tokens.size(), size_t(shard_tokens));
    write_shards(out_dir, name, "train", tokens, 0, n_train, size_t(shard_tokens));
    std::printf(
        "prepare_text: %zu files, %zu documents, %zu tokens (%s) -> %s/%s_train_*.bin (%zu), %s_val_*.bin (%zu)\n",
        files.size(), n_docs, tokens.size(), kind.c_str(), out_dir.string().c_str(), name.c_str(), n_train,
        name.c_str(), n_val);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prepare_text: error: %s\n", e.what());
    return 1;
  }
}
