// HDF5 writer: datasets created up front, filled by rows, renamed on commit.
#include "io/hdf5_write.h"

#include <cstdio>

#include "base/error.h"
#include "io/hdf5_check.h"

namespace eng::h5 {

namespace {

hid_t file_type(ElemType t) { return t == ElemType::u8 ? H5T_STD_U8LE : H5T_IEEE_F32LE; }

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

void Writer::create(const std::string& name, ElemType t, std::vector<int64_t> shape) {
  ENGINE_CHECK(t == ElemType::f32 || t == ElemType::u8, path_, ": dataset '", name, "': cannot write ", elem_name(t),
               " (float32 or uint8)");
  ENGINE_CHECK(!shape.empty(), path_, ": dataset '", name, "': needs at least one dimension");
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  H5_CHECK(space.get(), path_, ": dataset '", name, "': bad shape");
  const hid_t d = H5Dcreate2(f_.get(), name.c_str(), file_type(t), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
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
  ENGINE_CHECK(e.type == ElemType::f32, path_, ": dataset '", name, "' holds ", elem_name(e.type), ", not float32");
  write_raw(e, row0, rows, H5T_NATIVE_FLOAT, data);
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
