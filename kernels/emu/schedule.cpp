// ENGINE_EMU_SCHEDULE: the orders of blocks and threads (schedule.h).
#include "kernels/emu/schedule.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "kernels/emu/runtime.h"

namespace emu::detail {
namespace {

uint64_t g_launches = 0;  // launches so far in this process: each random launch gets its own permutations

// Parses the variable: forward (unset or empty too), reverse, random:SEED.
bool parse(const char* env, bool& random, bool& reverse, uint64_t& seed) {
  random = reverse = false;
  seed = 0;
  if (!env || !*env || std::strcmp(env, "forward") == 0) return true;
  if (std::strcmp(env, "reverse") == 0) return reverse = true;
  if (std::strncmp(env, "random:", 7) != 0 || env[7] < '0' || env[7] > '9') return false;
  char* end = nullptr;
  errno = 0;
  seed = std::strtoull(env + 7, &end, 10);
  return random = (*end == '\0' && errno == 0);
}

}  // namespace

Schedule::Schedule(uint64_t blocks, int threads) : blocks_(blocks), thread_order_(size_t(threads)) {
  const char* env = std::getenv("ENGINE_EMU_SCHEDULE");
  bool random = false, reverse = false;
  uint64_t seed = 0;
  if (!parse(env, random, reverse, seed))
    fail(
        __FILE__, __LINE__,
        eng::cat("ENGINE_EMU_SCHEDULE='", env, "': expected forward, reverse or random:SEED (SEED a decimal integer)"));
  kind_ = random ? Kind::random : reverse ? Kind::reverse : Kind::forward;
  std::iota(thread_order_.begin(), thread_order_.end(), 0);
  if (kind_ == Kind::reverse) std::reverse(thread_order_.begin(), thread_order_.end());
  if (kind_ != Kind::random) return;
  state_ = seed * 0x9E3779B97F4A7C15ull + ++g_launches;
  block_order_.resize(blocks);
  std::iota(block_order_.begin(), block_order_.end(), uint64_t(0));
  for (uint64_t i = blocks; i > 1; --i) std::swap(block_order_[i - 1], block_order_[next() % i]);
}

uint64_t Schedule::block(uint64_t k) const {
  switch (kind_) {
    case Kind::forward:
      return k;
    case Kind::reverse:
      return blocks_ - 1 - k;
    case Kind::random:
      return block_order_[k];
  }
  return k;
}

const std::vector<int>& Schedule::threads() {
  if (kind_ == Kind::random)
    for (size_t i = thread_order_.size(); i > 1; --i) std::swap(thread_order_[i - 1], thread_order_[next() % i]);
  return thread_order_;
}

uint64_t Schedule::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace emu::detail
