// NumPy .npy files (see npy.h).
#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include <cerrno>
#include <cstdio>

#include "base/error.h"

namespace eng {

namespace {

// The value of `key` in the header dict, as written: "'<f4'", "False", "(1, 4, 1, 1)".
std::string header_value(const std::string& path, const std::string& header, const std::string& key) {
  std::smatch m;
  const std::regex re("'" + key + "'\\s*:\\s*('[^']*'|True|False|\\([^)]*\\))");
  ENGINE_USER_CHECK(std::regex_search(header, m, re), path, ": the .npy header has no '", key, "': ", header);
  return m[1].str();
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ENGINE_USER_CHECK(in, path, ": cannot open");
  char magic[8] = {};
  in.read(magic, 8);
  ENGINE_USER_CHECK(in && std::memcmp(magic, "\x93NUMPY", 6) == 0, path,
                    ": not a NumPy .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  ENGINE_USER_CHECK(major >= 1 && major <= 3, path, ": .npy version ", major, ".", int(magic[7]),
                    " (1.0 to 3.0 are read)");
  unsigned char len_bytes[4] = {};
  in.read(reinterpret_cast<char*>(len_bytes), major == 1 ? 2 : 4);
  const uint32_t len =
      major == 1 ? uint32_t(len_bytes[0] | len_bytes[1] << 8)
                 : uint32_t(len_bytes[0] | len_bytes[1] << 8 | len_bytes[2] << 16) | uint32_t(len_bytes[3]) << 24;
  std::string header(len, '\0');
  in.read(header.data(), len);
  ENGINE_USER_CHECK(in, path, ": truncated .npy header");

  const std::string descr = header_value(path, header, "descr");
  ENGINE_USER_CHECK(descr == "'<f4'" || descr == "'<f8'", path, ": dtype ", descr,
                    " (float32 or float64, little-endian, is read; np.save(path, a.astype(np.float32)))");
  ENGINE_USER_CHECK(header_value(path, header, "fortran_order") == "False", path,
                    ": Fortran order (save a C-ordered array: np.ascontiguousarray)");
  NpyArray a;
  int64_t n = 1;
  const std::string shape = header_value(path, header, "shape");
  std::stringstream ss(shape.substr(1, shape.size() - 2));
  for (std::string dim; std::getline(ss, dim, ',');) {
    if (dim.find_first_not_of(' ') == std::string::npos) continue;  // "(4,)"
    a.shape.push_back(std::stoll(dim));
    n *= a.shape.back();
  }
  const size_t width = descr == "'<f4'" ? 4 : 8;
  std::string data(size_t(n) * width, '\0');
  in.read(data.data(), std::streamsize(data.size()));
  ENGINE_USER_CHECK(in && size_t(in.gcount()) == data.size(), path, ": ", n, " values of ", width,
                    " bytes announced, the file ends before them");
  a.values.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    if (width == 4) {
      std::memcpy(&a.values[size_t(i)], data.data() + 4 * i, 4);
    } else {
      double d;
      std::memcpy(&d, data.data() + 8 * i, 8);
      a.values[size_t(i)] = float(d);
    }
  }
  return a;
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& values) {
  std::string dims;  // as Python writes a tuple: "(4,)", "(1, 4, 1, 1)"
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + header + '\n', a multiple of 64.
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += char(header.size() & 0xFF), out += char(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  // Whole or not at all: a temporary name, renamed once written.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    ENGINE_USER_CHECK(f, tmp, ": cannot create: ", std::strerror(errno));
    f.write(out.data(), std::streamsize(out.size()));
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      ENGINE_USER_FAIL(tmp, ": write failed: ", std::strerror(errno));
    }
  }
  ENGINE_USER_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, path,
                    ": cannot rename into place: ", std::strerror(errno));
}

}  // namespace eng
