// TensorBoard event files (see tensorboard.h).
#include "io/tensorboard.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace eng {

namespace {

// The reflected Castagnoli polynomial 0x1EDC6F41, one byte at a time.
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> r{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      r[i] = c;
    }
    return r;
  }();
  return t;
}

// Protocol-buffer wire format: a key is (field << 3) | wire type; varints
// are 7 bits a byte, low first; type 1 is 8 bytes, 5 is 4 bytes, 2 is a
// varint length and then the bytes.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) out += char((v & 0x7F) | 0x80), v >>= 7;
  out += char(v);
}
void key(std::string& out, int field, int type) { varint(out, uint64_t(field) << 3 | uint64_t(type)); }
template <typename T>
void fixed(std::string& out, T v) {  // little-endian, as x86 and aarch64 hold it
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
void bytes_field(std::string& out, int field, const std::string& s) {
  key(out, field, 2);
  varint(out, s.size());
  out += s;
}
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  key(e, 1, 1), fixed(e, wall_time);
  if (step != 0) key(e, 2, 0), varint(e, uint64_t(step));  // proto3: a zero is not written
  return e;
}

double now_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto& t = crc_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tb_scalars_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& values) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    bytes_field(value, 1, tag);
    key(value, 2, 5), fixed(value, v);
    bytes_field(summary, 1, value);
  }
  std::string e = event_head(wall_time, step);
  bytes_field(e, 5, summary);
  return e;
}

std::string tb_start_event(double wall_time, int64_t step) {
  std::string log;
  key(log, 1, 0), varint(log, 1);  // status = START
  std::string e = event_head(wall_time, step);
  bytes_field(e, 7, log);
  return e;
}

std::string tb_version_event(double wall_time) {
  std::string e = event_head(wall_time, 0);
  bytes_field(e, 3, "brain.Event:2");
  return e;
}

std::string tb_record(const std::string& data) {
  std::string r;
  fixed(r, uint64_t(data.size()));
  fixed(r, masked_crc32c(r.data(), 8));
  r += data;
  fixed(r, masked_crc32c(data.data(), data.size()));
  return r;
}

std::vector<std::string> tb_event_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(kTbPrefix, 0) == 0) out.push_back(it->path().string());
  return out;
}

TbWriter::TbWriter(const std::string& dir, int64_t first_step) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  ENGINE_USER_CHECK(!ec, "tensorboard: cannot create ", dir, ": ", ec.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  // TensorBoard reads a directory's files in name order, so a new file's
  // time field is later than every earlier file's, even within one second
  // (a resumed run that starts at once): its START must come after them.
  int64_t t = int64_t(now_s());
  for (const std::string& f : tb_event_files(dir))
    t = std::max<int64_t>(t, std::strtoll(fs::path(f).filename().c_str() + kTbPrefix.size(), nullptr, 10) + 1);
  const std::string base = cat(dir, "/", kTbPrefix, t, ".", host, ".", ::getpid());
  // A resumed run in the same second and process id: the next free suffix, never an existing file.
  for (int i = 0;; ++i) {
    path_ = cat(base, ".", i);
    if (!fs::exists(path_)) break;
  }
  f_ = std::fopen(path_.c_str(), "wbx");
  ENGINE_USER_CHECK(f_, path_, ": cannot create: ", std::strerror(errno));
  std::string err = write(tb_record(tb_version_event(now_s())));
  if (err.empty()) err = write(tb_record(tb_start_event(now_s(), first_step)));
  if (!err.empty()) {
    std::fclose(f_), f_ = nullptr;
    fs::remove(path_, ec);
    ENGINE_USER_FAIL(err);
  }
}

TbWriter::~TbWriter() {
  if (f_) std::fclose(f_);
}

std::string TbWriter::write(const std::string& record) {
  errno = 0;
  if (std::fwrite(record.data(), 1, record.size(), f_) != record.size() || std::fflush(f_) != 0)
    return cat(path_, ": write failed: ", errno ? std::strerror(errno) : "unknown error");
  return "";
}

std::string TbWriter::scalars(int64_t step, const std::vector<std::pair<std::string, float>>& values) {
  if (values.empty()) return "";
  return write(tb_record(tb_scalars_event(now_s(), step, values)));
}

}  // namespace eng
