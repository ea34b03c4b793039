// How train ends on an error: one line on stderr ("train: error: ..."),
// exit status 1. An error every rank found (WorldError) is said by rank 0
// alone; one rank's own error names the rank and ends the whole job
// (MPI_Abort), as its peers may be waiting for it in a collective. stdout
// is flushed first, so in a log holding both streams (a Slurm job's, CI's)
// the error comes after the lines printed before it, not before them.
#pragma once
#include <functional>

namespace eng::models {

// run() or, when it throws, the report above; returns the exit status.
int run_or_report(const std::function<int()>& run);

}  // namespace eng::models
