// What a GPT-2 run's samples start from and how their ids become text: the
// `tokenizer` and `prompt` options (io/tokenizer.h).
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
#include "models/train/train_config.h"

namespace eng::models {

class SampleText {
 public:
  // Checks the options against the model's vocabulary (UserErrors).
  SampleText(const TrainConfig& c, int64_t vocab_size);
  const std::vector<int32_t>& prompt() const { return prompt_; }
  // ids: the prompt then the continuation, as generate() returns them.
  std::string render(const std::vector<int32_t>& ids) const;
  const std::string& kind() const { return kind_; }  // bytes, gpt2 or ids
  const std::string& note() const { return note_; }  // why auto fell back to ids, or ""

 private:
  std::string kind_, note_;
  std::optional<text::Tokenizer> tok_;
  std::vector<int32_t> prompt_;
  bool default_prompt_ = false;
};

}  // namespace eng::models
