#include "models/train/kept_checkpoints.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "base/error.h"
#include "io/durable_file.h"

namespace fs = std::filesystem;

namespace eng::models {
namespace {

// The step of a kept directory's name ("step_000200" -> 200), -1 for anything else.
int64_t kept_step(const std::string& name) {
  if (name.size() < 11 || name.rfind("step_", 0) != 0) return -1;
  const std::string digits = name.substr(5);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

}  // namespace

void keep_checkpoint(const std::string& ckpt_dir, int64_t step, int64_t keep) {
  const fs::path base = fs::path(ckpt_dir).parent_path() / "checkpoints";
  char name[32];
  std::snprintf(name, sizeof name, "step_%06lld", static_cast<long long>(step));
  const fs::path tmp = base / (std::string(name) + ".tmp"), final_dir = base / name;
  fs::create_directories(base);
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  for (const auto& e : fs::directory_iterator(ckpt_dir)) {
    if (!e.is_regular_file()) continue;
    std::error_code ec;
    fs::create_hard_link(e.path(), tmp / e.path().filename(), ec);
    if (ec) fs::copy_file(e.path(), tmp / e.path().filename());  // no hard links here: a copy
  }
  sync_dir(tmp.string());
  fs::remove_all(final_dir);  // this step saved again after a rollback
  rename_durably(tmp.string(), final_dir.string());
  std::vector<int64_t> steps;
  for (const auto& e : fs::directory_iterator(base))
    if (const int64_t s = kept_step(e.path().filename().string()); s >= 0 && s <= step && e.is_directory())
      steps.push_back(s);
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + size_t(keep) < steps.size(); ++i) {
    std::snprintf(name, sizeof name, "step_%06lld", static_cast<long long>(steps[i]));
    fs::remove_all(base / name);
  }
}

}  // namespace eng::models
