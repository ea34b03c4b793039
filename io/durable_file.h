// Writing files so that a crash, a kill or a full disk never leaves a
// half-written one under the final name: write to a temporary name, fsync,
// rename. DurableFile is the writing half: it reports every failed write
// with the OS's reason (ENOSPC: "No space left on device"), and a file not
// finish()ed (an error, an exception) is removed, so a failed write leaves
// no partial file behind to use disk or be mistaken for a whole one.
// fsync makes the bytes survive a power loss too, not only a killed process.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace eng {

class DurableFile {
 public:
  explicit DurableFile(std::string path);  // created or truncated; throws naming the path and the reason
  ~DurableFile();                          // removes the file unless finish() succeeded
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;
  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void finish();  // fsync and close; throws on failure (the file is then removed)

 private:
  std::string path_;
  int fd_ = -1;
};

// The whole file at once: `path` written, fsync'ed, closed.
void write_file_durably(const std::string& path, std::string_view bytes);
// A directory fsync'ed: the names of the files made in it survive a power loss.
void sync_dir(const std::string& dir);
// tmp -> path by rename(2), then the parent directory fsync'ed so the rename itself survives.
void rename_durably(const std::string& tmp, const std::string& path);

}  // namespace eng
