// metrics.jsonl keys -> TensorBoard tags (see tb_tags.h).
#include "models/train/tb_tags.h"

namespace eng::models {

namespace {

bool starts(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

std::string tag_of(const std::string& key) {
  if (starts(key, "val_")) return "val/" + key.substr(4);
  if (key == "tokens_per_s" || key == "images_per_s" || key == "flops_per_s" || key == "mfu") return "perf/" + key;
  if (starts(key, "memory_")) return "memory/" + key.substr(7);
  if (starts(key, "mem_")) return "memory/" + key.substr(4);
  if (starts(key, "data_")) return "data/" + key.substr(5);
  return "train/" + key;
}

void add(std::vector<std::pair<std::string, float>>& out, const std::string& tag, const nlohmann::json& v,
         const nlohmann::json& channels) {
  if (v.is_number()) {
    out.emplace_back(tag, v.get<float>());
  } else if (v.is_object()) {
    for (const auto& [k, sub] : v.items()) add(out, tag + "/" + k, sub, nlohmann::json());
  } else if (v.is_array()) {
    // Per-channel lists are named by the channel they measure.
    const bool named = channels.is_array() && channels.size() == v.size();
    for (size_t i = 0; i < v.size(); ++i)
      add(out, named ? tag + "/channel_" + channels[i].dump() : tag + "/" + std::to_string(i), v[i], nlohmann::json());
  }
}

}  // namespace

std::vector<std::pair<std::string, float>> tb_scalars(const nlohmann::json& line) {
  std::vector<std::pair<std::string, float>> out;
  const nlohmann::json channels = line.value("channels", nlohmann::json());
  for (const auto& [key, v] : line.items())
    if (key != "step" && key != "channels") add(out, tag_of(key), v, channels);
  return out;
}

}  // namespace eng::models
