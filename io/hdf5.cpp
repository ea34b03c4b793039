// HDF5 files and datasets: open, classify, read boxes by H5Dread or pread.
#include "io/hdf5.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "io/file_stamp.h"
#include "io/hdf5_check.h"

static_assert(std::is_same_v<hid_t, eng::h5::hid>, "hid_t is int64_t since HDF5 1.10");

namespace eng::h5 {

void quiet() {
  thread_local bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    done = true;
  }
}

std::string h5_reason() {
  std::string out;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* e, void* data) -> herr_t {
        if (n == 0 && e->desc) *static_cast<std::string*>(data) = e->desc;
        return 0;
      },
      &out);
  H5Eclear2(H5E_DEFAULT);
  return out.empty() ? "no HDF5 detail" : out;
}

const char* elem_name(ElemType t) {
  static const char* names[] = {"float32", "float64", "float16", "uint8",  "int8",
                                "uint16",  "int16",   "int32",   "uint32", "int64"};
  return names[int(t)];
}

size_t elem_size(ElemType t) {
  static const size_t sizes[] = {4, 8, 2, 1, 1, 2, 2, 4, 4, 8};
  return sizes[int(t)];
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = -1;
  }
  return *this;
}

void Handle::reset() {
  if (id_ >= 0 && close_) close_(id_);
  id_ = -1;
}

File::File(const std::string& path) : path_(path) {
  quiet();
  struct stat st {};
  ENGINE_USER_CHECK(::stat(path.c_str(), &st) == 0, path, ": cannot open HDF5 file: ", std::strerror(errno));
  ENGINE_USER_CHECK(S_ISREG(st.st_mode), path, ": not a regular file");
  const htri_t is = H5Fis_hdf5(path.c_str());
  ENGINE_USER_CHECK(is > 0, path, ": not an HDF5 file (", is < 0 ? h5_reason() : "no HDF5 signature", ")");
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  H5_CHECK(f, path, ": cannot open HDF5 file");
  h_ = Handle(f, H5Fclose);
}

bool File::has(const std::string& name) const {
  quiet();
  const htri_t e = H5Lexists(h_.get(), name.c_str(), H5P_DEFAULT);
  H5_CHECK(e, path_, ": cannot look up '", name, "'");
  return e > 0;
}

namespace {

// Our element type for an HDF5 datatype, or the reason it is refused.
std::optional<ElemType> classify(hid_t t, std::string& why) {
  const H5T_class_t c = H5Tget_class(t);
  const size_t size = H5Tget_size(t);
  if (c == H5T_FLOAT) {
    if (size == 4) return ElemType::f32;
    if (size == 8) return ElemType::f64;
    size_t spos, epos, esize, mpos, msize;
    if (size == 2 && H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) >= 0 && spos == 15 && esize == 5 &&
        msize == 10 && H5Tget_ebias(t) == 15)
      return ElemType::f16;
    why = cat("a ", size * 8, "-bit float format other than IEEE binary16/32/64");
    return std::nullopt;
  }
  if (c == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(t) == H5T_SGN_2;
    switch (size) {
      case 1:
        return is_signed ? ElemType::i8 : ElemType::u8;
      case 2:
        return is_signed ? ElemType::i16 : ElemType::u16;
      case 4:
        if (is_signed) return ElemType::i32;
        return ElemType::u32;
      case 8:
        if (is_signed) return ElemType::i64;
        why = "uint64";
        return std::nullopt;
      default:
        why = cat(size * 8, "-bit integers");
        return std::nullopt;
    }
  }
  static const char* classes[] = {"integer",  "float",     "time", "string",          "bitfield", "opaque",
                                  "compound", "reference", "enum", "variable-length", "array"};
  why = (c >= 0 && c < 11) ? classes[c] : "an unknown class";
  return std::nullopt;
}

// The native memory type HDF5 converts to on the H5Dread path (byte order
// swapped for big-endian files); f16 has no native type before HDF5 1.14, so
// it is read as stored (little-endian only).
hid_t memory_type(ElemType t) {
  switch (t) {
    case ElemType::f32:
      return H5T_NATIVE_FLOAT;
    case ElemType::f64:
      return H5T_NATIVE_DOUBLE;
    case ElemType::f16:
      return -1;  // read as stored (the dataset's own type), converted by us
    case ElemType::u8:
      return H5T_NATIVE_UINT8;
    case ElemType::i8:
      return H5T_NATIVE_INT8;
    case ElemType::u16:
      return H5T_NATIVE_UINT16;
    case ElemType::i16:
      return H5T_NATIVE_INT16;
    case ElemType::i32:
      return H5T_NATIVE_INT32;
    case ElemType::u32:
      return H5T_NATIVE_UINT32;
    case ElemType::i64:
      return H5T_NATIVE_INT64;
  }
  return H5T_NATIVE_FLOAT;
}

}  // namespace

Dataset::Dataset(const File& file, const std::string& name) : path_(file.path()), name_(name) {
  quiet();
  ENGINE_USER_CHECK(file.has(name), where(), ": missing");
  const hid_t d = H5Dopen2(file.id(), name.c_str(), H5P_DEFAULT);
  H5_CHECK(d, where(), ": cannot open (is it a group?)");
  d_ = Handle(d, H5Dclose);

  Handle type(H5Dget_type(d), H5Tclose);
  H5_CHECK(type.get(), where(), ": cannot read its type");
  std::string why;
  const auto t = classify(type.get(), why);
  ENGINE_USER_CHECK(t, where(), ": unsupported element type (", why,
                    "); supported: float32, float64, float16, (u)int8, (u)int16, (u)int32, int64");
  type_ = *t;
  const H5T_order_t order = H5Tget_order(type.get());
  little_endian_ = order != H5T_ORDER_BE;
  ENGINE_USER_CHECK(little_endian_ || type_ != ElemType::f16, where(), ": big-endian float16 is not supported");

  Handle space(H5Dget_space(d), H5Sclose);
  H5_CHECK(space.get(), where(), ": cannot read its shape");
  const int nd = H5Sget_simple_extent_ndims(space.get());
  H5_CHECK(nd, where(), ": not a simple dataspace");
  ENGINE_USER_CHECK(nd >= 1, where(), ": a scalar (rank 0); a dataset of samples has at least one dimension");
  std::vector<hsize_t> dims(static_cast<size_t>(nd));
  H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), where(), ": cannot read its shape");
  shape_.assign(dims.begin(), dims.end());

  Handle dcpl(H5Dget_create_plist(d), H5Pclose);
  H5_CHECK(dcpl.get(), where(), ": cannot read its layout");
  const H5D_layout_t lay = H5Pget_layout(dcpl.get());
  const int filters = H5Pget_nfilters(dcpl.get());
  const int external = H5Pget_external_count(dcpl.get());
  layout_ = lay == H5D_CONTIGUOUS ? "contiguous"
            : lay == H5D_CHUNKED  ? "chunked"
            : lay == H5D_COMPACT  ? "compact"
                                  : "virtual";
  if (filters > 0) layout_ += cat(" with ", filters, filters == 1 ? " filter" : " filters");

  // Our own descriptor: the pread path reads through it, and every read
  // compares the file's stamp (size, modification time) with the one seen
  // here (io/file_stamp.h). HDF5 refuses a file truncated before it opens
  // it, but H5Dread of chunks cut off, or cut and grown back, after that
  // returns zeros and success (HDF5 1.10): training would go on, on garbage.
  const io::FileStamp found = io::stamp_of(path_);

  // The pread path: bytes are one block at a known address. H5Dget_offset is
  // HADDR_UNDEF for anything else (and for a dataset never written).
  if (lay == H5D_CONTIGUOUS && filters == 0 && external == 0 && little_endian_ && elements() > 0) {
    const haddr_t off = H5Dget_offset(d);
    if (off != HADDR_UNDEF) {
      const int64_t bytes = elements() * int64_t(elem_size(type_));
      ENGINE_USER_CHECK(int64_t(off) + bytes <= found.size, where(), ": truncated file (the data ends at byte ",
                        int64_t(off) + bytes, ", the file has ", found.size, ")");
      offset_ = int64_t(off);
    }
  }
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  ENGINE_USER_CHECK(fd >= 0, where(), ": cannot open for reading: ", std::strerror(errno));
  std::string change;
  try {
    stamp_ = io::stamp_of(fd, path_);
    change = io::file_change(found, stamp_);
  } catch (const Error&) {
    ::close(fd);
    throw;
  }
  if (!change.empty()) {
    ::close(fd);
    throw UserError(where() + ": " + change);
  }
  fd_ = fd;  // last: nothing throws after it (the destructor closes it)
}

void Dataset::check_unchanged() const { io::check_file_unchanged(stamp_, fd_, path_, where()); }

Dataset::~Dataset() {
  if (fd_ >= 0) ::close(fd_);
}

std::string Dataset::where() const { return cat(path_, ": dataset '", name_, "'"); }
std::string Dataset::layout() const { return layout_; }

int64_t Dataset::elements() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

std::optional<double> Dataset::attribute(const std::string& attr) const {
  quiet();
  const htri_t e = H5Aexists(d_.get(), attr.c_str());
  H5_CHECK(e, where(), ": cannot look up attribute '", attr, "'");
  if (e == 0) return std::nullopt;
  Handle a(H5Aopen(d_.get(), attr.c_str(), H5P_DEFAULT), H5Aclose);
  H5_CHECK(a.get(), where(), ": cannot open attribute '", attr, "'");
  Handle space(H5Aget_space(a.get()), H5Sclose);
  ENGINE_USER_CHECK(H5Sget_simple_extent_npoints(space.get()) == 1, where(), ": attribute '", attr,
                    "' is not a single number");
  double v = 0;
  H5_CHECK(H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v), where(), ": attribute '", attr, "' is not a number");
  return v;
}

void Dataset::check_box(std::span<const int64_t> start, std::span<const int64_t> count) const {
  ENGINE_CHECK(int(start.size()) == rank() && int(count.size()) == rank(), where(), ": a read needs ", rank(),
               " indices (its rank), got ", start.size());
  for (int d = 0; d < rank(); ++d)
    ENGINE_CHECK(
        start[size_t(d)] >= 0 && count[size_t(d)] >= 0 && start[size_t(d)] + count[size_t(d)] <= shape_[size_t(d)],
        where(), ": read of [", start[size_t(d)], ", ", start[size_t(d)] + count[size_t(d)], ") in dimension ", d,
        " is outside its size ", shape_[size_t(d)]);
}

void Dataset::read_raw_hdf5(std::span<const int64_t> start, std::span<const int64_t> count, void* out) const {
  quiet();
  std::array<hsize_t, H5S_MAX_RANK> s{}, c{};  // no allocation per read (the loader's hot path)
  std::copy(start.begin(), start.end(), s.begin());
  std::copy(count.begin(), count.end(), c.begin());
  Handle file_space(H5Dget_space(d_.get()), H5Sclose);
  H5_CHECK(file_space.get(), where(), ": cannot read its shape");
  H5_CHECK(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, s.data(), nullptr, c.data(), nullptr), where(),
           ": cannot select the box");
  Handle mem_space(H5Screate_simple(rank(), c.data(), nullptr), H5Sclose);
  H5_CHECK(mem_space.get(), where(), ": cannot make the memory space");
  Handle stored;
  hid_t mem_type = memory_type(type_);
  if (mem_type < 0) {
    stored = Handle(H5Dget_type(d_.get()), H5Tclose);
    mem_type = stored.get();
  }
  const herr_t status = H5Dread(d_.get(), mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, out);
  check_unchanged();  // after the read, failed or not: a cut before or during it is named as such
  H5_CHECK(status, where(), ": read failed (truncated or damaged file?)");
}

// Runs of consecutive elements: dimension k is the last one the box does not
// cover fully, so each run is count[k] * (the full sizes after k) elements.
void Dataset::read_raw_pread(std::span<const int64_t> start, std::span<const int64_t> count, void* out) const {
  const int nd = rank();
  const int64_t esz = int64_t(elem_size(type_));
  int k = nd - 1;
  while (k > 0 && start[size_t(k)] == 0 && count[size_t(k)] == shape_[size_t(k)]) --k;
  int64_t run = 1;
  for (int d = k; d < nd; ++d) run *= count[size_t(d)];
  std::array<int64_t, H5S_MAX_RANK> stride{}, idx{};  // idx: position among the outer dimensions
  stride[size_t(nd - 1)] = 1;
  for (int d = nd - 2; d >= 0; --d) stride[size_t(d)] = stride[size_t(d + 1)] * shape_[size_t(d + 1)];
  int64_t runs = 1;
  for (int d = 0; d < k; ++d) runs *= count[size_t(d)];
  auto* dst = static_cast<char*>(out);
  for (int64_t r = 0; r < runs; ++r) {
    int64_t elem = start[size_t(k)] * stride[size_t(k)];
    for (int d = 0; d < k; ++d) elem += (start[size_t(d)] + idx[size_t(d)]) * stride[size_t(d)];
    int64_t left = run * esz, pos = offset_ + elem * esz;
    while (left > 0) {
      const ssize_t got = ::pread(fd_, dst, size_t(left), off_t(pos));
      if (got < 0 && errno == EINTR) continue;
      if (got == 0) check_unchanged();  // the usual cause of an early end, said the same way on both paths
      ENGINE_USER_CHECK(got > 0, where(), ": pread at byte ", pos,
                        " failed: ", got < 0 ? std::strerror(errno) : "end of file");
      dst += got;
      left -= got;
      pos += got;
    }
    for (int d = k - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < count[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
  check_unchanged();  // a file cut and grown back reads as zeros without an error
}

void Dataset::read(std::span<const int64_t> start, std::span<const int64_t> count, float* out, ReadPath path) const {
  check_box(start, count);
  ENGINE_CHECK(path != ReadPath::pread || preadable(), where(),
               ": pread needs a contiguous, uncompressed dataset; it is ", layout_);
  const bool use_pread = path == ReadPath::pread || (path == ReadPath::automatic && preadable());
  int64_t n = 1;
  for (int64_t c : count) n *= c;
  if (n == 0) return;
  // f32 lands in out directly; the rest go through a per-thread scratch
  // buffer that grows to the largest box once (no allocation per batch).
  thread_local std::vector<unsigned char> scratch;
  void* raw = out;
  if (type_ != ElemType::f32) {
    scratch.resize(std::max(scratch.size(), size_t(n) * elem_size(type_)));
    raw = scratch.data();
  }
  if (use_pread)
    read_raw_pread(start, count, raw);
  else
    read_raw_hdf5(start, count, raw);
  if (type_ != ElemType::f32) convert_to_f32(type_, raw, out, n);
  if (type_ == ElemType::f32 || type_ == ElemType::f64 || type_ == ElemType::f16) check_finite(start, count, out);
}

// NaN or Inf in the data would reach the loss as a NaN and read as a
// divergence ("lower lr?"); said here instead, with the element's index.
// The test is on the exponent bits, a pass that vectorises: the same
// memory traffic as the normalisation that follows every read.
void Dataset::check_finite(std::span<const int64_t> start, std::span<const int64_t> count, const float* v) const {
  int64_t n = 1;
  for (int64_t c : count) n *= c;
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, 4);
    any |= uint32_t((bits & 0x7f800000u) == 0x7f800000u);
  }
  if (!any) return;
  int64_t first = 0;
  while (std::isfinite(v[first])) ++first;
  // Its index in the dataset: the box's start plus its place in the box.
  std::vector<int64_t> at(static_cast<size_t>(rank()));
  for (int64_t d = rank() - 1, rest = first; d >= 0; --d) {
    at[size_t(d)] = start[size_t(d)] + rest % count[size_t(d)];
    rest /= count[size_t(d)];
  }
  std::string index;
  for (size_t d = 0; d < at.size(); ++d) index += cat(d ? ", " : "", at[d]);
  ENGINE_USER_FAIL(where(), ": ", std::isnan(v[first]) ? "NaN" : "Inf",
                   type_ == ElemType::f64 && !std::isnan(v[first]) ? " (or a float64 beyond float32's range)" : "",
                   " at index (", index, "), entry ", at[0],
                   " of its first dimension (the sample or time step): clean the data or leave that entry out");
}

void Dataset::read_i64(std::span<const int64_t> start, std::span<const int64_t> count, int64_t* out) const {
  check_box(start, count);
  ENGINE_USER_CHECK(type_ != ElemType::f32 && type_ != ElemType::f64 && type_ != ElemType::f16, where(),
                    ": integers expected, the dataset holds ", elem_name(type_));
  int64_t n = 1;
  for (int64_t c : count) n *= c;
  if (n == 0) return;
  std::vector<unsigned char> raw(size_t(n) * elem_size(type_));
  if (preadable())
    read_raw_pread(start, count, raw.data());
  else
    read_raw_hdf5(start, count, raw.data());
  convert_to_i64(type_, raw.data(), out, n);
}

namespace {
template <typename S, typename D>
void convert_as(const void* src, D* dst, int64_t n) {
  const auto* s = static_cast<const S*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = D(s[i]);
}

template <typename D>
void convert_any(ElemType t, const void* src, D* dst, int64_t n) {
  switch (t) {
    case ElemType::f32:
      return convert_as<float>(src, dst, n);
    case ElemType::f64:
      return convert_as<double>(src, dst, n);
    case ElemType::f16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = D(f16_to_float(s[i]));
      return;
    }
    case ElemType::u8:
      return convert_as<uint8_t>(src, dst, n);
    case ElemType::i8:
      return convert_as<int8_t>(src, dst, n);
    case ElemType::u16:
      return convert_as<uint16_t>(src, dst, n);
    case ElemType::i16:
      return convert_as<int16_t>(src, dst, n);
    case ElemType::i32:
      return convert_as<int32_t>(src, dst, n);
    case ElemType::u32:
      return convert_as<uint32_t>(src, dst, n);
    case ElemType::i64:
      return convert_as<int64_t>(src, dst, n);
  }
}
}  // namespace

void convert_to_f32(ElemType t, const void* src, float* dst, int64_t n) { convert_any(t, src, dst, n); }
void convert_to_i64(ElemType t, const void* src, int64_t* dst, int64_t n) { convert_any(t, src, dst, n); }

}  // namespace eng::h5
