// Flat token files: little-endian uint16 token ids, back to back, no header
// (the train.bin / val.bin format of nanoGPT). Opening one checks that the
// byte count is even and every id is below the vocabulary size, so a bad
// file fails at the start with the file and position named, never in the
// middle of a run; an llm.c shard (a 1024-byte header, magic 20240520) is
// recognised and refused in one line. The file stays open and is read with
// pread: a file cut under a running job is a short read and an error (a
// memory map would die of SIGBUS), and after every read its stamp (size,
// modification time; io/file_stamp.h) is compared with the one at open, so
// a file truncated and grown back, or rewritten in place, is an error too,
// never batches of zeros.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "io/file_stamp.h"

namespace eng {

class TokenFile {
 public:
  TokenFile(const std::string& path, int64_t vocab_size);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  int64_t size() const { return n_; }  // number of tokens
  // Tokens [start, start + n) into out, then the file checked unchanged.
  // Thread-safe.
  void read(int64_t start, int64_t n, uint16_t* out) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t n_ = 0;
  io::FileStamp stamp_;
};

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
