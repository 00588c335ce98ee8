#!/bin/bash
# A Slurm cluster of this one host in DIR, for the cluster tests: munged, slurmctld and
# slurmd with their keys, state, sockets, logs and pid files all under DIR, on the two
# free ports given. `start` waits until the node is idle; `stop` ends the jobs and the
# daemons (TERM, then KILL) and removes DIR. Needs root (slurmd runs jobs as their user).
#   slurm_cluster.sh start DIR CTLD_PORT SLURMD_PORT     then: SLURM_CONF=DIR/slurm.conf srun ...
#   slurm_cluster.sh stop DIR
set -u
action=$1 dir=$2

# Alive: exists and is not a zombie (a killed daemon's zombie waits for init to reap it).
alive() { [ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }

stop() {
  [ -f "$dir/slurm.conf" ] && SLURM_CONF="$dir/slurm.conf" scancel --full --quiet -u root 2>/dev/null
  local pids=()
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$pidfile" ] && pids+=("$(cat "$pidfile")")
  done
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    local any=0
    for pid in "${pids[@]}"; do alive "$pid" && any=1; done
    [ $any = 0 ] && break
    sleep 0.1
  done
  local left=()
  for pid in "${pids[@]}"; do
    if alive "$pid"; then kill -KILL "$pid" 2>/dev/null; sleep 0.2; fi
    alive "$pid" && left+=("$pid")
  done
  rm -rf "$dir"
  if [ ${#left[@]} -gt 0 ]; then echo "still running after SIGKILL: ${left[*]}"; return 1; fi
}

if [ "$action" = stop ]; then stop; exit $?; fi

ctld_port=$3 slurmd_port=$4
host=$(hostname -s)
mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/munge" && chmod 700 "$dir/munge" || exit 1
mungekey --create --keyfile="$dir/munge/munge.key" || exit 1
chmod 600 "$dir/munge/munge.key"
munged --force --socket="$dir/munge/munge.sock" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
  --seed-file="$dir/munge/seed" || { echo "munged did not start"; exit 1; }
cat > "$dir/slurm.conf" <<CONF
ClusterName=accel
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=10 State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -c || { echo "slurmctld did not start"; cat "$dir/log/slurmctld.log"; exit 1; }
slurmd || { echo "slurmd did not start"; cat "$dir/log/slurmd.log"; exit 1; }
for _ in $(seq 150); do
  [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && exit 0
  sleep 0.2
done
echo "the node did not become idle in 30 s:"; sinfo; tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log"
exit 1
