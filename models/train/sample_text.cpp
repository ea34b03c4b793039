#include "models/train/sample_text.h"

#include <filesystem>

#include "base/error.h"

namespace eng::models {

SampleText::SampleText(const TrainConfig& c, int64_t V) {
  kind_ = c.s("tokenizer");
  const std::string file = c.s("tokenizer_file").empty() ? text::default_gpt2_vocab() : c.s("tokenizer_file");
  if (kind_ == "auto") {
    kind_ = V <= 256 ? "bytes" : V >= 50257 ? "gpt2" : "ids";
    if (kind_ == "gpt2" && !std::filesystem::exists(file)) {
      kind_ = "ids";
      note_ = cat("samples as token ids: GPT-2's tokenizer file ", file,
                  " is missing (scripts/setup.sh fetches it; --tokenizer_file names another)");
    }
  }
  ENGINE_USER_CHECK(kind_ == "bytes" || kind_ == "gpt2" || kind_ == "ids", "config: tokenizer '", kind_,
                    "': auto, bytes, gpt2 or ids");
  if (kind_ != "ids") {
    tok_ = text::Tokenizer::make(kind_, file);
    ENGINE_USER_CHECK(kind_ == "gpt2" || V <= 256, "config: tokenizer bytes decodes 256 ids, the model has vocab_size ",
                      V, ": use gpt2 or ids");
    ENGINE_USER_CHECK(V <= tok_->vocab_size(), "config: vocab_size ", V, " is more than the ", kind_,
                      " tokenizer's ", tok_->vocab_size(), " tokens: use tokenizer ids");
  }
  const std::string& p = c.s("prompt");
  default_prompt_ = p.empty();
  if (default_prompt_) {
    prompt_ = {kind_ == "bytes" ? int32_t('\n') : kind_ == "gpt2" ? int32_t(tok_->eot()) : V > 50256 ? 50256 : 0};
  } else {
    ENGINE_USER_CHECK(kind_ != "ids", "config: a prompt needs a tokenizer (bytes or gpt2), not ids");
    std::vector<int> ids;
    tok_->encode(p, ids);
    prompt_.assign(ids.begin(), ids.end());
  }
  for (int32_t t : prompt_)
    ENGINE_USER_CHECK(t < V, "config: the prompt's token ", t, " is outside the model's vocab_size ", V);
}

std::string SampleText::render(const std::vector<int32_t>& ids) const {
  std::string s;
  if (kind_ == "ids") {
    for (int32_t t : ids) s.append(1, s.empty() ? '\n' : ' ').append(std::to_string(t));
    return s;
  }
  if (!(kind_ == "bytes" && default_prompt_)) s = "\n";  // the bytes' default prompt is that newline
  if (kind_ == "bytes") {
    for (int32_t t : ids) s.push_back(t < 256 && (t >= 32 || t == '\n' || t == '\t') ? char(t) : '?');
    return s;
  }
  const size_t skip = default_prompt_ ? prompt_.size() : 0;  // gpt2's default: <|endoftext|>, not shown
  return s.append(tok_->decode(std::vector<int>(ids.begin() + std::ptrdiff_t(skip), ids.end())));
}

}  // namespace eng::models
