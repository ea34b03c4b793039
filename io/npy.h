// NumPy's .npy files (numpy.lib.format, versions 1.0 to 3.0): the format
// np.save writes and np.load reads. A file is the magic "\x93NUMPY", a
// version (major, minor), the header's length (2 bytes in 1.0, 4 in 2.0 and
// 3.0, little-endian), the header (a Python dict literal: 'descr', the dtype
// such as '<f4'; 'fortran_order'; 'shape', a tuple), padded so the data
// starts on a multiple of 64 bytes, then the values in C order.
// Read here: little-endian float32 and float64 arrays (as float), C order;
// anything else is an error naming the file and what it holds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace eng {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> values;  // shape's product of them, C order
};

NpyArray read_npy(const std::string& path);
// Writes float32 values of `shape` byte for byte as np.save does (version
// 1.0), under a temporary name renamed into place.
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& values);

}  // namespace eng
