// Checkpoint directories (see checkpoint.h).
#include "models/checkpoint.h"

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "io/safetensors.h"

namespace eng::models {

namespace fs = std::filesystem;

void save_checkpoint_dir(const std::string& dir, const WeightsIO& save_weights, const nlohmann::json& model_config,
                         const std::vector<std::pair<std::string, Tensor>>& opt_state, int64_t step,
                         const nlohmann::json& config, const nlohmann::json& extra) {
  const fs::path final_dir(dir), tmp_dir(dir + ".tmp"), old_dir(dir + ".old");
  fs::remove_all(tmp_dir);
  fs::create_directories(tmp_dir);
  save_weights((tmp_dir / "model.safetensors").string());
  std::vector<std::pair<std::string, Tensor>> st;
  for (auto& [n, t] : opt_state) st.emplace_back(n, t.device() == kCPU ? t : t.detach().to(kCPU));
  save_safetensors((tmp_dir / "optimizer.safetensors").string(), st);
  auto write_json = [&](const char* name, const nlohmann::json& j) {
    std::ofstream out(tmp_dir / name);
    out << j.dump(2) << "\n";
    ENGINE_CHECK(out, (tmp_dir / name).string(), ": write failed");
  };
  write_json("config.json", model_config);
  nlohmann::json state{{"step", step}, {"config", config}};
  state.update(extra);
  write_json("state.json", state);
  // Swap directories: the old checkpoint disappears only after the new one is complete.
  fs::remove_all(old_dir);
  if (fs::exists(final_dir)) fs::rename(final_dir, old_dir);
  fs::rename(tmp_dir, final_dir);
  fs::remove_all(old_dir);
}

nlohmann::json load_checkpoint_dir(const std::string& dir, const WeightsIO& load_weights, Optimizer& opt) {
  const fs::path d(dir);
  ENGINE_CHECK(fs::exists(d / "state.json"), dir, ": no checkpoint here (state.json missing)");
  nlohmann::json state;
  try {
    std::ifstream in(d / "state.json");
    state = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    ENGINE_FAIL((d / "state.json").string(), ": bad JSON: ", e.what());
  }
  ENGINE_CHECK(state.contains("step") && state["step"].is_number_integer(), (d / "state.json").string(),
               ": missing integer 'step'");
  load_weights((d / "model.safetensors").string());
  const SafetensorsFile os = load_safetensors((d / "optimizer.safetensors").string());
  try {
    opt.load_state(os.tensors);
  } catch (const Error& e) {
    ENGINE_FAIL((d / "optimizer.safetensors").string(), ": ", e.what());
  }
  return state;
}

}  // namespace eng::models
