// Reading HDF5 datasets: a small RAII wrapper over the HDF5 C library.
//
// A dataset is opened by name in a file opened read-only; its element type
// and shape are known at open. read() takes a box (start and count per
// dimension, row-major, as HDF5's hyperslabs) and writes it to the caller's
// buffer converted to float32 (read_i64 for integer labels).
//
// Two ways to the bytes:
//   - hdf5: H5Dread on a hyperslab. Works for every layout (chunked,
//     compressed, big-endian), but Debian's libhdf5 is the thread-safe build,
//     which holds one global lock around every call: reader threads that each
//     call H5Dread take turns.
//   - pread: for a contiguous, uncompressed, little-endian dataset HDF5 is
//     asked once where its bytes start in the file, and boxes are read with
//     pread(2), which threads may call at once. Each run of consecutive
//     elements in the box is one pread.
// ReadPath::automatic takes pread when the dataset allows it.
//
// Errors: HDF5's own error printing is switched off (per thread, as the
// thread-safe build keeps it) and every failure is one eng::Error line naming
// the file, the dataset and what was wrong, with HDF5's innermost message.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/file_stamp.h"

namespace eng::h5 {

using hid = int64_t;  // hid_t, without <hdf5.h> in this header

// The element types we read; anything else (strings, compounds, other
// float formats) is refused at open, naming the type.
enum class ElemType : uint8_t { f32, f64, f16, u8, i8, u16, i16, i32, u32, i64 };
const char* elem_name(ElemType t);
size_t elem_size(ElemType t);

enum class ReadPath : uint8_t { automatic, hdf5, pread };

// An HDF5 identifier and the call that closes it.
class Handle {
 public:
  Handle() = default;
  Handle(hid id, int (*close)(hid)) : id_(id), close_(close) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid get() const { return id_; }
  void reset();

 private:
  hid id_ = -1;
  int (*close_)(hid) = nullptr;
};

class File {
 public:
  explicit File(const std::string& path);  // read-only; the error says why it cannot be opened
  const std::string& path() const { return path_; }
  hid id() const { return h_.get(); }
  bool has(const std::string& name) const;  // a link of that name exists at the root

 private:
  std::string path_;
  Handle h_;
};

class Dataset {
 public:
  Dataset(const File& file, const std::string& name);
  ~Dataset();
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }
  std::string where() const;  // "<file>: dataset '<name>'", the prefix of every error
  ElemType type() const { return type_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int rank() const { return int(shape_.size()); }
  int64_t elements() const;
  // pread is possible: contiguous, uncompressed, allocated, little-endian.
  bool preadable() const { return offset_ >= 0; }
  std::string layout() const;  // "contiguous", "chunked (gzip)", ... for messages and benches

  // The box [start, start + count) converted to float32 into out (prod(count)
  // floats). Checked: one entry per dimension, inside the shape; the file no
  // shorter than at open; every value finite (an error names the first NaN
  // or Inf by its index); the file unchanged since the open (io/file_stamp.h).
  // Thread-safe.
  void read(std::span<const int64_t> start, std::span<const int64_t> count, float* out,
            ReadPath path = ReadPath::automatic) const;
  // Integer datasets only, exact (labels). Same box rules.
  void read_i64(std::span<const int64_t> start, std::span<const int64_t> count, int64_t* out) const;
  // A numeric scalar or one-element attribute of the dataset, if present.
  std::optional<double> attribute(const std::string& attr) const;

 private:
  void check_box(std::span<const int64_t> start, std::span<const int64_t> count) const;
  void read_raw_hdf5(std::span<const int64_t> start, std::span<const int64_t> count, void* out) const;
  void read_raw_pread(std::span<const int64_t> start, std::span<const int64_t> count, void* out) const;
  void check_unchanged() const;  // the file as it was opened: no shorter, not modified (io/file_stamp.h)
  void check_finite(std::span<const int64_t> start, std::span<const int64_t> count, const float* v) const;

  std::string path_, name_;
  Handle d_;
  ElemType type_ = ElemType::f32;
  bool little_endian_ = true;
  std::vector<int64_t> shape_;
  int64_t offset_ = -1;  // byte offset of element 0 in the file, for pread; -1: hdf5 path only
  std::string layout_;
  int fd_ = -1;          // the file, for pread and for its stamp
  io::FileStamp stamp_;  // at open; a read after the file changed is an error, never zeros
};

// Converts n elements of type t (little-endian) to float32 / int64.
void convert_to_f32(ElemType t, const void* src, float* dst, int64_t n);
void convert_to_i64(ElemType t, const void* src, int64_t* dst, int64_t n);

}  // namespace eng::h5
