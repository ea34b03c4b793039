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

class Writer {
 public:
  explicit Writer(const std::string& path);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Creates dataset `name` of type t (f32 or u8: what the preparation
  // programs write) and shape, to be filled by write(). Stored contiguous
  // and uncompressed, the layout io/hdf5's pread path reads.
  void create(const std::string& name, ElemType t, std::vector<int64_t> shape);
  // Writes rows [row0, row0 + rows) of the first dimension, of a dataset of
  // the matching type.
  void write(const std::string& name, int64_t row0, int64_t rows, const float* data);
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
