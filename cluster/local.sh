#!/usr/bin/env bash
# Start a real Dask cluster on this machine, loopback only: one scheduler and N single-threaded
# worker processes, sharing a scheduler file.  Point distlearn at it with
#   distlearn convert big.svm big.zarr --scheduler cluster/scheduler.json
# Stop it with:  cluster/local.sh stop
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
state="$here/.state"
sched_file="$here/scheduler.json"
n="${1:-2}"
dask="${DASK:-dask}"

if [ "$n" = "stop" ]; then
  [ -d "$state" ] && for p in "$state"/*.pid; do kill "$(cat "$p")" 2>/dev/null || true; done
  rm -rf "$state" "$sched_file"
  echo "stopped"
  exit 0
fi

mkdir -p "$state"
"$dask" scheduler --host 127.0.0.1 --port 0 --no-dashboard --scheduler-file "$sched_file" \
  >"$state/scheduler.log" 2>&1 & echo $! >"$state/scheduler.pid"
for _ in $(seq 100); do [ -s "$sched_file" ] && break; sleep 0.1; done
for i in $(seq "$n"); do
  "$dask" worker --scheduler-file "$sched_file" --host 127.0.0.1 --nthreads 1 --no-dashboard \
    >"$state/worker$i.log" 2>&1 & echo $! >"$state/worker$i.pid"
done
echo "scheduler file: $sched_file  (workers: $n, logs in $state)"
