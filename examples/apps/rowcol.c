/* Row and column communicators: ranks form an R x C grid (R = largest divisor of size not
 * above its square root); MPI_Comm_split builds one communicator per row and per column.
 * Each iteration sums a local vector along the row (MPI_Allreduce on the row
 * communicator) and broadcasts the row leader's result down the column (MPI_Bcast).
 * Usage: rowcol N ITERS   (N doubles per rank) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rows = 1;
    for (int r = 1; r * r <= size; r++)
        if (size % r == 0) rows = r;
    int cols = size / rows;
    MPI_Comm row, col;
    MPI_Comm_split(MPI_COMM_WORLD, rank / cols, rank % cols, &row);
    MPI_Comm_split(MPI_COMM_WORLD, rank % cols, rank / cols, &col);
    double *v = malloc(sizeof(double) * n), *s = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) v[i] = (double)(rank + i);
    for (int it = 0; it < iters; it++) {
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < n; i++) v[i] = 0.5 * v[i] + 1.0 / (2.0 + v[i]);
        MPI_Allreduce(v, s, n, MPI_DOUBLE, MPI_SUM, row);
        MPI_Bcast(s, n, MPI_DOUBLE, 0, col);
        for (int i = 0; i < n; i++) v[i] += 1e-3 * s[i];
    }
    if (rank == 0) printf("rowcol: %d x %d, s[0] %.6f\n", rows, cols, s[0]);
    free(v);
    free(s);
    MPI_Comm_free(&row);
    MPI_Comm_free(&col);
    MPI_Finalize();
    return 0;
}
