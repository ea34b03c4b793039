// Data files checked for changes under a running job (see file_stamp.h).
#include "io/file_stamp.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "base/error.h"

namespace eng::io {

namespace {

FileStamp from(const struct stat& st) {
  return {uint64_t(st.st_dev), uint64_t(st.st_ino), int64_t(st.st_size),
          int64_t(st.st_mtim.tv_sec) * 1000000000 + int64_t(st.st_mtim.tv_nsec)};
}

std::string utc(int64_t ns) {
  const std::time_t t = std::time_t(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  char ms[8];
  std::snprintf(ms, sizeof ms, ".%03lld", (long long)(ns % 1000000000 / 1000000));
  return std::string(buf) + ms;
}

}  // namespace

FileStamp stamp_of(int fd, const std::string& path) {
  struct stat st {};
  ENGINE_USER_CHECK(::fstat(fd, &st) == 0, path, ": cannot stat the file: ", std::strerror(errno));
  return from(st);
}

FileStamp stamp_of(const std::string& path) {
  struct stat st {};
  ENGINE_USER_CHECK(::stat(path.c_str(), &st) == 0, path, ": cannot stat the file: ", std::strerror(errno));
  return from(st);
}

std::string file_change(const FileStamp& then, const FileStamp& now) {
  if (now.dev != then.dev || now.ino != then.ino)
    return "the file was replaced while it was being opened (another inode); open it again once it is final";
  if (now.size < then.size)
    return cat("the file shrank from ", then.size, " to ", now.size,
               " bytes since it was opened (truncated or rewritten while in use?)");
  if (now.size != then.size || now.mtime_ns != then.mtime_ns)
    return cat("the file was modified since it was opened (at ", utc(now.mtime_ns), " UTC, size ", then.size, " -> ",
               now.size, " bytes): rewritten in place while a run reads it? Restore it, then --resume");
  return "";
}

void check_file_unchanged(const FileStamp& then, int fd, const std::string& path, const std::string& where) {
  const std::string change = file_change(then, stamp_of(fd, path));
  if (!change.empty()) throw UserError(where + ": " + change);
}

}  // namespace eng::io
