/* Tree reduction: each iteration every rank computes a partial sum, receives the partial
 * sums of its children 2r+1 and 2r+2 in a binary tree (explicit MPI_Recv), adds them and
 * sends the result to its parent (r-1)/2; the root then broadcasts the total.
 * Usage: tree_reduce N ITERS   (N terms per rank) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double total = 0.0;
    for (int it = 0; it < iters; it++) {
        double sum = 0.0;
        for (long i = 0; i < n; i++) {
            double x = (double)(rank * n + i + it);
            sum += 1.0 / (1.0 + x * x);
        }
        for (int child = 2 * rank + 1; child <= 2 * rank + 2 && child < size; child++) {
            double part;
            MPI_Recv(&part, 1, MPI_DOUBLE, child, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            sum += part;
        }
        if (rank > 0) MPI_Send(&sum, 1, MPI_DOUBLE, (rank - 1) / 2, it, MPI_COMM_WORLD);
        else total = sum;
        MPI_Bcast(&total, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    }
    if (rank == 0) printf("tree_reduce: total %.6f\n", total);
    MPI_Finalize();
    return 0;
}
