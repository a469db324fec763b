#!/usr/bin/env bash
# End-to-end `perfskel skeletonize` of a very long trace (default ≥ 100 M events) in
# bounded memory. The trace is made for real, once: examples/apps/small_calls.c (a
# regular nest of 8-byte MPI_Irecv/MPI_Isend/MPI_Waitall and MPI_Allreduce calls) is
# built with Open MPI's mpicc and recorded with `perfskel record` at 2 ranks,
# 2 × 1,650,000 × 31 + 4 = 102,300,004 events, ≈ 1.4 GB; about 1.5 minutes. It is
# kept outside the repository (default /tmp/perfskel-stream) and reused by later runs.
# Then the release build skeletonizes it with each algorithm under /usr/bin/time -v and
# the script prints one Markdown row per algorithm: events, statements, user CPU time,
# wall time, peak memory (maximum resident set size) and events per second (per CPU
# second and per wall second). The whole run counts: three reads of every rank file
# (survey, loop discovery, statistics of the loop bodies), SPMD merge, and the check of
# the skeleton. Timings on the shared machine are noisy: the load average is printed.
#
# Usage: scripts/bench-stream.sh [--dir DIR] [--outer N] [--inner M] [--ranks R]
#                                [--algorithms "greedy exact"]
set -euo pipefail

DIR=/tmp/perfskel-stream
OUTER=1650000
INNER=10
RANKS=2
ALGORITHMS="greedy exact"
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --outer) OUTER=$2; shift 2 ;;
    --inner) INNER=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --algorithms) ALGORITHMS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
for tool in /usr/bin/time mpicc mpirun; do
  if ! command -v "$tool" >/dev/null; then
    echo "bench-stream: $tool is missing; run scripts/setup.sh" >&2
    exit 1
  fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release --locked -q --manifest-path "$ROOT/Cargo.toml" -p perfskel
PERFSKEL=${CARGO_TARGET_DIR:-$ROOT/target}/release/perfskel

TRACE="$DIR/trace-small_calls-$RANKS-$OUTER-$INNER"
mkdir -p "$DIR"
if [ ! -f "$TRACE/manifest.json" ]; then
  echo "recording $TRACE (small_calls $OUTER $INNER at $RANKS ranks) ..."
  mpicc -O2 -g -Wall -Wextra -Werror -o "$DIR/small_calls" "$ROOT/examples/apps/small_calls.c"
  "$PERFSKEL" record --force -o "$TRACE" -- mpirun -np "$RANKS" "$DIR/small_calls" "$OUTER" "$INNER"
fi
echo "trace: $TRACE, $(du -shL "$TRACE" | cut -f1)"
echo

field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
time_field() { awk -F': ' -v k="$2" '$1 ~ k {print $2}' "$1"; }

echo "| algorithm | raw events | statements | user CPU | wall | peak memory | events/s (CPU) | events/s (wall) | load average before |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
for algorithm in $ALGORITHMS; do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  out="$DIR/$algorithm"
  if ! /usr/bin/time -v -o "$out.time" "$PERFSKEL" skeletonize "$TRACE" -o "$out.skel" \
      --algorithm "$algorithm" --format json --force >"$out.json" 2>"$out.err"; then
    echo "bench-stream: skeletonize --algorithm $algorithm failed (see $out.err)" >&2
    exit 1
  fi
  events=$(field "$out.json" raw_events)
  user=$(time_field "$out.time" "User time")
  wall=$(time_field "$out.time" "Elapsed")
  peak_kib=$(time_field "$out.time" "Maximum resident set size")
  python3 - "$algorithm" "$events" "$(field "$out.json" statements)" "$user" "$wall" \
      "$peak_kib" "$load" <<'EOF'
import sys
algorithm, events, statements, user, wall, peak_kib, load = sys.argv[1:]
events, user, peak_kib = int(events), max(float(user), 0.01), int(peak_kib)
secs = 0.0
for part in wall.split(":"):
    secs = secs * 60 + float(part)
secs = max(secs, 0.01)
print(f"| {algorithm} | {events:,} | {statements} | {user:.1f} s | {secs:.1f} s "
      f"| {peak_kib / 1024:.1f} MiB | {events / user / 1e6:.2f} M | {events / secs / 1e6:.2f} M | {load} |")
EOF
done
