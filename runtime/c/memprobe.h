/* memprobe.h: the memory probe of trace format 3 and of the `memory` header line. The
 * tracer (runtime/tracer/core.inc) runs it after PMPI_Finalize and the C runtime
 * (perfskel.h) at a skeleton's start, so both sides run this same code; the Rust
 * runtime's `kernel::memory_probe` is its translation. Header-only, C99, clean under
 * -Wall -Wextra -Werror. See runtime/tracer/FORMAT.md. */
#ifndef PERFSKEL_MEMPROBE_H
#define PERFSKEL_MEMPROBE_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The probe's size: the working set within [PS_PROBE_MIN, PS_PROBE_MAX]. */
#define PS_PROBE_MIN ((size_t)64 << 10)
#define PS_PROBE_MAX ((size_t)256 << 20)
/* How long the probe measures, at least five times (after its buffers are touched). */
#define PS_PROBE_S 0.04

static inline size_t ps_probe_bytes(uint64_t working_set) {
    return working_set < PS_PROBE_MIN   ? PS_PROBE_MIN
           : working_set > PS_PROBE_MAX ? PS_PROBE_MAX
                                        : (size_t)working_set;
}

static inline double ps_probe_clock(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Read after every copy, so the compiler keeps them. */
static volatile char ps_probe_sink;

/* The rate, in bytes of working set per second of the thread's CPU time (a probe
 * preempted by another process is not slowed by it), at which memcpy copies one half of
 * `bytes` onto the other, repeated to at least 4 MiB per measurement; the median of the
 * measurements made within PS_PROBE_S (at least five). memcpy is the C library's, the
 * same code in the tracer and in every skeleton on a machine, so the rate depends on the
 * memory and the caches only. 0 when the buffers cannot be allocated. */
static inline double ps_memory_probe(size_t bytes) {
    size_t half = bytes / 2;
    if (half == 0) return 0.0;
    char *a = malloc(half), *b = malloc(half);
    if (!a || !b) {
        free(a);
        free(b);
        return 0.0;
    }
    memset(a, 1, half);
    memset(b, 0, half);
    size_t reps = ((size_t)4 << 20) / bytes + 1;
    enum { MAX = 64 };
    double rates[MAX];
    int n = 0;
    double start = ps_probe_clock(CLOCK_MONOTONIC);
    while (n < MAX && (n < 5 || ps_probe_clock(CLOCK_MONOTONIC) - start < PS_PROBE_S)) {
        double t0 = ps_probe_clock(CLOCK_THREAD_CPUTIME_ID);
        for (size_t r = 0; r < reps; r++) {
            memcpy(b, a, half);
            ps_probe_sink = b[r % half];
        }
        double t1 = ps_probe_clock(CLOCK_THREAD_CPUTIME_ID);
        if (t1 > t0) rates[n++] = (double)bytes * (double)reps / (t1 - t0);
        else if (ps_probe_clock(CLOCK_MONOTONIC) - start > 10 * PS_PROBE_S) break;
    }
    free(a);
    free(b);
    /* The median (insertion sort: at most 64 values). */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && rates[j - 1] > rates[j]; j--) {
            double t = rates[j];
            rates[j] = rates[j - 1];
            rates[j - 1] = t;
        }
    return n > 0 ? rates[n / 2] : 0.0;
}

#endif /* PERFSKEL_MEMPROBE_H */
