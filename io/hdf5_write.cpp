// HDF5 writer: datasets created up front, filled by rows, renamed on commit.
#include "io/hdf5_write.h"

#include <cstdio>

#include "base/dtype.h"
#include "base/error.h"
#include "io/hdf5_check.h"

namespace eng::h5 {

namespace {

// IEEE binary16, little-endian, built as h5py builds it (HDF5 1.10 has no
// predefined half type): float32's layout narrowed to 1-5-10 bits.
Handle f16_type() {
  Handle t(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
  H5_CHECK(H5Tset_fields(t.get(), 15, 10, 5, 0, 10), "float16 type");
  H5_CHECK(H5Tset_size(t.get(), 2), "float16 type");
  H5_CHECK(H5Tset_ebias(t.get(), 15), "float16 type");
  return t;
}

hid_t file_type(ElemType t) {
  switch (t) {
    case ElemType::f32:
      return H5T_IEEE_F32LE;
    case ElemType::u8:
      return H5T_STD_U8LE;
    case ElemType::i32:
      return H5T_STD_I32LE;
    case ElemType::i64:
      return H5T_STD_I64LE;
    default:
      return -1;
  }
}

}  // namespace

Writer::Writer(const std::string& path) : path_(path), tmp_(path + ".tmp") {
  quiet();
  const hid_t f = H5Fcreate(tmp_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5_CHECK(f, tmp_, ": cannot create HDF5 file");
  f_ = Handle(f, H5Fclose);
}

Writer::~Writer() {
  entries_.clear();
  f_.reset();
  if (!committed_) std::remove(tmp_.c_str());
}

void Writer::create(const std::string& name, ElemType t, std::vector<int64_t> shape, Layout layout) {
  ENGINE_CHECK(
      t == ElemType::f32 || t == ElemType::f16 || t == ElemType::u8 || t == ElemType::i32 || t == ElemType::i64, path_,
      ": dataset '", name, "': cannot write ", elem_name(t));
  ENGINE_CHECK(!shape.empty(), path_, ": dataset '", name, "': needs at least one dimension");
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  H5_CHECK(space.get(), path_, ": dataset '", name, "': bad shape");
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (layout == Layout::chunked_gzip) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = 1;
    H5_CHECK(H5Pset_chunk(dcpl.get(), int(chunk.size()), chunk.data()), path_, ": dataset '", name, "': chunks");
    H5_CHECK(H5Pset_deflate(dcpl.get(), 4), path_, ": dataset '", name, "': gzip");
  }
  Handle half = t == ElemType::f16 ? f16_type() : Handle();
  const hid_t ft = t == ElemType::f16 ? half.get() : file_type(t);
  const hid_t d = H5Dcreate2(f_.get(), name.c_str(), ft, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT);
  H5_CHECK(d, path_, ": cannot create dataset '", name, "'");
  entries_.push_back(Entry{name, t, std::move(shape), Handle(d, H5Dclose)});
}

Writer::Entry& Writer::entry(const std::string& name) {
  for (Entry& e : entries_)
    if (e.name == name) return e;
  ENGINE_FAIL(path_, ": dataset '", name, "' was not created");
}

void Writer::write_raw(Entry& e, int64_t row0, int64_t rows, int64_t mem_type, const void* data) {
  ENGINE_CHECK(row0 >= 0 && rows >= 0 && row0 + rows <= e.shape[0], path_, ": dataset '", e.name, "': rows [", row0,
               ", ", row0 + rows, ") outside its ", e.shape[0]);
  if (rows == 0) return;
  std::vector<hsize_t> start(e.shape.size(), 0), count(e.shape.begin(), e.shape.end());
  start[0] = hsize_t(row0);
  count[0] = hsize_t(rows);
  Handle fs(H5Dget_space(e.d.get()), H5Sclose);
  H5_CHECK(H5Sselect_hyperslab(fs.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), path_,
           ": dataset '", e.name, "': select");
  Handle ms(H5Screate_simple(int(count.size()), count.data(), nullptr), H5Sclose);
  H5_CHECK(H5Dwrite(e.d.get(), mem_type, ms.get(), fs.get(), H5P_DEFAULT, data), path_, ": dataset '", e.name,
           "': write failed");
}

void Writer::write(const std::string& name, int64_t row0, int64_t rows, const float* data) {
  Entry& e = entry(name);
  if (e.type == ElemType::f32) return write_raw(e, row0, rows, H5T_NATIVE_FLOAT, data);
  ENGINE_CHECK(e.type == ElemType::f16, path_, ": dataset '", name, "' holds ", elem_name(e.type), ", not floats");
  int64_t n = rows;
  for (size_t d = 1; d < e.shape.size(); ++d) n *= e.shape[d];
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) bits[size_t(i)] = float_to_f16(data[i]);
  Handle half = f16_type();
  write_raw(e, row0, rows, half.get(), bits.data());
}

void Writer::write(const std::string& name, int64_t row0, int64_t rows, const int64_t* data) {
  Entry& e = entry(name);
  ENGINE_CHECK(e.type == ElemType::i32 || e.type == ElemType::i64 || e.type == ElemType::u8, path_, ": dataset '", name,
               "' holds ", elem_name(e.type), ", not integers");
  write_raw(e, row0, rows, H5T_NATIVE_INT64, data);
}

void Writer::write(const std::string& name, int64_t row0, int64_t rows, const uint8_t* data) {
  Entry& e = entry(name);
  ENGINE_CHECK(e.type == ElemType::u8, path_, ": dataset '", name, "' holds ", elem_name(e.type), ", not uint8");
  write_raw(e, row0, rows, H5T_NATIVE_UINT8, data);
}

void Writer::set_attribute(const std::string& name, const std::string& attr, double value) {
  Entry& e = entry(name);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(e.d.get(), attr.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  H5_CHECK(a.get(), path_, ": dataset '", name, "': attribute '", attr, "'");
  H5_CHECK(H5Awrite(a.get(), H5T_NATIVE_DOUBLE, &value), path_, ": attribute '", attr, "'");
}

void Writer::set_attribute(const std::string& name, const std::string& attr, const std::string& value) {
  Entry& e = entry(name);
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5_CHECK(H5Tset_size(type.get(), value.size() + 1), path_, ": attribute '", attr, "'");
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(e.d.get(), attr.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  H5_CHECK(a.get(), path_, ": dataset '", name, "': attribute '", attr, "'");
  H5_CHECK(H5Awrite(a.get(), type.get(), value.c_str()), path_, ": attribute '", attr, "'");
}

void Writer::commit() {
  entries_.clear();
  if (f_.get() >= 0) H5_CHECK(H5Fflush(f_.get(), H5F_SCOPE_GLOBAL), tmp_, ": flush failed");
  f_.reset();
  ENGINE_CHECK(std::rename(tmp_.c_str(), path_.c_str()) == 0, tmp_, ": cannot rename to ", path_);
  committed_ = true;
}

}  // namespace eng::h5
