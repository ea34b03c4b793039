# Sourced by scripts/train.sh and scripts/mpirun.sh.
# OpenBLAS 0.3.21 falls back to its SSE3 kernels on CPUs it does not know
# (generic "Intel Xeon Processor" VMs); name the kernel family the CPU can
# run unless the environment already chose one.
if [[ -z "${OPENBLAS_CORETYPE:-}" ]]; then
  if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
fi
