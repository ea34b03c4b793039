// Token files: little-endian token ids, back to back, either uint16 with no
// header (the train.bin / val.bin format of nanoGPT) or as llm.c's shards
// (dev/data/data_common.py, llmc/dataloader.h: a 1024-byte header of 256
// int32s, magic, version and token count, then the tokens): GPT-2's (magic
// 20240520, version 1, uint16 ids) or Llama 3's (magic 20240801, version
// 7, uint32 ids, for vocabularies past 65,536).
// A TokenFile is one file or a set of them read as one sequence, their
// tokens in name order: a glob pattern (`data/fineweb_train_*.bin`, as
// llm.c's -i) or a directory (its *.bin files). Opening checks every file:
// an even byte count, a header that agrees with the file's size, a known
// version, every id below the vocabulary; so a bad file fails at the start
// with the file and position named, never in the middle of a run. The files
// stay open and are read with pread: a file cut under a running job is a
// short read and an error (a memory map would die of SIGBUS), and after every
// read its stamp (size, modification time; io/file_stamp.h) is compared with
// the one at open, so a file truncated and grown back, or rewritten in
// place, is an error too, never batches of zeros.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "io/file_stamp.h"

namespace eng {

class TokenFile {
 public:
  // spec: a file, a glob pattern (with *, ? or [), or a directory.
  TokenFile(const std::string& spec, int64_t vocab_size);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  int64_t size() const { return n_; }  // number of tokens, all files
  // Tokens [start, start + n) of the whole sequence into out (a range may
  // span two files), then each file read checked unchanged. Thread-safe.
  void read(int64_t start, int64_t n, int32_t* out) const;
  const std::string& path() const { return spec_; }
  // "data/train.bin (N tokens)", or "SPEC: K files, N tokens (llm.c shards)".
  std::string describe() const;

  // One file of the sequence: its first token's index in the whole, and
  // where its tokens start (0, or 1024 after an llm.c header).
  struct Shard {
    std::string path;
    int fd = -1;
    int64_t first = 0, n = 0, offset = 0;
    int width = 2;  // bytes per id: 2 (uint16), 4 (Llama 3's uint32 shards)
    io::FileStamp stamp;
  };

 private:
  void open_shard(const std::string& path, int64_t vocab_size);

  std::string spec_;
  std::vector<Shard> shards_;
  int64_t n_ = 0;
};

// The files a TokenFile spec names, in name order (the spec itself when it is
// a plain file); a UserError naming the spec when it names none.
std::vector<std::string> token_file_paths(const std::string& spec);

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

// Writes tokens as a flat uint16 file through "<path>.tmp" and a rename;
// with llmc_header, as an llm.c shard (version 1: the 1024-byte header).
void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens, bool llmc_header = false);
// An llm.c shard of Llama 3's format (magic 20240801, version 7, uint32 ids).
void write_token_file_u32(const std::string& path, const std::vector<uint32_t>& tokens);

}  // namespace eng
