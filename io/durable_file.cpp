// Durable file writes (see durable_file.h).
#include "io/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace eng {

DurableFile::DurableFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ENGINE_USER_CHECK(fd_ >= 0, path_, ": cannot open for writing: ", std::strerror(errno));
}

DurableFile::~DurableFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  std::remove(path_.c_str());
}

void DurableFile::write(const void* data, size_t n) {
  ENGINE_CHECK(fd_ >= 0, path_, ": write after finish");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    ENGINE_USER_CHECK(w > 0, path_, ": write failed: ", w < 0 ? std::strerror(errno) : "no progress");
    p += w;
    n -= size_t(w);
  }
}

void DurableFile::finish() {
  ENGINE_CHECK(fd_ >= 0, path_, ": finished twice");
  const int synced = ::fsync(fd_), sync_err = errno;
  ENGINE_USER_CHECK(synced == 0, path_, ": fsync failed: ", std::strerror(sync_err));  // the destructor removes it
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    std::remove(path_.c_str());
    ENGINE_USER_FAIL(path_, ": close failed: ", std::strerror(err));
  }
}

void write_file_durably(const std::string& path, std::string_view bytes) {
  DurableFile f(path);
  f.write(bytes);
  f.finish();
}

void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // what was written is there; only its durability across a power loss is unconfirmed
  ::fsync(fd);
  ::close(fd);
}

void rename_durably(const std::string& tmp, const std::string& path) {
  ENGINE_USER_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, path, ": cannot rename ", tmp,
                    " to it: ", std::strerror(errno));
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = std::filesystem::current_path();
  sync_dir(dir.string());
}

}  // namespace eng
