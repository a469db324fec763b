#!/usr/bin/env bash
# Tracer overhead benchmark: runs each example application untraced and under
# `perfskel record` at realistic sizes and prints a table of wall times (best of REPS),
# slowdown, events and bytes per event; then measures trace reading speed end to end
# (`perfskel trace stats` on the largest trace) and with the criterion reader bench.
#
# Usage: scripts/bench-tracer.sh [--mpi openmpi|mpich] [--np N] [--reps R] [--quick] [--no-criterion]
set -euo pipefail

MPI=openmpi
NP=4
REPS=3
QUICK=0
CRITERION=1
while [ $# -gt 0 ]; do
  case "$1" in
    --mpi) MPI=$2; shift 2 ;;
    --np) NP=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --no-criterion) CRITERION=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

cargo build --release -q --manifest-path "$ROOT/Cargo.toml" --bin perfskel
PERFSKEL="$ROOT/target/release/perfskel"
make -s -C "$ROOT/examples/apps" MPI="$MPI" OUT="$WORK/bin" >/dev/null

# app and arguments: sizes that run for about a second or more and make many calls.
if [ "$QUICK" = 1 ]; then
  APPS=(
    "stencil 128 500"
    "cg 20000 500"
    "ring_f 4096 500"
  )
else
  APPS=(
    "stencil 256 2000"
    "ring 8192 2000"
    "ring_f 8192 2000"
    "cg 30000 1500"
    "master_worker 4000 400"
    "transpose 64 300"
    "tree_reduce 200000 500"
    "rowcol 20000 1000"
  )
fi

now_ns() { date +%s%N; }

best_of() { # prints the smallest of the arguments
  printf '%s\n' "$@" | sort -n | head -1
}

printf '%-16s %-14s %10s %10s %9s %9s %11s %10s\n' \
  app args untraced_s traced_s slowdown events bytes/event MB
BIG_TRACE=""
BIG_EVENTS=0
for spec in "${APPS[@]}"; do
  set -- $spec
  app=$1; shift
  untraced=(); traced=()
  trace="$WORK/trace-$app"
  for _ in $(seq "$REPS"); do
    # Alternate untraced and traced runs so drifting machine load hits both alike.
    t0=$(now_ns); "mpirun.$MPI" -np "$NP" "$WORK/bin/$app" "$@" >/dev/null; t1=$(now_ns)
    untraced+=($((t1 - t0)))
    t0=$(now_ns)
    "$PERFSKEL" record -o "$trace" -- "mpirun.$MPI" -np "$NP" "$WORK/bin/$app" "$@" \
      >/dev/null 2>"$WORK/record.err"
    t1=$(now_ns)
    traced+=($((t1 - t0)))
  done
  u=$(best_of "${untraced[@]}"); t=$(best_of "${traced[@]}")
  line=$(grep 'perfskel record:' "$WORK/record.err" | head -1)
  events=$(echo "$line" | sed -E 's/.* ([0-9]+) events.*/\1/')
  bytes=$(echo "$line" | sed -E 's/.*events, ([0-9]+) bytes.*/\1/')
  awk -v app="$app" -v args="$*" -v u="$u" -v t="$t" -v e="$events" -v b="$bytes" 'BEGIN {
    printf "%-16s %-14s %10.3f %10.3f %8.2f%% %9d %11.2f %10.2f\n",
      app, args, u / 1e9, t / 1e9, 100 * (t - u) / u, e, b / e, b / 1e6 }'
  if [ "$events" -gt "$BIG_EVENTS" ]; then BIG_EVENTS=$events; BIG_TRACE=$trace; fi
done

echo
echo "trace reading, end to end (perfskel trace stats, release build):"
t0=$(now_ns); "$PERFSKEL" trace stats "$BIG_TRACE" --format json >/dev/null; t1=$(now_ns)
awk -v e="$BIG_EVENTS" -v ns="$((t1 - t0))" -v d="$(basename "$BIG_TRACE")" 'BEGIN {
  printf "  %s: %d events in %.3f s = %.2f M events/s (includes symbolization and aggregation)\n",
    d, e, ns / 1e9, e / (ns / 1e9) / 1e6 }'

if [ "$CRITERION" = 1 ]; then
  echo
  echo "reader alone (criterion, compiler/benches/trace_reader.rs):"
  cargo bench -q --manifest-path "$ROOT/Cargo.toml" -p perfskel-compiler --bench trace_reader 2>&1 \
    | grep -E 'synthetic|thrpt|time:' | sed 's/^/  /'
fi
