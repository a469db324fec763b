/* Ring pipeline: rank 0 produces a block each iteration, every rank receives it from its
 * left neighbour, transforms it and sends it to its right neighbour; the last rank
 * consumes it. A final MPI_Reduce gathers a checksum at rank 0.
 * Usage: ring N ITERS [CRASH_ITER]   (N doubles per block; with CRASH_ITER, rank 1 dies
 * of SIGSEGV at the start of that iteration, to test traces of crashed runs) */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    int crash_iter = argc > 3 ? atoi(argv[3]) : -1;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double *block = malloc(sizeof(double) * n);
    double checksum = 0.0, total = 0.0;
    for (int it = 0; it < iters; it++) {
        if (rank == 1 && it == crash_iter) raise(SIGSEGV);
        if (rank == 0)
            for (int i = 0; i < n; i++) block[i] = (double)(i + it);
        else
            MPI_Recv(block, n, MPI_DOUBLE, rank - 1, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int k = 0; k < 8; k++)
            for (int i = 0; i < n; i++) block[i] = block[i] * 0.5 + 1.0 / (1.0 + block[i]);
        if (rank < size - 1)
            MPI_Send(block, n, MPI_DOUBLE, rank + 1, it, MPI_COMM_WORLD);
        else
            for (int i = 0; i < n; i++) checksum += block[i];
    }
    MPI_Reduce(&checksum, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("ring: checksum %.6f\n", total);
    free(block);
    MPI_Finalize();
    return 0;
}
