#!/usr/bin/env bash
# Does a memory-bound loop slow down per second of CPU when another one shares its core?
# Runs a three-point sweep (as stencil's) over a working set, and the same over an
# L1-sized buffer, alone on core 1, two copies on core 1, and one copy on each core, and
# prints each copy's CPU time per element. Used in docs/validate.md (session 35): on
# that machine the 31 MiB sweep was x1.43 slower per CPU second with two copies on one
# core, the L1 one not at all, which a skeleton's L1-sized compute kernel cannot follow.
#
#   scripts/core-sharing.sh [WORKING_SET_KIB] [SWEEPS]
set -euo pipefail
ws=${1:-31360}
sweeps=${2:-150}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/sweep.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    size_t bytes = (size_t)atol(argv[1]) << 10, n = bytes / 16;
    int sweeps = atoi(argv[2]);
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
    if (!a || !b || n < 3) return 1;
    for (size_t i = 0; i < n; i++) { a[i] = 1.0; b[i] = 2.0; }
    double cpu0 = seconds(CLOCK_THREAD_CPUTIME_ID), wall0 = seconds(CLOCK_MONOTONIC);
    for (int s = 0; s < sweeps; s++) {
        for (size_t i = 1; i + 1 < n; i++) a[i] = 0.25 * (b[i - 1] + b[i + 1]) + 0.5 * a[i];
        double *t = a; a = b; b = t;
    }
    double cpu = seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0, wall = seconds(CLOCK_MONOTONIC) - wall0;
    printf("ws %zu KiB: cpu %.3f s wall %.3f s (%.2f ns/elem cpu) %g\n", bytes >> 10, cpu, wall,
           1e9 * cpu / ((double)n * sweeps), a[n / 2]);
    return 0;
}
C
cc -O2 "$tmp/sweep.c" -o "$tmp/sweep"
# The three placements of one working set and number of sweeps.
placements() {
    echo "alone on core 1:"
    taskset -c 1 "$tmp/sweep" "$1" "$2"
    echo "two on core 1:"
    taskset -c 1 "$tmp/sweep" "$1" "$2" & taskset -c 1 "$tmp/sweep" "$1" "$2"; wait
    echo "one on each core:"
    taskset -c 0 "$tmp/sweep" "$1" "$2" & taskset -c 1 "$tmp/sweep" "$1" "$2"; wait
}
placements "$ws" "$sweeps"
placements 32 $((sweeps * ws / 32))   # the same elements swept, in L1
