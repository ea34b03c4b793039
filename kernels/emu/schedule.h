// The order in which the emulator runs the blocks of a grid and the runnable
// threads of a block between two synchronisation points, chosen by
// ENGINE_EMU_SCHEDULE (docs/emulator.md, "Schedules"):
//   forward        blocks x fastest, then y, then z; threads in index order
//                  (the default);
//   reverse        both the other way round;
//   random:SEED    a fresh permutation of the blocks per launch and of the
//                  runnable threads per scheduling round, from SEED and the
//                  launch's number in the process (so a run is reproducible).
// A GPU promises no order at all, so a kernel whose result differs between
// these is wrong there.
#pragma once

#include <cstdint>
#include <vector>

namespace emu::detail {

class Schedule {
 public:
  // The schedule of the next launch of `blocks` blocks of `threads` threads,
  // as ENGINE_EMU_SCHEDULE says now (read at every launch; a bad value throws).
  Schedule(uint64_t blocks, int threads);

  // The linear index (x + gx * (y + gy * z)) of the k-th block to run.
  uint64_t block(uint64_t k) const;
  // The order in which to offer the runnable threads a turn, this round.
  const std::vector<int>& threads();

 private:
  enum class Kind : uint8_t { forward, reverse, random };
  uint64_t next();  // splitmix64
  Kind kind_ = Kind::forward;
  uint64_t blocks_ = 0;
  uint64_t state_ = 0;
  std::vector<uint64_t> block_order_;  // random only
  std::vector<int> thread_order_;
};

}  // namespace emu::detail
