#!/usr/bin/env bash
# Does an application's time follow the host's memory speed? Runs ROUNDS rounds of: a
# triad sweep over 256 MiB arrays (memory bandwidth), an L1-resident loop, then stencil,
# cg and tree_reduce in the base scenario of a `perfskel validate` work directory, and
# prints one line per round. Used in docs/validate.md (session 6).
#
#   scripts/memory-noise.sh WORKDIR [ROUNDS]
#
# WORKDIR is a full-mode `perfskel validate -o WORKDIR` directory (it has
# launch/base.sh and build/openmpi/{stencil,cg,tree_reduce}).
set -euo pipefail
work=${1:?usage: scripts/memory-noise.sh WORKDIR [ROUNDS]}
rounds=${2:-8}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/probe.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(void) {
    size_t bytes = (size_t)256 << 20, n = bytes / sizeof(double);
    double *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) return 1;
    for (size_t i = 0; i < n; i++) { a[i] = (double)i; b[i] = 0.0; }
    int sweeps = 0;
    double t0 = now();
    while (now() - t0 < 0.5) {
        for (size_t i = 0; i < n; i++) b[i] = a[i] * 1.0001 + b[i];
        sweeps++;
    }
    double mem = sweeps * 3.0 * bytes / (now() - t0) / 1e9;
    double x = 1.0;
    long blocks = 0;
    t0 = now();
    while (now() - t0 < 0.3) {
        for (int k = 0; k < 100000; k++) x = x * 1.0000001 + 1e-9;
        blocks++;
    }
    printf("%.1f %.0f %g\n", mem, blocks * 0.1 / (now() - t0), x + b[n / 2] * 0.0);
    return 0;
}
C
cc -O2 -o "$tmp/probe" "$tmp/probe.c"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
app() {
    "$work/launch/base.sh" -np 2 "$work/build/openmpi/$1" "${@:2}" 2>&1 |
        grep -o 'seconds=[0-9.]*' | cut -d= -f2
}
printf '%-8s %10s %12s %10s %10s %12s\n' time "memory GB/s" "L1 M it/s" stencil cg tree_reduce
for _ in $(seq "$rounds"); do
    read -r mem l1 _ < <("$tmp/probe")
    printf '%-8s %10s %12s %10s %10s %12s\n' "$(date +%T)" "$mem" "$l1" \
        "$(app stencil 1400 1500)" "$(app cg 1000000 1500)" "$(app tree_reduce 2000000 1500)"
done
