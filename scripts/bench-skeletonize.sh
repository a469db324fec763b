#!/usr/bin/env bash
# The compression table of the example applications: each one is built, recorded at 4
# ranks under Open MPI with the arguments below (thousands of iterations, so the loops
# dominate), and skeletonized with both loop-discovery algorithms (release build).
# Prints one Markdown row per application: raw events, statements, compression, the
# time inside discovered loops, and per algorithm the user CPU time and peak memory of
# the whole `perfskel skeletonize` run (reading, symbolizing, discovery, merge, check).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release --locked --quiet
perfskel=$PWD/target/release/perfskel
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
make -s -C examples/apps OUT="$work/build" >/dev/null

apps=(
    "stencil 64 3000" "stencil_f 64 3000" "cg 256 3000" "cg_f 256 3000"
    "ring 1024 3000" "ring_f 1024 3000" "transpose 64 1000" "tree_reduce 1000 3000"
    "rowcol 64 3000" "master_worker 2000 300"
)
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

echo "| app (arguments) | raw events | statements | ratio | topology | time in loops | exact: CPU, peak | greedy: CPU, peak |"
echo "|---|---:|---:|---:|---|---:|---|---|"
for line in "${apps[@]}"; do
    read -r name args <<<"$line"
    # shellcheck disable=SC2086
    "$perfskel" record --force -o "$work/trace-$name" -- mpirun --oversubscribe -np 4 \
        "$work/build/$name" $args >/dev/null 2>&1
    cells=()
    for algorithm in exact greedy; do
        /usr/bin/time -f "%U %M" -o "$work/time" "$perfskel" skeletonize "$work/trace-$name" \
            -o "$work/$name-$algorithm.skel" --algorithm "$algorithm" --format json \
            >"$work/$name-$algorithm.json" 2>/dev/null || true
        read -r cpu peak_kib <"$work/time"
        cells+=("$cpu s, $((peak_kib / 1024)) MiB")
    done
    json="$work/$name-exact.json"
    printf '| %s `%s` | %s | %s | %sx | %s | %s %% | %s | %s |\n' "$name" "$args" \
        "$(field "$json" raw_events)" "$(field "$json" statements)" \
        "$(field "$json" compression_ratio)" "$(field "$json" topology)" \
        "$(field "$json" loop_time_pct)" "${cells[0]}" "${cells[1]}"
done
