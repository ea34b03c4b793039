// What every example shares: a trainable copy of a tensor, the largest
// difference between two, plain SGD, the --break option (a known bug an
// example can introduce on purpose, so a reader and CI watch its
// equivalence check catch it), and main()'s error handling.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "comm/world.h"
#include "engine/ops.h"

namespace eng::example {

// A leaf tensor the optimizer updates: a copy of `from`, with a gradient.
inline Tensor param(const Tensor& from) { return from.detach().clone().set_requires_grad(true); }

// The largest difference between two tensors' values.
inline double max_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::fmax(d, std::fabs(double(x[i]) - double(y[i])));
  return d;
}

// p -= lr * p.grad, then the gradient is dropped for the next step.
inline void sgd(const std::vector<Tensor>& ps, double lr) {
  for (Tensor p : ps) {
    Tensor g = p.grad();
    add_(p, g, -lr);
    p.zero_grad();
  }
}

// The bug named by `--break NAME` ("" without one). bugs[i]: a name and
// what it does, for --help and for the error on a name not among them, and
// the ranks it needs to show: most bugs of a parallel program change
// nothing in a world of one (an all-reduce of one rank is the identity), so
// asking for one there is refused rather than passed.
struct Bug {
  const char* name;
  const char* what;
  int min_ranks = 2;
};
inline std::string parse_break(int argc, char** argv, const char* program, const char* usage,
                               const std::vector<Bug>& bugs) {
  std::string list;
  for (const Bug& b : bugs) list += std::string("\n  --break ") + b.name + ": " + b.what;
  if (argc == 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::printf("%s\nOptions (a bug to introduce on purpose; the check against the serial run must catch it):%s\n",
                usage, list.c_str());
    comm::finalize_world();
    std::exit(0);
  }
  if (argc == 1) return "";
  if (argc == 3 && !std::strcmp(argv[1], "--break"))
    for (const Bug& b : bugs)
      if (argv[2] == std::string(b.name)) {
        if (comm::world().size < b.min_ranks) {
          std::fprintf(stderr, "%s: --break %s changes nothing on %d rank(s): run it with -np %d or more\n", program,
                       b.name, comm::world().size, b.min_ranks);
          comm::abort_world(2);
        }
        return b.name;
      }
  std::fprintf(stderr, "%s: unknown arguments; the options are --help and%s\n", program, list.c_str());
  comm::abort_world(2);
}

// main() of an example: run, and on an error print it and end every rank.
template <typename F>
int run_main(const char* program, F run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    comm::abort_world(1);  // one failing rank ends the whole job
  }
}

}  // namespace eng::example
