/* Ranks that share one core: each round, every rank computes 20 ms of its own CPU time
 * at once (so the ranks on a core take turns), then all meet in a barrier. The tracer
 * must tell the compute (20 ms a round) from the wait for the core.
 * Usage: core_share ROUNDS */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    volatile double x = 1.0;
    for (int r = 0; r < rounds; r++) {
        double until = cpu_now() + 0.020;
        while (cpu_now() < until)
            for (int i = 0; i < 10000; i++) x = x * 1.0000001 + 1e-9;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) printf("core_share: %d rounds (%g)\n", rounds, x);
    MPI_Finalize();
    return 0;
}
