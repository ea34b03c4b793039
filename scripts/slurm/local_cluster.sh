#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for trying the batch scripts here
# and for their test (tests/cli/test_slurm.sh): Debian's slurmctld and slurmd
# (scripts/setup.sh installs them), a minimal slurm.conf in DIR, no cgroups
# (proctrack/linuxproc, task/none) and no munge (auth/none: the daemons
# listen on this host only, for this test), every core of the machine.
# A requeued job waits cred_expire seconds before it starts again (Slurm's
# default 120), then for the next pass of the scheduler (sched_interval,
# default 60): 10 and 1 here, so the requeue test does not wait minutes.
#   bash scripts/slurm/local_cluster.sh start DIR   # then: export SLURM_CONF=DIR/slurm.conf
#   bash scripts/slurm/local_cluster.sh stop DIR
# Needs root (slurmd runs jobs as their user). PORT (default 16817: slurmctld;
# slurmd the next) keeps it apart from a site's Slurm. Exit 77 when the
# daemons are missing or do not come up, saying why (the test skips then).
set -euo pipefail
cmd=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
port=${PORT:-16817}
conf=$dir/slurm.conf

stop() {
  for d in slurmd slurmctld; do
    [[ -f $dir/$d.pid ]] && kill "$(cat "$dir/$d.pid")" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    pgrep -f "$conf" >/dev/null || return 0
    sleep 0.1
  done
  pkill -9 -f "$conf" 2>/dev/null || true
}

if [[ $cmd == stop ]]; then
  stop
  exit 0
fi
[[ $cmd == start ]] || { echo "usage: local_cluster.sh start|stop DIR" >&2; exit 2; }
for p in slurmctld slurmd sbatch srun sinfo; do
  command -v "$p" >/dev/null || { echo "skipped: $p is not installed (scripts/setup.sh installs Slurm)"; exit 77; }
done
[[ $(id -u) -eq 0 ]] || { echo "skipped: a local slurmd needs root"; exit 77; }
host=$(hostname)
mkdir -p "$dir/ctld" "$dir/spool"
cat >"$conf" <<CONF
ClusterName=enginelocal
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/none
AuthInfo=cred_expire=10
CredType=cred/none
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF=$conf
slurmctld -f "$conf" || { echo "skipped: slurmctld did not start (see $dir/slurmctld.log)"; exit 77; }
slurmd -f "$conf" || { stop; echo "skipped: slurmd did not start (see $dir/slurmd.log)"; exit 77; }
for _ in $(seq 100); do
  state=$(sinfo -h -o %T 2>/dev/null || true)
  if [[ $state == idle* ]]; then
    echo "local Slurm up: node $host ($(nproc) CPUs), partition local; export SLURM_CONF=$conf"
    exit 0
  fi
  sleep 0.2
done
stop
echo "skipped: the local node did not become idle (state '${state:-none}'; see $dir/slurmctld.log, $dir/slurmd.log)"
exit 77
