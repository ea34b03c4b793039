// Token file mapping, validation, batch sampling and writing.
#include "io/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "base/error.h"
#include "kernels/rng.h"

namespace eng {

TokenFile::TokenFile(const std::string& path, int64_t vocab_size) : path_(path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever
  // (and a rank stuck here leaves the others waiting); it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ENGINE_CHECK(fd >= 0, path, ": cannot open token file: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    ENGINE_FAIL(path, ": cannot stat token file");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    ENGINE_FAIL(path, ": not a regular file (a pipe or a device?): a token file is read by its size and mapped");
  }
  const size_t bytes = size_t(st.st_size);
  if (bytes % 2 != 0) {
    ::close(fd);
    ENGINE_FAIL(path, ": odd byte count ", bytes, " (a token file holds 2-byte uint16 ids; truncated?)");
  }
  if (bytes == 0) {
    ::close(fd);
    ENGINE_FAIL(path, ": empty token file");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file alive
  ENGINE_CHECK(p != MAP_FAILED, path, ": mmap failed: ", std::strerror(errno));
  data_ = static_cast<const uint16_t*>(p);
  map_bytes_ = bytes;
  n_ = int64_t(bytes / 2);
  for (int64_t i = 0; i < n_; ++i)
    if (data_[i] >= vocab_size) {
      const uint16_t bad = data_[i];
      ::munmap(const_cast<uint16_t*>(data_), map_bytes_);
      ENGINE_FAIL(path, ": token id ", bad, " at position ", i, " is outside the vocabulary [0, ", vocab_size, ")");
    }
}

TokenFile::~TokenFile() {
  if (data_) ::munmap(const_cast<uint16_t*>(data_), map_bytes_);
}

TokenSampler::TokenSampler(const TokenFile& file, int64_t B, int64_t T, Order order, uint64_t seed)
    : file_(file), B_(B), T_(T), order_(order), seed_(seed) {
  ENGINE_CHECK(B > 0 && T > 0, "token sampler: batch ", B, " and sequence length ", T, " must be > 0");
  ENGINE_CHECK(file.size() >= T + 1, file.path(), ": ", file.size(), " tokens, fewer than one window of T+1 = ", T + 1);
}

int64_t TokenSampler::windows() const { return (file_.size() - 1) / T_; }

void TokenSampler::batch(int64_t step, Tensor& ids, Tensor& targets) const {
  ENGINE_CHECK(ids.shape() == (Shape{B_, T_}) && targets.shape() == (Shape{B_, T_}) && ids.dtype() == DType::i32,
               "token sampler: batch tensors must be i32 (", B_, ", ", T_, ")");
  int32_t* x = ids.data<int32_t>();
  int32_t* y = targets.data<int32_t>();
  const uint64_t span = uint64_t(file_.size() - T_);  // valid window starts: [0, size - T - 1]
  for (int64_t b = 0; b < B_; ++b) {
    int64_t start;
    if (order_ == Order::random)
      start = int64_t(rng::bits(seed_, uint64_t(step * B_ + b)) % span);
    else
      start = ((step * B_ + b) % windows()) * T_;
    for (int64_t t = 0; t < T_; ++t) {
      x[b * T_ + t] = file_[start + t];
      y[b * T_ + t] = file_[start + t + 1];
    }
  }
}

void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    ENGINE_CHECK(out, tmp, ": cannot open for writing");
    // uint16 in memory is little-endian on every platform we build for (x86-64, aarch64).
    out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 2));
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      ENGINE_FAIL(tmp, ": write failed");
    }
  }
  ENGINE_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, path, ": rename from ", tmp, " failed");
}

}  // namespace eng
