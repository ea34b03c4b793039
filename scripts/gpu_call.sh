#!/usr/bin/env bash
# The one call on a lent GPU machine (docs/gpu.md, "How to run"): the shared
# on-gpu.sh's stages with what this repository needs around them. Here first:
#   bash scripts/setup.sh                       # .deps/cudnn-frontend (headers)
#   bash ../shared/gpu/fetch-debs.sh --mpi       # .gpu/ (debs, on-gpu.sh)
# then one device run, carry [".gpu", ".deps/cudnn-frontend"], timeout 600:
#   bash scripts/gpu_call.sh
# It finds the pip wheel's cuDNN there (cudnn.h for the build, libcudnn.so.9
# for the runs: scripts/cudnn_env.sh) and runs on-gpu.sh twice inside
# BUDGET_S (570 s): first deps, configure, build and the project's stage
# (bench/gpu_stage.sh: the step profiles, tokens/s, PyTorch's baseline; the
# figures the issues wait on), its files in OUT/measure; then, with what is
# left, the gpu tests and the whole workbench, in OUT/check. The CPU half of
# the suite (ctest -LE gpu) and on-gpu.sh's own training stage are left out:
# CI runs the first, the project's stage measures more than the second.
# FIRST_S (400) is the first part's share; CAP_<stage> set beforehand wins;
# THEN (ctest-gpu,bench) names the stages after the build: the second part's
# here, check's before its project stage (ctest-gpu alone when RUNS's
# workbench runs measure what the whole workbench would).
#   bash scripts/gpu_call.sh check     # a later call of the same task:
# deps, configure, build, the gpu tests and the workbench first (what a fix
# since the first call needs checked), then bench/gpu_stage.sh's RUNS when
# RUNS names some, all in OUT/check.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
[[ -f .gpu/on-gpu.sh ]] || { echo "gpu_call: no .gpu/on-gpu.sh (run fetch-debs.sh here, carry .gpu)" >&2; exit 2; }
# shellcheck source=scripts/cudnn_env.sh
source scripts/cudnn_env.sh
inc=$(python3 -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "include"))' 2>/dev/null) || inc=""
if [[ -n $inc && -f $inc/cudnn.h ]]; then
  export EXTRA_CMAKE_ARGS="-DCUDNN_INCLUDE_DIR=$inc ${EXTRA_CMAKE_ARGS:-}"
fi
[[ -f .deps/cudnn-frontend/include/cudnn_frontend.h ]] ||
  echo "gpu_call: no .deps/cudnn-frontend carried: the cuDNN rows and --attention cudnn will be off" >&2
if [[ ${1:-measure} == check ]]; then
  stages=deps,configure,build,${THEN:-ctest-gpu,bench}
  [[ -n ${RUNS:-} ]] && stages+=,project
  export CAP_build=${CAP_build:-300} CAP_ctest_gpu=${CAP_ctest_gpu:-150} CAP_bench=${CAP_bench:-200}
  OUT=${OUT:-$PWD/.gpu/out}/check STAGES=$stages BUDGET_S=${BUDGET_S:-570} exec bash .gpu/on-gpu.sh full
fi
t0=$(date +%s)
budget=${BUDGET_S:-570}
out=${OUT:-$PWD/.gpu/out}
export CAP_build=${CAP_build:-300} CAP_project=${CAP_project:-330} CAP_ctest_gpu=${CAP_ctest_gpu:-150}
OUT=$out/measure STAGES=deps,configure,build,project BUDGET_S=${FIRST_S:-400} bash .gpu/on-gpu.sh full
rc=$?
left=$((budget - ($(date +%s) - t0)))
if ((left >= 40)); then
  OUT=$out/check STAGES=${THEN:-ctest-gpu,bench} BUDGET_S=$left bash .gpu/on-gpu.sh full || rc=1
else
  echo "gpu_call: ${left}s left: no gpu tests nor workbench this time" >&2
fi
exit $rc
