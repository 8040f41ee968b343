#!/usr/bin/env bash
# Start a real Dask cluster on this machine, loopback only: one scheduler and N single-threaded
# worker processes, sharing a scheduler file.  Point distlearn at it with
#   distlearn convert big.svm big.zarr --scheduler cluster/scheduler.json
# Stop it with:  cluster/local.sh stop
#
# Every start is clean: the cluster this script started before (its .state pids) is stopped, the
# old scheduler file is removed before the new scheduler starts, and the workers start only once
# the new scheduler has written its file AND answers on its port -- so neither a worker nor a
# client can read the previous run's address.  If the scheduler does not come up within
# $DISTLEARN_CLUSTER_START_TIMEOUT seconds (default 60) the script stops it and fails.
# $DISTLEARN_CLUSTER_DIR (default: this folder) holds scheduler.json and .state/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${DISTLEARN_CLUSTER_DIR:-$here}"
state="$dir/.state"
sched_file="$dir/scheduler.json"
n="${1:-2}"
dask="${DASK:-dask}"
deadline_s="${DISTLEARN_CLUSTER_START_TIMEOUT:-60}"

stop_previous() {  # only processes this script started (their pid files), and only if still dask
  [ -d "$state" ] || return 0
  local p pid
  for p in "$state"/*.pid; do
    [ -e "$p" ] || continue
    pid="$(cat "$p")"
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q dask; then
      kill "$pid" 2>/dev/null || true
    fi
    rm -f "$p"
  done
}

if [ "$n" = "stop" ]; then
  stop_previous
  rm -rf "$state" "$sched_file"
  echo "stopped"
  exit 0
fi
case "$n" in ''|*[!0-9]*|0) echo "local.sh: expected a number of workers >= 1 or 'stop', got '$n'" >&2; exit 2;; esac
case "$deadline_s" in ''|*[!0-9]*|0) echo "local.sh: DISTLEARN_CLUSTER_START_TIMEOUT='$deadline_s': expected whole seconds >= 1" >&2; exit 2;; esac

stop_previous
rm -f "$sched_file"           # never let anyone read the previous run's address
mkdir -p "$state"
"$dask" scheduler --host 127.0.0.1 --port 0 --no-dashboard --scheduler-file "$sched_file" \
  >"$state/scheduler.log" 2>&1 & sched_pid=$!
echo "$sched_pid" >"$state/scheduler.pid"

fail() {
  echo "local.sh: $1 (log: $state/scheduler.log)" >&2
  kill "$sched_pid" 2>/dev/null || true
  rm -f "$sched_file" "$state/scheduler.pid"
  exit 1
}

address=""
end=$((SECONDS + deadline_s))
while :; do
  kill -0 "$sched_pid" 2>/dev/null || fail "the scheduler exited before it was ready"
  if [ -s "$sched_file" ]; then
    address="$(sed -n 's/.*"address": *"\(tcp:\/\/[^"]*\)".*/\1/p' "$sched_file" | head -n 1)"
    port="${address##*:}"
    if [ -n "$address" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      break  # its file is written and it answers on its port
    fi
  fi
  [ "$SECONDS" -lt "$end" ] || fail "the scheduler did not come up within ${deadline_s} s (DISTLEARN_CLUSTER_START_TIMEOUT)"
  sleep 0.1
done

for i in $(seq "$n"); do
  "$dask" worker "$address" --host 127.0.0.1 --nthreads 1 --no-dashboard \
    >"$state/worker$i.log" 2>&1 & echo $! >"$state/worker$i.pid"
done
echo "scheduler $address, file: $sched_file  (workers: $n, logs in $state)"
