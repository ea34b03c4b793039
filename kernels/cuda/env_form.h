// The form of a kernel a launcher takes, chosen by an environment variable
// for A/B runs on a GPU and for tests (ENGINE_CROSS_ENTROPY in
// cross_entropy.h, ENGINE_LAYERNORM_BACKWARD in layernorm.h): one parse, so
// every such variable accepts and refuses the same way.
#pragma once
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "base/error.h"

namespace eng::gpu {
// The index in `names` of var's value: 0 (names' first, the launcher's own
// choice) when var is unset or empty. Any other value is a one-line error
// naming var, its value, what it picks (`what`), the values it takes and
// the page that says more (`doc`).
inline int env_form(const char* var, std::initializer_list<const char*> names, const char* what, const char* doc) {
  const char* env = std::getenv(var);
  const std::string s = env ? env : "";
  if (s.empty()) return 0;
  int i = 0;
  std::string use;
  for (const char* n : names) {
    if (s == n) return i;
    use += std::string(i == 0 ? "" : i + 1 == int(names.size()) ? " or " : ", ") + n;
    ++i;
  }
  ENGINE_USER_FAIL(var, " '", s, "' is not a form of ", what, ": use ", use, " (", doc, ")");
}
}  // namespace eng::gpu
