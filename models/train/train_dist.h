// What the train program does differently on N ranks (mpirun / srun):
// which GPU a rank takes, the checks that all ranks agree before any
// collective, and how the global batch is split over the dp ranks.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "comm/world.h"
#include "engine/device.h"

namespace eng::models {

// An error every rank raised identically (a disagreement found by an
// all-gather): rank 0 reports it, every rank exits cleanly with status 1.
struct WorldError : Error {
  using Error::Error;
};

// cuda: local_rank mod the GPUs on the node; two ranks on one GPU are refused.
Device rank_device(Device requested);

// Ranks on one node share its cores: without OMP_NUM_THREADS, each rank's
// OpenMP (and OpenBLAS) threads = cores / local ranks, at least 1, instead
// of every rank starting one thread per core. Returns the thread count.
int share_cores();

// Every rank's `what` (config, model shape, parameter count) must equal
// rank 0's; otherwise a WorldError naming the first rank and key that differ.
// With `peers` (a pipeline stage's number), only the ranks that give the same
// peers are compared: the first of them stands for rank 0.
void agree(const nlohmann::json& mine, const std::string& what, int peers = 0);

// The global batch over dp ranks: micro-batches of batch_size sequences,
// grad_accum of them per rank per step.
struct BatchPlan {
  int64_t micro = 0, accum = 0, dp = 1, dp_rank = 0;
  int64_t global() const { return micro * accum * dp; }
  // Index (in units of micro-batches) of this rank's micro-batch m of
  // `step`: the global batch's rows in rank-major order, so N ranks read
  // exactly the rows 1 rank reads with the same global batch.
  int64_t micro_index(int64_t step, int64_t m) const { return (step * dp + dp_rank) * accum + m; }
};
BatchPlan plan_batches(int64_t batch_size, int64_t grad_accum, int64_t global_batch, int64_t dp, int64_t dp_rank);

// Test-only fault injection, for the failure tests of a distributed run:
// ENGINE_FAULT=throw:RANK:STEP makes world rank RANK throw at the start of
// step STEP (1-based), as a rank that hits a bad input or a device error;
// ENGINE_FAULT=sleep:MS makes every step of every rank MS ms longer (a slow
// job, without using the CPU, for the scheduler tests);
// ENGINE_FAULT=signal:RANK:STEP:TERM|USR1|INT raises that signal in world
// rank RANK at the start of step STEP, as a scheduler's signal that reached
// that rank alone (run_stop.h).
void inject_fault(int64_t step);

}  // namespace eng::models
