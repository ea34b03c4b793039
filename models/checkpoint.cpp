// Checkpoint directories (see checkpoint.h).
#include "models/checkpoint.h"

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "io/durable_file.h"
#include "io/safetensors.h"

namespace eng::models {

namespace fs = std::filesystem;

bool recover_checkpoint_dir(const std::string& dir) {
  const fs::path final_dir(dir), old_dir(dir + ".old");
  if (fs::exists(final_dir) || !fs::exists(old_dir / "state.json")) return false;
  fs::rename(old_dir, final_dir);
  return true;
}

void save_checkpoint_dir(const std::string& dir, const WeightsIO& save_weights, const nlohmann::json& model_config,
                         const std::vector<std::pair<std::string, Tensor>>& opt_state, int64_t step,
                         const nlohmann::json& config, const nlohmann::json& extra, const ExtraFiles& files) {
  const fs::path final_dir(dir), tmp_dir(dir + ".tmp"), old_dir(dir + ".old");
  recover_checkpoint_dir(dir);
  fs::remove_all(tmp_dir);
  try {
    fs::create_directories(tmp_dir);
    save_weights((tmp_dir / "model.safetensors").string());
    std::vector<std::pair<std::string, Tensor>> st;
    for (auto& [n, t] : opt_state) st.emplace_back(n, t.device() == kCPU ? t : t.detach().to(kCPU));
    save_safetensors((tmp_dir / "optimizer.safetensors").string(), st);
    write_file_durably((tmp_dir / "config.json").string(), model_config.dump(2) + "\n");
    nlohmann::json state{{"step", step}, {"config", config}};
    state.update(extra);
    write_file_durably((tmp_dir / "state.json").string(), state.dump(2) + "\n");
    for (const auto& [name, content] : files) write_file_durably((tmp_dir / name).string(), content);
    sync_dir(tmp_dir.string());  // the files' names too, before the old checkpoint goes
  } catch (const std::exception& e) {
    // A full disk or a dead file system: the partial copy goes (it holds
    // space), the previous checkpoint stays as it was.
    std::error_code ec;
    fs::remove_all(tmp_dir, ec);
    ENGINE_USER_FAIL("checkpoint at step ", step, " not saved: ", e.what(),
                     fs::exists(final_dir / "state.json") ? cat("; ", dir, " keeps the previous one") : std::string());
  }
  // Swap directories: the old checkpoint disappears only after the new one is complete.
  fs::remove_all(old_dir);
  if (fs::exists(final_dir)) fs::rename(final_dir, old_dir);
  rename_durably(tmp_dir.string(), final_dir.string());
  fs::remove_all(old_dir);
}

nlohmann::json read_checkpoint_state(const std::string& dir) {
  const fs::path d(dir);
  ENGINE_USER_CHECK(fs::exists(d / "state.json"), dir, ": no checkpoint here (state.json missing)");
  nlohmann::json state;
  try {
    std::ifstream in(d / "state.json");
    state = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    ENGINE_USER_FAIL((d / "state.json").string(), ": bad JSON: ", e.what());
  }
  ENGINE_USER_CHECK(state.contains("step") && state["step"].is_number_integer(), (d / "state.json").string(),
                    ": missing integer 'step'");
  ENGINE_USER_CHECK(state["step"].get<int64_t>() >= 0, (d / "state.json").string(), ": step ", state["step"].dump(),
                    " is negative (a damaged or edited file)");
  return state;
}

nlohmann::json load_checkpoint_dir(const std::string& dir, const WeightsIO& load_weights, Optimizer& opt) {
  const fs::path d(dir);
  const nlohmann::json state = read_checkpoint_state(dir);
  const std::string saved = state.contains("config") && state["config"].is_object()
                                ? state["config"].value("optimizer", std::string("adamw"))
                                : std::string("adamw");
  ENGINE_USER_CHECK(saved == opt.name(), dir, ": the checkpoint was trained with optimizer ", saved,
                    ", this run asks for ", opt.name(), " (resume with --optimizer ", saved,
                    ", or start afresh with --overwrite)");
  load_weights((d / "model.safetensors").string());
  const SafetensorsFile os = load_safetensors((d / "optimizer.safetensors").string());
  try {
    opt.load_state(os.tensors);
  } catch (const Error& e) {
    ENGINE_USER_FAIL((d / "optimizer.safetensors").string(), ": ", e.what());
  }
  return state;
}

}  // namespace eng::models
