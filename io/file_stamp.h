// What a reader remembers of a data file it keeps open: its inode, size and
// modification time when opened. A file truncated, regrown or rewritten in
// place under a running job keeps its inode but changes its modification
// time, so comparing the stamp after each read catches what the size alone
// does not (truncated and grown back to the same size, a reader gets zeros
// with no error). A file replaced by a rename is another inode: the open
// descriptor keeps reading the file it opened, whole, so that is not an
// error. Used by the HDF5 datasets and the token files.
#pragma once
#include <cstdint>
#include <string>

namespace eng::io {

struct FileStamp {
  uint64_t dev = 0, ino = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
};

// fstat of an open descriptor; throws a UserError naming `path` on failure.
FileStamp stamp_of(int fd, const std::string& path);
// stat of a path, for the check that the file opened is the file found.
FileStamp stamp_of(const std::string& path);
// "" when `now` is the file `then` described, unchanged; else the reason, a
// clause that follows "<path>: " ("the file shrank from ...", "the file was
// modified since it was opened ...").
std::string file_change(const FileStamp& then, const FileStamp& now);
// Throws a UserError "<where>: <file_change>" when the file changed.
void check_file_unchanged(const FileStamp& then, int fd, const std::string& path, const std::string& where);

}  // namespace eng::io
