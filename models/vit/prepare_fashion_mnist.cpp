// prepare_fashion_mnist: turns the Fashion-MNIST IDX files (Debian package
// dataset-fashion-mnist) into the two HDF5 files the ViT classifier reads
// through io/image_dataset.h: <out>/train.h5 (60000 images) and
// <out>/test.h5 (10000 images).
//
// Why HDF5 and not the IDX files directly: the loader reads every image
// dataset through one reader (io/hdf5.h) with its pread fast path, and the
// normalisation constants travel with the data instead of living in code.
//
// Conventions of the files written:
//   images  (N, 28, 28) uint8, contiguous (the pread path), raw pixel values
//           0..255, row-major as in the IDX file. Attributes `mean` and `std`:
//           of the TRAIN pixels scaled to [0, 1] (population std), the same
//           values in both files so test images are normalised as training
//           saw them.
//   labels  (N) uint8, attribute `classes` = 10. uint8 rather than int64:
//           it is the IDX file's own byte, so h5py users get exactly the
//           original array; the engine's reader converts any integer type
//           exactly (read_i64) and range-checks against `classes`.
// Input checks: IDX magic 2051 (images) / 2049 (labels), 28 x 28 images, the
// payload exactly as long as the header says, image and label counts equal,
// labels below 10. Any failure is one line naming the file and exits 1; a bad
// command line exits 2. Files appear under their real names only once
// complete (eng::h5::Writer writes "<name>.tmp" and renames on commit).
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/hdf5_write.h"

namespace fs = std::filesystem;
using namespace eng;

namespace {

constexpr uint32_t kImageMagic = 2051, kLabelMagic = 2049;
constexpr int64_t kSide = 28, kClasses = 10;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string src = "/usr/share/datasets/fashion-mnist";
  std::string out = "data/fashion-mnist";
  bool help = false;
};

void print_help() {
  std::printf(
      "usage: prepare_fashion_mnist [--src DIR] [--out DIR]\n"
      "Reads the Fashion-MNIST IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from DIR\n"
      "and writes OUT/train.h5 and OUT/test.h5: `images` (N, 28, 28) uint8 with attributes\n"
      "`mean` and `std` (train pixels scaled to [0, 1]), `labels` (N) uint8 with `classes` = 10.\n"
      "  --src DIR  the IDX files (default /usr/share/datasets/fashion-mnist,\n"
      "             Debian package dataset-fashion-mnist)\n"
      "  --out DIR  output directory (default data/fashion-mnist)\n"
      "  --help     this text\n");
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    if (flag == "--help") {
      o.help = true;
      return o;
    }
    if (flag != "--src" && flag != "--out") throw UsageError("unknown option '" + flag + "' (see --help)");
    if (a + 1 >= argc) throw UsageError(flag + " needs a directory");
    (flag == "--src" ? o.src : o.out) = argv[++a];
  }
  return o;
}

// The whole decompressed file. gzread also passes through an uncompressed
// file unchanged, so an unpacked copy of the data works as well. At the end
// gzerror tells a clean end (Z_OK) from a stream cut short (Z_BUF_ERROR).
std::vector<uint8_t> read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  ENGINE_CHECK(f != nullptr, path, ": cannot open");
  std::vector<uint8_t> bytes, buf(size_t(1) << 20);
  int n = 0;
  while ((n = gzread(f, buf.data(), unsigned(buf.size()))) > 0) bytes.insert(bytes.end(), buf.begin(), buf.begin() + n);
  int err = Z_OK;
  const std::string why = gzerror(f, &err);  // a copy: gzclose frees zlib's message
  gzclose(f);
  ENGINE_CHECK(n == 0 && err == Z_OK, path,
               ": cannot decompress: ", err == Z_BUF_ERROR ? "the gzip stream ends early (truncated file?)" : why);
  return bytes;
}

uint32_t be32(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t(b[at]) << 24 | uint32_t(b[at + 1]) << 16 | uint32_t(b[at + 2]) << 8 | uint32_t(b[at + 3]);
}

// An IDX file after its header: the dimensions and the payload bytes.
struct Idx {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

// Header: magic (0x0000 0x08=uint8, then the number of dimensions) and one
// big-endian uint32 per dimension; the payload must be exactly prod(dims).
Idx read_idx(const std::string& path, uint32_t magic) {
  std::vector<uint8_t> bytes = read_gz(path);
  ENGINE_CHECK(bytes.size() >= 8, path, ": ", bytes.size(), " bytes, too short for an IDX header");
  ENGINE_CHECK(be32(bytes, 0) == magic, path, ": IDX magic ", be32(bytes, 0), ", expected ", magic);
  const size_t rank = magic & 0xff, header = 4 + 4 * rank;
  ENGINE_CHECK(bytes.size() >= header, path, ": truncated IDX header");
  Idx idx;
  size_t expect = 1;
  for (size_t d = 0; d < rank; ++d) {
    idx.dims.push_back(be32(bytes, 4 + 4 * d));
    expect *= size_t(idx.dims.back());
  }
  ENGINE_CHECK(bytes.size() - header == expect, path, ": payload of ", bytes.size() - header, " bytes, header says ",
               expect);
  idx.data.assign(bytes.begin() + std::ptrdiff_t(header), bytes.end());
  return idx;
}

struct Split {
  Idx images, labels;
};

Split read_split(const std::string& src, const std::string& prefix) {
  const std::string ipath = src + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string lpath = src + "/" + prefix + "-labels-idx1-ubyte.gz";
  Split s{read_idx(ipath, kImageMagic), read_idx(lpath, kLabelMagic)};
  ENGINE_CHECK(s.images.dims[1] == kSide && s.images.dims[2] == kSide, ipath, ": images of ", s.images.dims[1], "x",
               s.images.dims[2], ", expected 28x28");
  ENGINE_CHECK(s.images.dims[0] == s.labels.dims[0], lpath, ": ", s.labels.dims[0], " labels for ", s.images.dims[0],
               " images in ", ipath);
  for (size_t i = 0; i < s.labels.data.size(); ++i)
    ENGINE_CHECK(s.labels.data[i] < kClasses, lpath, ": label ", int(s.labels.data[i]), " at ", i, " is not below ",
                 kClasses);
  return s;
}

struct PixelStats {
  double mean, std;
};

// Integer sums are exact (60000 * 784 * 255^2 < 2^42), so the result does not
// depend on summation order and matches numpy's float64 answer to rounding.
PixelStats pixel_stats(const std::vector<uint8_t>& px) {
  uint64_t sum = 0, sumsq = 0;
  for (uint8_t p : px) {
    sum += p;
    sumsq += uint64_t(p) * p;
  }
  const double n = double(px.size());
  const double mean = double(sum) / n / 255.0;
  const double var = double(sumsq) / n / (255.0 * 255.0) - mean * mean;
  return {mean, std::sqrt(var > 0 ? var : 0)};
}

void write_split(const std::string& path, const Split& s, PixelStats st) {
  const int64_t n = s.images.dims[0];
  h5::Writer w(path);
  w.create("images", h5::ElemType::u8, {n, kSide, kSide});
  w.write("images", 0, n, s.images.data.data());
  w.set_attribute("images", "mean", st.mean);
  w.set_attribute("images", "std", st.std);
  w.create("labels", h5::ElemType::u8, {n});
  w.write("labels", 0, n, s.labels.data.data());
  w.set_attribute("labels", "classes", double(kClasses));
  w.commit();
  std::printf("prepare_fashion_mnist: %s: %lld images 28x28 uint8, labels uint8 (%lld classes), mean %.4f std %.4f\n",
              path.c_str(), (long long)n, (long long)kClasses, st.mean, st.std);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  try {
    opt = parse_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "prepare_fashion_mnist: error: %s\n", e.what());
    return 2;
  }
  if (opt.help) {
    print_help();
    return 0;
  }
  try {
    // Both splits are read and checked before anything is written, so a bad
    // test file does not leave a train.h5 from this run next to an old test.h5.
    const Split train = read_split(opt.src, "train");
    const Split test = read_split(opt.src, "t10k");
    const PixelStats st = pixel_stats(train.images.data);
    fs::create_directories(opt.out);
    write_split(opt.out + "/train.h5", train, st);
    write_split(opt.out + "/test.h5", test, st);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prepare_fashion_mnist: error: %s\n", e.what());
    return 1;
  }
}
