// safetensors reader and writer. Every structural problem (short file, bad
// JSON, unknown dtype, offsets outside the data, size not matching the shape)
// is an error naming the file and, where known, the tensor.
#include "io/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/durable_file.h"

namespace eng {

static const char* st_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    case DType::i32:
      return "I32";
    case DType::u16:
      return "U16";
    case DType::u8:
      return "U8";
  }
  return "?";
}

static DType from_st_dtype(const std::string& s, const std::string& path, const std::string& name) {
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::u16, DType::u8})
    if (s == st_dtype(t)) return t;
  ENGINE_USER_FAIL(path, ": tensor '", name, "' has unsupported dtype '", s, "'");
}

const Tensor& SafetensorsFile::get(const std::string& name) const {
  for (auto& [n, t] : tensors)
    if (n == name) return t;
  ENGINE_USER_FAIL(path, ": no tensor named '", name, "'");
}

bool SafetensorsFile::has(const std::string& name) const {
  for (auto& [n, t] : tensors)
    if (n == name) return true;
  return false;
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::error_code ec;
  ENGINE_USER_CHECK(!std::filesystem::is_directory(path, ec), path,
                    ": a directory; a .safetensors file is expected (a checkpoint's model.safetensors)");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  ENGINE_USER_CHECK(in, path, ": cannot open");
  const uint64_t file_size = uint64_t(in.tellg());
  in.seekg(0);
  ENGINE_USER_CHECK(file_size >= 8, path, ": truncated (", file_size, " bytes, no header length)");
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > file_size - 8) {
    // A header cut short still starts with '{'; anything else is another kind of file.
    char first = 0;
    in.read(&first, 1);
    ENGINE_USER_CHECK(!in || first == '{', path,
                      ": not a safetensors file (it starts with neither a header length nor a JSON header; a text "
                      "file, or another format?)");
    ENGINE_USER_FAIL(path, ": truncated (header of ", header_len, " bytes, file of ", file_size, ")");
  }
  std::string header(header_len, '\0');
  in.read(header.data(), std::streamsize(header_len));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const std::exception& e) {
    ENGINE_USER_FAIL(path, ": bad JSON header: ", e.what());
  }
  ENGINE_USER_CHECK(j.is_object(), path, ": header is not a JSON object");
  const uint64_t data_start = 8 + header_len, data_size = file_size - data_start;
  SafetensorsFile f;
  f.path = path;
  std::vector<uint64_t> offsets;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      for (auto m = it->begin(); m != it->end(); ++m)
        f.metadata[m.key()] = m->is_string() ? m->get<std::string>() : m->dump();
      continue;
    }
    const auto& e = *it;
    ENGINE_USER_CHECK(e.is_object() && e.contains("dtype") && e.contains("shape") && e.contains("data_offsets"), path,
                      ": tensor '", name, "' lacks dtype, shape or data_offsets");
    const DType dt = from_st_dtype(e["dtype"].get<std::string>(), path, name);
    Shape shape = e["shape"].get<Shape>();
    const auto off = e["data_offsets"].get<std::vector<uint64_t>>();
    ENGINE_USER_CHECK(off.size() == 2 && off[0] <= off[1] && off[1] <= data_size, path, ": tensor '", name,
                      "' data_offsets outside the ", data_size, " data bytes (file truncated?)");
    for (int64_t d : shape) ENGINE_USER_CHECK(d >= 0, path, ": tensor '", name, "' has a negative dimension");
    const uint64_t want = uint64_t(shape_numel(shape)) * dtype_size(dt);
    ENGINE_USER_CHECK(off[1] - off[0] == want, path, ": tensor '", name, "' holds ", off[1] - off[0], " bytes but ",
                      dtype_name(dt), shape_str(shape), " needs ", want);
    Tensor t = Tensor::empty(shape, dt, kCPU);
    in.seekg(std::streamoff(data_start + off[0]));
    in.read(static_cast<char*>(t.data_ptr()), std::streamsize(want));
    ENGINE_USER_CHECK(in, path, ": read of tensor '", name, "' failed");
    f.tensors.emplace_back(name, t);
    offsets.push_back(off[0]);
  }
  // nlohmann::json sorts keys; put the tensors back in file (offset) order.
  std::vector<size_t> idx(f.tensors.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
  std::vector<std::pair<std::string, Tensor>> sorted;
  for (size_t i : idx) sorted.push_back(f.tensors[i]);
  f.tensors = std::move(sorted);
  return f;
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json j;
  if (!metadata.empty()) j["__metadata__"] = metadata;
  uint64_t off = 0;
  for (auto& [name, t] : tensors) {
    ENGINE_USER_CHECK(name != "__metadata__", path, ": '__metadata__' is reserved");
    j[name] = {{"dtype", st_dtype(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {off, off + t.nbytes()}}};
    off += t.nbytes();
  }
  std::string header = j.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // keep the data 8-byte aligned
  const std::string tmp = path + ".tmp";
  DurableFile out(tmp);  // removed on any failure: never a partial file
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = (uint64_t(header.size()) >> (8 * i)) & 0xff;
  out.write(len_bytes, 8);
  out.write(header);
  for (auto& [name, t] : tensors) {
    Tensor h = t.device() == kCPU ? t : t.detach().to(kCPU);
    out.write(h.data_ptr(), h.nbytes());
  }
  out.finish();
  rename_durably(tmp, path);
}

}  // namespace eng
