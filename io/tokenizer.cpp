#include "io/tokenizer.h"

#include <cstdlib>
#include <filesystem>

#include "base/error.h"

namespace eng::text {

std::string default_gpt2_vocab() {
  if (const char* env = std::getenv("ENGINE_GPT2_VOCAB"); env && *env) return env;
  return std::string(ENGINE_SOURCE_DIR) + "/.deps/gpt2/gpt2.tiktoken";
}

Tokenizer Tokenizer::make(const std::string& kind, const std::string& vocab) {
  Tokenizer t;
  t.kind_ = kind;
  if (kind == "bytes") return t;
  if (kind != "gpt2") throw UserError(cat("unknown tokenizer '", kind, "': use bytes or gpt2"));
  const std::string path = vocab.empty() ? default_gpt2_vocab() : vocab;
  if (!std::filesystem::exists(path))
    throw UserError(
        cat(path,
            ": GPT-2's tokenizer file is missing: run scripts/setup.sh (it fetches gpt2.tiktoken into "
            ".deps/gpt2) or name one with --vocab (a ranks file, or a directory with vocab.json and merges.txt)"));
  t.bpe_ = std::make_shared<const Bpe>(Bpe::load(path));
  return t;
}

void Tokenizer::encode(std::string_view text, std::vector<int>& out) const {
  if (bpe_) return bpe_->encode_ordinary(text, out);
  for (unsigned char c : text) out.push_back(c);
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  if (bpe_) return bpe_->decode(ids);
  std::string s;
  for (int id : ids) {
    if (id < 0 || id > 255)
      throw UserError(cat("token id ", id, " is not a byte (the bytes tokenizer has 256 tokens)"));
    s.push_back(char(id));
  }
  return s;
}

}  // namespace eng::text
