/* A run killed in the middle (issue 19): a periodic 1-D halo exchange (MPI_Sendrecv with
 * both neighbours, blocking) with an MPI_Allreduce every 10 iterations and some compute
 * per iteration; at iteration KILL_AT rank 1 sends itself SIGKILL, which no handler
 * sees: the tracer loses what it had not flushed (up to a second of events), and the
 * launcher kills the other ranks, which were blocked waiting for rank 1. The ranks' traces
 * then stop at different iterations.
 *
 * Usage: killed ITERATIONS KILL_AT COMPUTE_US (any number of ranks, at least 2) */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int iterations = argc > 1 ? atoi(argv[1]) : 200;
    int kill_at = argc > 2 ? atoi(argv[2]) : 150;
    double compute_s = (argc > 3 ? atof(argv[3]) : 5000.0) * 1e-6;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    double halo_out[512] = {0}, halo_in[512], sum = 0.0;
    for (int it = 0; it < iterations; it++) {
        if (rank == 1 && it == kill_at) raise(SIGKILL);
        double until = now() + compute_s;
        while (now() < until) sum += 1e-9;
        MPI_Sendrecv(halo_out, 512, MPI_DOUBLE, right, 1, halo_in, 512, MPI_DOUBLE, left, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(halo_out, 512, MPI_DOUBLE, left, 2, halo_in, 512, MPI_DOUBLE, right, 2,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        halo_out[it % 512] = halo_in[(it + 1) % 512] + sum;
        if (it % 10 == 9) MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    if (rank == 0) printf("sum %g\n", sum);
    MPI_Finalize();
    return 0;
}
