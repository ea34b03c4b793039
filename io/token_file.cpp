// Token files: validation, checked reads, batch sampling and writing.
#include "io/token_file.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "kernels/rng.h"

namespace eng {

namespace {

// llm.c's shards (dev/data/data_common.py, llmc/dataloader.h) start with
// 256 int32s: magic, version, token count. GPT-2's: magic 20240520, version
// 1, uint16 tokens; Llama 3's: magic 20240801, version 7, uint32 tokens.
constexpr int32_t kLlmcMagic = 20240520, kLlmcMagicLlama3 = 20240801;
constexpr int32_t kLlmcVersion = 1, kLlmcVersionLlama3 = 7;
constexpr int64_t kLlmcHeaderBytes = 256 * 4;

// Ids [0, n) of a shard's tokens of `width` bytes (2: uint16, 4: uint32) in raw, into out.
void widen(const void* raw, int width, int64_t n, int32_t* out) {
  if (width == 2) {
    const auto* r = static_cast<const uint16_t*>(raw);
    for (int64_t i = 0; i < n; ++i) out[i] = int32_t(r[i]);
  } else {
    const auto* r = static_cast<const uint32_t*>(raw);
    for (int64_t i = 0; i < n; ++i) out[i] = int32_t(r[i]);  // checked below 2^31 at open
  }
}

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

std::vector<std::string> token_file_paths(const std::string& spec) {
  namespace fs = std::filesystem;
  std::vector<std::string> paths;
  std::error_code ec;
  if (spec.find_first_of("*?[") != std::string::npos && !fs::is_regular_file(spec, ec)) {
    glob_t g{};
    const int rc = ::glob(spec.c_str(), 0, nullptr, &g);  // sorted by name
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
    ::globfree(&g);
    ENGINE_USER_CHECK(rc == 0 || rc == GLOB_NOMATCH, spec, ": cannot expand the pattern (glob error ", rc, ")");
    ENGINE_USER_CHECK(!paths.empty(), spec, ": the pattern matches no file");
  } else if (fs::is_directory(spec, ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(spec, ec))
      if (e.path().extension() == ".bin") paths.push_back(e.path().string());
    ENGINE_USER_CHECK(!ec, spec, ": cannot list the directory: ", ec.message());
    std::sort(paths.begin(), paths.end());
    ENGINE_USER_CHECK(!paths.empty(), spec, ": a directory with no *.bin token file");
    // llm.c's scripts write a dataset's train and val shards side by side: all of it would train on the val shards.
    const auto named = [&](const char* part) {
      return std::any_of(paths.begin(), paths.end(), [&](const std::string& p) {
        return fs::path(p).filename().string().find(part) != std::string::npos;
      });
    };
    ENGINE_USER_CHECK(!(named("_train_") && named("_val_")), spec,
                      ": holds both *_train_* and *_val_* shards (llm.c writes them side by side); name one set: '",
                      (fs::path(spec) / "*_train_*.bin").string(), "' or '", (fs::path(spec) / "*_val_*.bin").string(),
                      "'");
  } else {
    paths.push_back(spec);
  }
  return paths;
}

namespace {
// Each file of a TokenFile stays open for the run: a set of FineWeb's
// shards (over a thousand for 100B tokens) can pass the common soft limit of
// 1024 descriptors, so the soft limit is raised towards the hard one.
void allow_open_files(const std::string& spec, size_t files) {
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t want = rlim_t(files) + 256;  // the run's other files, sockets and libraries
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want) {
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &lim);
    ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  ENGINE_USER_CHECK(lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= want, spec, ": ", files,
                    " token files to keep open, more than this process may (ulimit -n ", lim.rlim_cur,
                    "); raise the limit or merge shards");
}
}  // namespace

TokenFile::TokenFile(const std::string& spec, int64_t vocab_size) : spec_(spec) {
  try {
    const std::vector<std::string> paths = token_file_paths(spec);
    allow_open_files(spec, paths.size());
    for (const std::string& p : paths) open_shard(p, vocab_size);
  } catch (...) {
    for (const Shard& sh : shards_) ::close(sh.fd);
    throw;
  }
}

void TokenFile::open_shard(const std::string& path, int64_t vocab_size) {
  Shard sh;
  sh.path = path;
  sh.first = n_;
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever
  // (and a rank stuck here leaves the others waiting); it is refused below.
  sh.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ENGINE_USER_CHECK(sh.fd >= 0, path, ": cannot open token file: ", std::strerror(errno));
  try {
    struct stat st {};
    ENGINE_USER_CHECK(::fstat(sh.fd, &st) == 0, path, ": cannot stat token file: ", std::strerror(errno));
    ENGINE_USER_CHECK(S_ISREG(st.st_mode), path,
                      ": not a regular file (a pipe or a device?): a token file is read by its size");
    sh.stamp = io::stamp_of(sh.fd, path);
    const int64_t bytes = sh.stamp.size;
    ENGINE_USER_CHECK(bytes != 0, path, ": empty token file");
    int32_t head[3] = {0, 0, 0};
    if (bytes >= 12) read_exactly(sh.fd, path, sh.stamp, 0, 12, head);
    if (head[0] == kLlmcMagic || head[0] == kLlmcMagicLlama3) {
      // An llm.c shard: the header must agree with the file.
      const bool llama3 = head[0] == kLlmcMagicLlama3;
      const int32_t version = llama3 ? kLlmcVersionLlama3 : kLlmcVersion;
      ENGINE_USER_CHECK(head[1] == version, path, ": an llm.c shard header (magic ", head[0], ") of unknown version ",
                        head[1], "; version ", version, " (", llama3 ? "uint32" : "uint16", " tokens) is read");
      sh.width = llama3 ? 4 : 2;
      const int64_t want = kLlmcHeaderBytes + sh.width * int64_t(head[2]);
      ENGINE_USER_CHECK(head[2] > 0 && bytes == want, path, ": its llm.c header says ", head[2], " tokens (", want,
                        " bytes with the header), the file holds ", bytes,
                        " bytes: truncated or still being written? Write the shard again");
      sh.offset = kLlmcHeaderBytes;
      sh.n = head[2];
    } else {
      ENGINE_USER_CHECK(bytes % 2 == 0, path, ": odd byte count ", bytes,
                        " (a token file holds 2-byte uint16 ids; truncated?)");
      sh.n = bytes / 2;
    }
    // Every id below the vocabulary, read in chunks of 2^20 tokens.
    const int64_t chunk = int64_t(1) << 20;
    std::vector<uint32_t> raw(static_cast<size_t>(chunk));
    for (int64_t at = 0; at < sh.n; at += chunk) {
      const int64_t n = std::min<int64_t>(chunk, sh.n - at);
      read_exactly(sh.fd, path, sh.stamp, sh.offset + at * sh.width, n * sh.width, raw.data());
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t id = sh.width == 2 ? reinterpret_cast<const uint16_t*>(raw.data())[i] : raw[size_t(i)];
        ENGINE_USER_CHECK(int64_t(id) < vocab_size, path, ": token id ", id, " at position ", at + i,
                          " is outside the vocabulary [0, ", vocab_size, ")");
      }
    }
    io::check_file_unchanged(sh.stamp, sh.fd, path, path);
    shards_.push_back(sh);  // the destructor closes it from here on
  } catch (...) {
    ::close(sh.fd);
    throw;
  }
  n_ += sh.n;
}

TokenFile::~TokenFile() {
  for (const Shard& sh : shards_) ::close(sh.fd);
}

std::string TokenFile::describe() const {
  const bool llmc = std::any_of(shards_.begin(), shards_.end(), [](const Shard& s) { return s.offset != 0; });
  if (shards_.size() == 1 && shards_[0].path == spec_)
    return cat(spec_, " (", n_, " tokens", llmc ? ", an llm.c shard" : "", ")");
  return cat(spec_, ": ", shards_.size(), " files, ", n_, " tokens", llmc ? " (llm.c shards)" : "");
}

void TokenFile::read(int64_t start, int64_t n, int32_t* out) const {
  ENGINE_CHECK(start >= 0 && n >= 0 && start + n <= n_, spec_, ": tokens [", start, ", ", start + n,
               ") outside the files' ", n_);
  // The shard holding `start`: the last whose first token is at or before it.
  auto it =
      std::upper_bound(shards_.begin(), shards_.end(), start, [](int64_t v, const Shard& s) { return v < s.first; });
  for (--it; n > 0; ++it) {
    const int64_t at = start - it->first, take = std::min(n, it->n - at);
    std::vector<uint32_t> raw(size_t((take * it->width + 3) / 4));
    read_exactly(it->fd, it->path, it->stamp, it->offset + at * it->width, take * it->width, raw.data());
    io::check_file_unchanged(it->stamp, it->fd, it->path, it->path);
    widen(raw.data(), it->width, take, out);
    start += take, n -= take, out += take;
  }
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
  std::vector<int32_t> window(size_t(T_ + 1));
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

namespace {
// The bytes of a token file through "<path>.tmp" and a rename; head: the llm.c header, or none.
void write_tokens(const std::string& path, const int32_t* head, const void* tokens, size_t bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    ENGINE_CHECK(out, tmp, ": cannot open for writing");
    if (head) out.write(reinterpret_cast<const char*>(head), kLlmcHeaderBytes);
    // uint16 and uint32 in memory are little-endian on every platform we build for (x86-64, aarch64).
    out.write(static_cast<const char*>(tokens), std::streamsize(bytes));
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      ENGINE_FAIL(tmp, ": write failed");
    }
  }
  ENGINE_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, path, ": rename from ", tmp, " failed");
}
}  // namespace

void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens, bool llmc_header) {
  ENGINE_CHECK(tokens.size() < (size_t(1) << 31), path, ": ", tokens.size(), " tokens do not fit an llm.c header");
  const int32_t head[256] = {kLlmcMagic, kLlmcVersion, int32_t(tokens.size())};
  write_tokens(path, llmc_header ? head : nullptr, tokens.data(), tokens.size() * 2);
}

void write_token_file_u32(const std::string& path, const std::vector<uint32_t>& tokens) {
  ENGINE_CHECK(tokens.size() < (size_t(1) << 31), path, ": ", tokens.size(), " tokens do not fit an llm.c header");
  const int32_t head[256] = {kLlmcMagicLlama3, kLlmcVersionLlama3, int32_t(tokens.size())};
  write_tokens(path, head, tokens.data(), tokens.size() * 4);
}

}  // namespace eng
