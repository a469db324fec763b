#!/usr/bin/env bash
# Tracer overhead benchmark.
#  1. Cost per event: runtime/tracer/bench/callrate.c times two million MPI calls that
#     return at once, untraced and traced (1 rank, best of REPS); the difference is what
#     the tracer adds to every MPI call.
#  2. Examples at realistic sizes, untraced and under `perfskel record` (best of REPS):
#     wall times, measured slowdown, and the slowdown the per-event cost predicts
#     (events per rank x cost / untraced time) — on a shared, oversubscribed machine the
#     measured figure is mostly noise, the predicted one is not.
#  2b. Failed polls: runtime/tracer/bench/pollrate.c, one MPI_Testany that finds nothing
#     and one random update of a 128 MiB table per iteration, untraced and traced
#     (medians of REPS): the tracer's fast path for runs of failed polls.
#  3. Trace reading: `perfskel trace stats` end to end on the callrate trace, and the
#     criterion reader benchmark (compiler/benches/trace_reader.rs).
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
"mpicc.$MPI" -O2 -g -o "$WORK/bin/callrate" "$ROOT/runtime/tracer/bench/callrate.c"
"mpicc.$MPI" -O2 -g -o "$WORK/bin/pollrate" "$ROOT/runtime/tracer/bench/pollrate.c"

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

CALLS=2000000
plain=(); traced=()
for _ in $(seq "$REPS"); do
  plain+=($("mpirun.$MPI" -np 1 "$WORK/bin/callrate" $CALLS))
  traced+=($("$PERFSKEL" record --force -o "$WORK/trace-callrate" -- "mpirun.$MPI" -np 1 \
    "$WORK/bin/callrate" $CALLS 2>"$WORK/record.err"))
done
P=$(printf '%s\n' "${plain[@]}" | sort -g | head -1)
T=$(printf '%s\n' "${traced[@]}" | sort -g | head -1)
COST=$(awk -v p="$P" -v t="$T" 'BEGIN { c = t - p; if (c < 0) c = 0; printf "%.1f", c }')
CR_LINE=$(grep 'perfskel record:' "$WORK/record.err" | head -1)
echo "cost per event ($MPI, callrate, $CALLS calls, best of $REPS):"
echo "  untraced $P ns/call, traced $T ns/call => tracer cost $COST ns/event"
echo "  ${CR_LINE#perfskel record: }"
echo

# Failed polls in a loop of cache misses: what the tracer's untimed fast path costs there.
ITERS=10000000
[ "$QUICK" = 1 ] && ITERS=4000000
plain=(); traced=()
for _ in $(seq "$REPS"); do
  plain+=($("mpirun.$MPI" -np 1 "$WORK/bin/pollrate" $ITERS))
  traced+=($("$PERFSKEL" record --force -o "$WORK/trace-pollrate" -- "mpirun.$MPI" -np 1 \
    "$WORK/bin/pollrate" $ITERS 2>"$WORK/record.err"))
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
PM=$(median "${plain[@]}"); TM=$(median "${traced[@]}")
PR_LINE=$(grep 'perfskel record:' "$WORK/record.err" | head -1)
echo "failed polls in a loop of cache misses ($MPI, pollrate, $ITERS iterations, median of $REPS):"
echo "  untraced $PM ns/iteration, traced $TM ns/iteration (runs: ${plain[*]} | ${traced[*]})"
echo "  ${PR_LINE#perfskel record: }"
echo

printf '%-14s %-14s %10s %10s %9s %9s %8s %11s\n' \
  app args untraced_s traced_s measured predicted events bytes/event
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
    "$PERFSKEL" record --force -o "$trace" -- "mpirun.$MPI" -np "$NP" "$WORK/bin/$app" "$@" \
      >/dev/null 2>"$WORK/record.err"
    t1=$(now_ns)
    traced+=($((t1 - t0)))
  done
  u=$(best_of "${untraced[@]}"); t=$(best_of "${traced[@]}")
  line=$(grep 'perfskel record:' "$WORK/record.err" | head -1)
  events=$(echo "$line" | sed -E 's/.* ([0-9]+) events.*/\1/')
  bytes=$(echo "$line" | sed -E 's/.*events, ([0-9]+) bytes.*/\1/')
  awk -v app="$app" -v args="$*" -v u="$u" -v t="$t" -v e="$events" -v b="$bytes" \
      -v c="$COST" -v np="$NP" 'BEGIN {
    printf "%-14s %-14s %10.3f %10.3f %8.2f%% %8.3f%% %8d %11.2f\n",
      app, args, u / 1e9, t / 1e9, 100 * (t - u) / u, 100 * (e / np) * c / u, e, b / e }'
done

echo
echo "trace reading, end to end (perfskel trace stats, release build, best of $REPS):"
times=()
for _ in $(seq "$REPS"); do
  t0=$(now_ns); "$PERFSKEL" trace stats "$WORK/trace-callrate" --format json >/dev/null; t1=$(now_ns)
  times+=($((t1 - t0)))
done
awk -v e="$((CALLS + 2))" -v ns="$(best_of "${times[@]}")" 'BEGIN {
  printf "  callrate trace: %d events in %.3f s = %.1f M events/s (reading, symbolizing, aggregating)\n",
    e, ns / 1e9, e / (ns / 1e9) / 1e6 }'

if [ "$CRITERION" = 1 ]; then
  echo
  echo "reader alone (criterion, compiler/benches/trace_reader.rs):"
  cargo bench -q --manifest-path "$ROOT/Cargo.toml" -p perfskel-compiler --bench trace_reader 2>&1 \
    | grep -E 'synthetic|thrpt|time:' | sed 's/^/  /'
fi
