// The tokenizer a run's text goes through: "bytes" (each byte its own token,
// vocabulary 256, the character-level runs) or "gpt2" (GPT-2's byte-level BPE,
// io/bpe.h, vocabulary 50257). prepare_text makes token shards with it, the
// training samples and the generate program turn ids back into text with it.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/bpe.h"

namespace eng::text {

class Tokenizer {
 public:
  // kind: "bytes" or "gpt2"; vocab: GPT-2's ranks file or a directory with
  // vocab.json and merges.txt, "" for default_gpt2_vocab(). A UserError
  // names a bad kind or a missing file and what to do.
  static Tokenizer make(const std::string& kind, const std::string& vocab = "");

  const std::string& kind() const { return kind_; }
  int vocab_size() const { return bpe_ ? bpe_->vocab_size() : 256; }
  int eot() const { return bpe_ ? bpe_->eot() : -1; }               // the document separator, -1 for bytes
  void encode(std::string_view text, std::vector<int>& out) const;  // appends; specials are text
  std::string decode(const std::vector<int>& ids) const;
  const Bpe* bpe() const { return bpe_.get(); }

 private:
  std::string kind_;
  std::shared_ptr<const Bpe> bpe_;
};

// GPT-2's ranks file as scripts/setup.sh fetches it: $ENGINE_GPT2_VOCAB if
// set, else .deps/gpt2/gpt2.tiktoken in the source tree.
std::string default_gpt2_vocab();

}  // namespace eng::text
