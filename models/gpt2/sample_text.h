// What GPT-2's samples start from and how their ids become text: the
// `tokenizer` and `prompt` options of train and generate (io/tokenizer.h).
//   tokenizer auto: bytes for a vocabulary of up to 256, gpt2 for 50257 and
//   more when GPT-2's ranks file is there (ids, with a note, when it is not),
//   ids otherwise; bytes / gpt2 / ids force one (gpt2: the file must exist).
//   prompt: encoded by the tokenizer; empty starts from a newline (bytes) or
//   <|endoftext|> (gpt2, as llm.c samples; under ids too when the vocabulary
//   has GPT-2's 50256), else token 0.
// A sample is the prompt's text and the continuation's: bytes shows
// non-printing bytes as '?', gpt2 the decoded bytes (<|endoftext|> spelled
// out), ids the numbers.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "io/tokenizer.h"

namespace eng::models {

class SampleText {
 public:
  // tokenizer: auto, bytes, gpt2 or ids; file: GPT-2's vocabulary ("" for
  // text::default_gpt2_vocab()). Checked against the model's vocabulary
  // (UserErrors naming the option).
  SampleText(const std::string& tokenizer, const std::string& file, const std::string& prompt, int64_t vocab_size);
  const std::vector<int32_t>& prompt() const { return prompt_; }
  // ids: the prompt then the continuation, as generate() returns them
  // (from_prompt false: ids start with some other prompt, shown as it is).
  std::string render(const std::vector<int32_t>& ids, bool from_prompt = true) const;
  const std::string& kind() const { return kind_; }  // bytes, gpt2 or ids
  const std::string& note() const { return note_; }  // why auto fell back to ids, or ""
  int eot() const { return tok_ ? tok_->eot() : -1; }
  const text::Tokenizer* tokenizer() const { return tok_ ? &*tok_ : nullptr; }  // <|endoftext|> under gpt2, else -1

 private:
  std::string kind_, note_;
  std::optional<text::Tokenizer> tok_;
  std::vector<int32_t> prompt_;
  bool default_prompt_ = false;
};

}  // namespace eng::models
