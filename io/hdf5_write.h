// Writing HDF5 files, for the dataset preparation programs (prepare_weather,
// prepare_fashion_mnist) and the loader bench.
// The file is written as "<path>.tmp" and renamed by commit(), so a run that
// fails half way leaves no file under the real name; a Writer destroyed
// without commit() removes its temporary file.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/hdf5.h"

namespace eng::h5 {

// How a dataset's bytes are stored: one contiguous block (what the pread path
// reads), or chunks of one sample (first dimension 1) compressed by gzip.
enum class Layout : uint8_t { contiguous, chunked_gzip };

class Writer {
 public:
  explicit Writer(const std::string& path);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Creates dataset `name` of type t (f32, f16 stored as IEEE binary16, u8,
  // i32 or i64) and shape, to be filled by write().
  void create(const std::string& name, ElemType t, std::vector<int64_t> shape, Layout layout = Layout::contiguous);
  // Writes rows [row0, row0 + rows) of the first dimension from float or
  // integer data (converted to the dataset's type).
  void write(const std::string& name, int64_t row0, int64_t rows, const float* data);
  void write(const std::string& name, int64_t row0, int64_t rows, const int64_t* data);
  void write(const std::string& name, int64_t row0, int64_t rows, const uint8_t* data);
  void set_attribute(const std::string& name, const std::string& attr, double value);
  void set_attribute(const std::string& name, const std::string& attr, const std::string& value);
  // Closes the file and renames it into place.
  void commit();

 private:
  struct Entry {
    std::string name;
    ElemType type;
    std::vector<int64_t> shape;
    Handle d;
  };
  Entry& entry(const std::string& name);
  void write_raw(Entry& e, int64_t row0, int64_t rows, int64_t mem_type, const void* data);
  std::string path_, tmp_;
  Handle f_;
  std::vector<Entry> entries_;
  bool committed_ = false;
};

}  // namespace eng::h5
