// safetensors files (Hugging Face's format): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__":
// {...}}, then the raw little-endian tensor bytes. Used for checkpoints
// (PyTorch loads them directly) and for the PyTorch test fixtures.
// Writes go to "<path>.tmp" and are renamed, so a crash never leaves a
// half-written file under the real name.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace eng {

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order, on the cpu
  std::map<std::string, std::string> metadata;
  const Tensor& get(const std::string& name) const;  // error names the file and the tensor
  bool has(const std::string& name) const;
  std::string path;
};

SafetensorsFile load_safetensors(const std::string& path);
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace eng
