#!/usr/bin/env bash
# mpirun with what this project's runs need, for tests, benchmarks and users:
#   usage: scripts/mpirun.sh -np N PROGRAM ARGS...   (any mpirun options first)
# - Open MPI refuses to run as root (containers, CI) unless told twice:
#   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
# - More ranks than cores (CI has 2): --oversubscribe, and ranks that yield
#   the CPU while they wait (OMPI_MCA_mpi_yield_when_idle=1) instead of
#   spinning against the rank doing the work.
# - One OpenMP/BLAS thread per rank unless OMP_NUM_THREADS says otherwise:
#   N ranks x all cores each would oversubscribe the machine N times.
# - OPENBLAS_CORETYPE as scripts/train.sh sets it (scripts/cpu_env.sh).
# - ENGINE_STDOUT_TTY=1 when this script's stdout is a terminal: the ranks'
#   stdout is Open MPI's own pseudo-terminal either way, so train cannot tell
#   a terminal (live progress line) from a log file (plain lines) by itself.
# - A timeout (MPIRUN_TIMEOUT seconds, default 600) so that a hang fails
#   instead of eating the CI; `timeout` sends TERM, then KILL 10 s later.
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_yield_when_idle=1
# The shared-memory transport's 2-core CI container has no CMA (ptrace) rights.
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
if [[ -t 1 ]]; then export ENGINE_STDOUT_TTY=1; else export ENGINE_STDOUT_TTY=0; fi
# OpenBLAS's kernel family for CPUs it does not recognise, as scripts/train.sh.
source "$(dirname "$0")/cpu_env.sh"
exec timeout -k 10 "${MPIRUN_TIMEOUT:-600}" mpirun --oversubscribe -x OMP_NUM_THREADS -x ENGINE_STDOUT_TTY "$@"
