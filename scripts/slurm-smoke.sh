#!/usr/bin/env bash
# A real Slurm on this one machine, end to end: installs Debian's slurm-wlm and munge (apt-get, as root), starts
# munged, slurmctld and slurmd with a minimal configuration (no systemd, no cgroups, no accounting), submits a
# 3-task array job that runs `tandem batch --shard auto` over a small goal file, waits for it, merges the shards
# with `tandem batch merge`, prints the merged results and stops the daemons it started.
#
#   scripts/slurm-smoke.sh                     # builds nothing: uses $TANDEM_BIN or <target>/release/tandem
#   TANDEM_BIN=/path/to/tandem scripts/slurm-smoke.sh
#
# Needs root (apt-get, the daemons) and the default models (pulled on first use, or already in the cache).
# Everything it writes goes under $SMOKE_DIR (default: a fresh temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

[ "$(id -u)" = 0 ] || { echo "slurm-smoke: run as root (it installs packages and starts daemons)" >&2; exit 1; }
bin=${TANDEM_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/tandem}
[ -x "$bin" ] || { echo "slurm-smoke: no tandem binary at $bin (cargo build --release, or set TANDEM_BIN)" >&2; exit 1; }
bin=$(realpath "$bin")

echo "== installing slurm-wlm and munge"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi
slurmctld -V

work=${SMOKE_DIR:-$(mktemp -d /tmp/tandem-slurm-smoke.XXXXXX)}
mkdir -p "$work"/{state,spool,log,munge}
work=$(realpath "$work")
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)

pids=()
cleanup() {
    # Stop only the daemons this script started, by their pids.
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "== starting munged"
[ -s /etc/munge/munge.key ] || { mkdir -p /etc/munge; dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none; }
chmod 0400 /etc/munge/munge.key
mkdir -p /run/munge
munged --force --socket="$work/munge/munge.socket" --pid-file="$work/munge/munged.pid" \
    --log-file="$work/log/munged.log" --seed-file="$work/munge/munge.seed"
pids+=("$(cat "$work/munge/munged.pid")")

echo "== writing $work/slurm.conf (node $host, $cpus CPUs, $mem MiB)"
cat >"$work/slurm.conf" <<EOF
ClusterName=tandem-smoke
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/state/slurmctld.pid
SlurmdPidFile=$work/state/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=smoke Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$work/slurm.conf

echo "== starting slurmctld and slurmd"
slurmctld -f "$SLURM_CONF"
for _ in $(seq 50); do [ -s "$work/state/slurmctld.pid" ] && break; sleep 0.2; done
pids+=("$(cat "$work/state/slurmctld.pid")")
slurmd -f "$SLURM_CONF"
for _ in $(seq 50); do [ -s "$work/state/slurmd.pid" ] && break; sleep 0.2; done
pids+=("$(cat "$work/state/slurmd.pid")")
for _ in $(seq 60); do sinfo -h -o %T 2>/dev/null | grep -qE '^idle' && break; sleep 1; done
sinfo

echo "== the goals and the array job"
cat >"$work/goals.jsonl" <<'EOF'
{"id": "mul", "goal": "What is 7*8?"}
{"id": "sub", "goal": "What is 100-37?"}
{"id": "add", "goal": "What is 12*4+5?"}
EOF
# The script docs/scale-out.md shows, with the binary and paths of this run.
cat >"$work/batch.sbatch" <<EOF
#!/bin/bash
#SBATCH --job-name=tandem-batch
#SBATCH --array=0-2
#SBATCH --cpus-per-task=1
#SBATCH --output=$work/log/task-%a.out
srun "$bin" batch "$work/goals.jsonl" --out "$work/results.jsonl" --shard auto --threads 1 --quiet
EOF
cat "$work/batch.sbatch"
started=$(date +%s)
# --wait returns when every task has ended; a task whose goal did not finish exits 3 (and the job with it).
sbatch --wait "$work/batch.sbatch" || echo "sbatch: a task ended non-zero (see its log below)"
echo "array job ran in $(( $(date +%s) - started )) s"
sacct >/dev/null 2>&1 || true
for log in "$work"/log/task-*.out; do echo "--- $log"; cat "$log"; done

echo "== merging"
ls "$work"/results.shard-*.jsonl
"$bin" batch merge "$work"/results.shard-*.jsonl --out "$work/merged.jsonl"
echo "--- merged results (id, stop, answer)"
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(r.get("id"), r["stop"], r.get("answer"), sep="\t")
' "$work/merged.jsonl"
echo "slurm-smoke: ok ($work)"
