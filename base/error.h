// One error idiom for the whole engine.
// Library code throws eng::Error carrying "file:line: message"; only main()
// turns it into an exit code. A fault in what the user gave (an option, its
// value, a combination of them) is a UserError: its message says what to
// change and carries no source location, which is for the engine's own
// faults (ENGINE_USER_CHECK, ENGINE_USER_FAIL). ENGINE_CHECK(cond, parts...) builds the message
// from any streamable parts, so callers can name the op, shapes and dtypes.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace eng {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct UserError : Error {
  using Error::Error;
};

// Concatenates streamable values: cat("matmul: ", 3, "x", 4) -> "matmul: 3x4".
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

[[noreturn]] void throw_error(const char* file, int line, const std::string& msg);

}  // namespace eng

#define ENGINE_CHECK(cond, ...)                                                   \
  do {                                                                            \
    if (!(cond)) ::eng::throw_error(__FILE__, __LINE__, ::eng::cat(__VA_ARGS__)); \
  } while (0)

#define ENGINE_FAIL(...) ::eng::throw_error(__FILE__, __LINE__, ::eng::cat(__VA_ARGS__))

#define ENGINE_USER_CHECK(cond, ...)                              \
  do {                                                            \
    if (!(cond)) throw ::eng::UserError(::eng::cat(__VA_ARGS__)); \
  } while (0)

#define ENGINE_USER_FAIL(...) throw ::eng::UserError(::eng::cat(__VA_ARGS__))
