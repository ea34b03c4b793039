// The command lines of the small text programs (tokenize, prepare_text,
// generate): arguments read in order, a flag's value and a number in range,
// each fault a UserError naming the flag. (train reads its options through
// TrainConfig, which also takes config files.)
#pragma once
#include <cstdlib>
#include <string>

#include "base/error.h"

namespace eng {

class CliArgs {
 public:
  CliArgs(int argc, char** argv) : argc_(argc), argv_(argv) {}
  // Moves to the next argument; false when there is none.
  bool next() {
    if (++i_ >= argc_) return false;
    arg_ = argv_[i_];
    return true;
  }
  const std::string& arg() const { return arg_; }
  bool is_option() const { return arg_.size() > 2 && arg_.rfind("--", 0) == 0; }
  // The argument after the current flag.
  std::string value() {
    if (i_ + 1 >= argc_) throw UserError(cat(arg_, " needs a value (see --help)"));
    return argv_[++i_];
  }
  // The flag's value as a number in [lo, hi] (nan refused).
  double number(double lo, double hi) {
    const std::string flag = arg_, v = value();
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || !(d >= lo && d <= hi))
      throw UserError(cat(flag, " must be in [", lo, ", ", hi, "], got '", v, "'"));
    return d;
  }

 private:
  int argc_;
  char** argv_;
  int i_ = 0;
  std::string arg_;
};

}  // namespace eng
