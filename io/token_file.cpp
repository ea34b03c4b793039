// Token files: validation, checked reads, batch sampling and writing.
#include "io/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "base/error.h"
#include "kernels/rng.h"

namespace eng {

namespace {

// llm.c's shards (dev/data/*.py, llmc/dataloader.h) start with 256 int32s:
// magic, version, token count.
constexpr int32_t kLlmcMagic = 20240520;

// pread of exactly `bytes` at `pos`, or a UserError naming the file (an
// early end said as the stamp's check says it: "the file shrank from ...").
void read_exactly(int fd, const std::string& path, const io::FileStamp& stamp, int64_t pos, int64_t bytes, void* out) {
  auto* dst = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd, dst, size_t(bytes), off_t(pos));
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) {
      io::check_file_unchanged(stamp, fd, path, path);
      throw UserError(cat(path, ": the file ends at byte ", pos, " (truncated while a run reads it?)"));
    }
    ENGINE_USER_CHECK(got > 0, path, ": read at byte ", pos, " failed: ", std::strerror(errno));
    dst += got, pos += got, bytes -= got;
  }
}

}  // namespace

TokenFile::TokenFile(const std::string& path, int64_t vocab_size) : path_(path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever
  // (and a rank stuck here leaves the others waiting); it is refused below.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ENGINE_USER_CHECK(fd_ >= 0, path, ": cannot open token file: ", std::strerror(errno));
  try {
    struct stat st {};
    ENGINE_USER_CHECK(::fstat(fd_, &st) == 0, path, ": cannot stat token file: ", std::strerror(errno));
    ENGINE_USER_CHECK(S_ISREG(st.st_mode), path,
                      ": not a regular file (a pipe or a device?): a token file is read by its size");
    stamp_ = io::stamp_of(fd_, path);
    const int64_t bytes = stamp_.size;
    ENGINE_USER_CHECK(bytes != 0, path, ": empty token file");
    if (bytes >= 12) {
      int32_t head[3];
      read_exactly(fd_, path, stamp_, 0, 12, head);
      ENGINE_USER_CHECK(head[0] != kLlmcMagic || (head[1] != 1 && head[1] != 2), path,
                        ": an llm.c token shard (a 1024-byte header: magic ", kLlmcMagic, ", version ", head[1], ", ",
                        head[2], " tokens); this reader takes headerless uint16 files: tail -c +1025 ", path,
                        " > tokens.bin gives one");
    }
    ENGINE_USER_CHECK(bytes % 2 == 0, path, ": odd byte count ", bytes,
                      " (a token file holds 2-byte uint16 ids; truncated?)");
    n_ = bytes / 2;
    // Every id below the vocabulary, read in 2 MiB chunks.
    std::vector<uint16_t> chunk(size_t(1) << 20);
    for (int64_t at = 0; at < n_; at += int64_t(chunk.size())) {
      const int64_t n = std::min<int64_t>(int64_t(chunk.size()), n_ - at);
      read_exactly(fd_, path, stamp_, at * 2, n * 2, chunk.data());
      for (int64_t i = 0; i < n; ++i)
        ENGINE_USER_CHECK(chunk[size_t(i)] < vocab_size, path, ": token id ", chunk[size_t(i)], " at position ", at + i,
                          " is outside the vocabulary [0, ", vocab_size, ")");
    }
    io::check_file_unchanged(stamp_, fd_, path, path);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

TokenFile::~TokenFile() {
  if (fd_ >= 0) ::close(fd_);
}

void TokenFile::read(int64_t start, int64_t n, uint16_t* out) const {
  ENGINE_CHECK(start >= 0 && n >= 0 && start + n <= n_, path_, ": tokens [", start, ", ", start + n,
               ") outside the file's ", n_);
  read_exactly(fd_, path_, stamp_, start * 2, n * 2, out);
  io::check_file_unchanged(stamp_, fd_, path_, path_);
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
  std::vector<uint16_t> window(size_t(T_ + 1));
  for (int64_t b = 0; b < B_; ++b) {
    int64_t start;
    if (order_ == Order::random)
      start = int64_t(rng::bits(seed_, uint64_t(step * B_ + b)) % span);
    else
      start = ((step * B_ + b) % windows()) * T_;
    file_.read(start, T_ + 1, window.data());
    for (int64_t t = 0; t < T_; ++t) {
      x[b * T_ + t] = window[size_t(t)];
      y[b * T_ + t] = window[size_t(t + 1)];
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
