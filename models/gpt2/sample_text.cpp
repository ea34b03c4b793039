#include "models/gpt2/sample_text.h"

#include <filesystem>

#include "base/error.h"

namespace eng::models {

SampleText::SampleText(const std::string& tokenizer, const std::string& vocab, const std::string& p, int64_t V) {
  kind_ = tokenizer;
  const std::string file = vocab.empty() ? text::default_gpt2_vocab() : vocab;
  if (kind_ == "auto") {
    kind_ = V <= 256 ? "bytes" : V >= 50257 ? "gpt2" : "ids";
    if (kind_ == "gpt2" && !std::filesystem::exists(file)) {
      kind_ = "ids";
      note_ = cat("samples as token ids: GPT-2's tokenizer file ", file,
                  " is missing (scripts/setup.sh fetches it; --tokenizer_file names another)");
    } else if (kind_ == "gpt2") {
      tok_ = text::Tokenizer::make(kind_, file);
      if (V > tok_->vocab_size()) {  // a larger vocabulary than GPT-2's: not its tokens
        note_ =
            cat("samples as token ids: vocab_size ", V, " is more than ", file, "'s ", tok_->vocab_size(), " tokens");
        kind_ = "ids";
        tok_.reset();
      }
    }
  }
  ENGINE_USER_CHECK(kind_ == "bytes" || kind_ == "gpt2" || kind_ == "ids", "tokenizer '", kind_,
                    "': auto, bytes, gpt2 or ids");
  if (kind_ != "ids") {
    if (!tok_) tok_ = text::Tokenizer::make(kind_, file);
    ENGINE_USER_CHECK(kind_ == "gpt2" || V <= 256, "tokenizer bytes decodes 256 ids, the model has vocab_size ", V,
                      ": use gpt2 or ids");
    ENGINE_USER_CHECK(V <= tok_->vocab_size(), "vocab_size ", V, " is more than the ", kind_, " tokenizer's ",
                      tok_->vocab_size(), " tokens: use tokenizer ids");
  }
  default_prompt_ = p.empty();
  if (default_prompt_) {
    prompt_ = {kind_ == "bytes" ? int32_t('\n') : kind_ == "gpt2" ? int32_t(tok_->eot()) : V > 50256 ? 50256 : 0};
    ENGINE_USER_CHECK(prompt_[0] >= 0, file, " has no <|endoftext|> to start from: give a prompt");
  } else {
    ENGINE_USER_CHECK(kind_ != "ids", "a prompt needs a tokenizer (bytes or gpt2), not ids");
    std::vector<int> ids;
    tok_->encode(p, ids);
    prompt_.assign(ids.begin(), ids.end());
  }
  for (int32_t t : prompt_)
    ENGINE_USER_CHECK(t >= 0 && t < V, "the prompt's token ", t, " is outside the model's vocab_size ", V);
}

std::string SampleText::render(const std::vector<int32_t>& ids, bool from_prompt) const {
  const bool dflt = default_prompt_ && from_prompt;
  std::string s;
  if (kind_ == "ids") {
    for (int32_t t : ids) s.append(1, s.empty() ? '\n' : ' ').append(std::to_string(t));
    return s;
  }
  if (!(kind_ == "bytes" && dflt)) s = "\n";  // the bytes' default prompt is that newline
  if (kind_ == "bytes") {
    for (int32_t t : ids) s.push_back(t < 256 && (t >= 32 || t == '\n' || t == '\t') ? char(t) : '?');
    return s;
  }
  const size_t skip = dflt ? prompt_.size() : 0;  // gpt2's default: <|endoftext|>, not shown
  return s.append(tok_->decode(std::vector<int>(ids.begin() + std::ptrdiff_t(skip), ids.end())));
}

}  // namespace eng::models
