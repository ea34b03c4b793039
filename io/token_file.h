// Flat token files: little-endian uint16 token ids, back to back, no header
// (the train.bin / val.bin format of nanoGPT and llm.c's "tokens" files).
// The file is memory-mapped read-only; opening it checks the byte count is
// even and every id is below the vocabulary size, so a bad file fails at the
// start with the file and position named, never in the middle of a run.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace eng {

class TokenFile {
 public:
  TokenFile(const std::string& path, int64_t vocab_size);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  int64_t size() const { return n_; }  // number of tokens
  uint16_t operator[](int64_t i) const { return data_[i]; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint16_t* data_ = nullptr;
  int64_t n_ = 0;
  size_t map_bytes_ = 0;
};

// Draws (B, T) input/target batches: targets are the inputs shifted by one.
// Random mode: window starts from a counter-based RNG at (seed, step*B + b),
// so the sampler's whole state is the step number (what resume saves).
// Sequential mode: consecutive non-overlapping windows from the start, for
// evaluation; the position wraps at the end of the file.
class TokenSampler {
 public:
  enum class Order : uint8_t { random, sequential };
  TokenSampler(const TokenFile& file, int64_t B, int64_t T, Order order, uint64_t seed);
  // Fills ids and targets (both (B, T) i32 on the cpu) for `step`.
  void batch(int64_t step, Tensor& ids, Tensor& targets) const;
  int64_t windows() const;  // number of distinct sequential windows

 private:
  const TokenFile& file_;
  int64_t B_, T_;
  Order order_;
  uint64_t seed_;
};

// Writes tokens as a flat uint16 file through "<path>.tmp" and a rename.
void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens);

}  // namespace eng
