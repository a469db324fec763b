#!/usr/bin/env bash
# Loop-discovery benchmark (compiler/src/compress).
#  1. The synthetic traces shaped like the seed's NAS table (BT, SP, LU, CG, MG; see
#     compiler/src/compress/synthetic.rs): raw length, seed's compressed length, and for
#     each algorithm the compressed length (description_len: one per call plus one per
#     loop header), best-of-REPS wall time and throughput.
#  2. A long regular token stream (default 100 M tokens) pushed one token at a time
#     through the streaming greedy compressor, with the process's peak memory (maximum
#     resident set size from /usr/bin/time -v) and CPU time.
#  3. Optionally the criterion benchmark (compiler/benches/compress.rs).
# Timings on the shared development machine are noisy: the load average is printed with
# them.
#
# Usage: scripts/bench-compress.sh [--reps R] [--stream TOKENS] [--criterion]
set -euo pipefail

REPS=5
STREAM=100000000
CRITERION=0
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --stream) STREAM=$2; shift 2 ;;
    --criterion) CRITERION=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x /usr/bin/time ]; then
  echo "bench-compress: /usr/bin/time is missing; run scripts/setup.sh" >&2
  exit 1
fi
cargo build --release -q --manifest-path "$ROOT/Cargo.toml" -p perfskel-compiler --example compress_table
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
TABLE="$TARGET_DIR/release/examples/compress_table"

echo "## Loop discovery on NAS-shaped synthetic traces (best of $REPS)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
"$TABLE" table "$REPS"
echo
echo "## Streaming greedy discovery, $STREAM tokens"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
/usr/bin/time -v "$TABLE" stream "$STREAM" 2>"$LOG"
awk -F': ' '/Maximum resident set size/ {printf "peak memory (max RSS): %.1f MiB\n", $2 / 1024}
            /User time/ {printf "user CPU time: %s s\n", $2}' "$LOG"

if [ "$CRITERION" = 1 ]; then
  echo
  echo "## criterion (cargo bench -p perfskel-compiler --bench compress)"
  cargo bench -q --manifest-path "$ROOT/Cargo.toml" -p perfskel-compiler --bench compress
fi
