// tokenize: a text file through a run's tokenizer (io/tokenizer.h), ids out;
// or ids back to text. What the tests compare with tiktoken, and the
// tokenizer's speed figure (--time).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/gpt2_pretokenize.h"
#include "io/tokenizer.h"
#include "models/gpt2/cli_args.h"

using namespace eng;

static const char* kUsage =
    "usage: tokenize [--tokenizer gpt2|bytes] [--vocab PATH] [--allow_special] [--decode | --pieces | --time N] FILE\n"
    "Encodes FILE's bytes and prints the token ids on one line, space-separated.\n"
    "  --tokenizer KIND  gpt2 (default: GPT-2's byte-level BPE, vocabulary 50257) or bytes\n"
    "  --vocab PATH      GPT-2's ranks file (gpt2.tiktoken) or a directory with vocab.json and merges.txt;\n"
    "                    default $ENGINE_GPT2_VOCAB, else .deps/gpt2/gpt2.tiktoken (scripts/setup.sh fetches it)\n"
    "  --allow_special   the text \"<|endoftext|>\" becomes token 50256 (default: it is plain text, as\n"
    "                    tiktoken's encode_ordinary and llm.c's data scripts)\n"
    "  --decode          FILE holds ids (whitespace-separated); prints their bytes\n"
    "  --pieces          prints the byte length of each of GPT-2's pre-tokenizer pieces, one a line\n"
    "  --time N          encodes the file N times on one thread; prints MB/s and tokens/s\n";

static std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(cat(path, ": cannot open"));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int main(int argc, char** argv) {
  try {
    std::string kind = "gpt2", vocab, file, mode = "encode";
    bool allow_special = false;
    int reps = 0;
    for (CliArgs args(argc, argv); args.next();) {
      const std::string& arg = args.arg();
      auto value = [&] { return args.value(); };
      if (arg == "--help") return std::printf("%s", kUsage), 0;
      if (arg == "--tokenizer")
        kind = value();
      else if (arg == "--vocab")
        vocab = value();
      else if (arg == "--allow_special")
        allow_special = true;
      else if (arg == "--decode" || arg == "--pieces")
        mode = arg.substr(2);
      else if (arg == "--time") {
        mode = "time";
        reps = int(args.number(1, 1e6));
      } else if (args.is_option())
        throw UserError(cat("unknown option ", arg, " (see --help)"));
      else if (file.empty())
        file = arg;
      else
        throw UserError(cat("one FILE only, got '", file, "' and '", arg, "'"));
    }
    if (file.empty()) return std::fprintf(stderr, "%s", kUsage), 2;
    const std::string text = read_file(file);
    if (mode == "pieces") {
      for (auto p : text::gpt2_pieces(text)) std::printf("%zu\n", p.size());
      return 0;
    }
    const text::Tokenizer tok = text::Tokenizer::make(kind, vocab);
    if (mode == "decode") {
      std::istringstream in(text);
      std::vector<int> ids;
      for (long long id; in >> id;) {
        if (id < 0 || id > (1 << 30)) throw UserError(cat(file, ": token id ", id, " is out of range"));
        ids.push_back(int(id));
      }
      if (!in.eof()) throw UserError(cat(file, ": expected whitespace-separated token ids"));
      const std::string out = tok.decode(ids);
      std::fwrite(out.data(), 1, out.size(), stdout);
      return 0;
    }
    auto encode = [&](std::vector<int>& ids) {
      if (allow_special && tok.bpe())
        ids = tok.bpe()->encode(text, true);
      else
        tok.encode(text, ids);
    };
    std::vector<int> ids;
    if (mode == "time") {
      encode(ids);  // warm: pages touched, tables built
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) {
        ids.clear();
        encode(ids);
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
      std::printf("tokenize: %s, %zu bytes -> %zu tokens, %.4f s a pass, %.2f MB/s, %.0f tokens/s (one thread)\n",
                  file.c_str(), text.size(), ids.size(), s, double(text.size()) / s / 1e6, double(ids.size()) / s);
      return 0;
    }
    encode(ids);
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) (out += i ? " " : "") += std::to_string(ids[i]);
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenize: error: %s\n", e.what());
    return 1;
  }
}
