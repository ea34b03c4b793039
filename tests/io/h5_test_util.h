// Test files written with the HDF5 C API directly (not io/hdf5_write), so the
// reader is checked against an independent writer. Every helper checks its
// calls with REQUIRE; handles are closed before returning.
#pragma once
#include <hdf5.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

namespace eng::test {

inline std::string h5_temp(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "engine_test_hdf5";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

enum class H5Store : uint8_t { contiguous, chunked, gzip };

// Writes `data` (in memory type mem_type) as dataset `name` of file type
// file_type into file `path` (created when create, else opened read-write).
inline void h5_write(const std::string& path, const std::string& name, hid_t file_type, hid_t mem_type,
                     const std::vector<hsize_t>& dims, const void* data, H5Store store = H5Store::contiguous,
                     bool create = true) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = create ? H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)
                         : H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  const hid_t space = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (store != H5Store::contiguous) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = 1;
    REQUIRE(H5Pset_chunk(dcpl, int(chunk.size()), chunk.data()) >= 0);
    if (store == H5Store::gzip) REQUIRE(H5Pset_deflate(dcpl, 6) >= 0);
  }
  const hid_t d = H5Dcreate2(f, name.c_str(), file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  REQUIRE(d >= 0);
  if (data) REQUIRE(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
}

// A numeric scalar attribute on an existing dataset.
inline void h5_attr(const std::string& path, const std::string& dset, const std::string& attr, double v) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  const hid_t d = H5Dopen2(f, dset.c_str(), H5P_DEFAULT);
  const hid_t s = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(d, attr.c_str(), H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(H5Awrite(a, H5T_NATIVE_DOUBLE, &v) >= 0);
  H5Aclose(a);
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);
}

}  // namespace eng::test
