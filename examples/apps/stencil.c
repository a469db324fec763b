/* 2D Jacobi stencil: a process grid from MPI_Cart_create (non-periodic, so border
 * neighbours are MPI_PROC_NULL), four MPI_Sendrecv halo exchanges and one MPI_Allreduce
 * of the residual per iteration.
 * Usage: stencil N ITERS   (N x N points per rank) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define AT(i, j) ((i) * (n + 2) + (j))

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 64;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    int size, dims[2] = {0, 0}, periods[2] = {0, 0};
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Dims_create(size, 2, dims);
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    int north, south, west, east;
    MPI_Cart_shift(grid, 0, 1, &north, &south);
    MPI_Cart_shift(grid, 1, 1, &west, &east);

    double *u = calloc((size_t)(n + 2) * (n + 2), sizeof(double));
    double *v = calloc((size_t)(n + 2) * (n + 2), sizeof(double));
    double *sendcol = malloc(sizeof(double) * n), *recvcol = malloc(sizeof(double) * n);
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= n; j++) u[AT(i, j)] = (double)((i * 7 + j * 13) % 17);

    double residual = 0.0;
    for (int it = 0; it < iters; it++) {
        /* Rows are contiguous: exchange them directly. */
        MPI_Sendrecv(&u[AT(1, 1)], n, MPI_DOUBLE, north, 0, &u[AT(n + 1, 1)], n, MPI_DOUBLE,
                     south, 0, grid, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[AT(n, 1)], n, MPI_DOUBLE, south, 1, &u[AT(0, 1)], n, MPI_DOUBLE,
                     north, 1, grid, MPI_STATUS_IGNORE);
        /* Columns are strided: pack them. */
        for (int i = 0; i < n; i++) sendcol[i] = u[AT(i + 1, 1)];
        MPI_Sendrecv(sendcol, n, MPI_DOUBLE, west, 2, recvcol, n, MPI_DOUBLE, east, 2, grid,
                     MPI_STATUS_IGNORE);
        if (east != MPI_PROC_NULL)
            for (int i = 0; i < n; i++) u[AT(i + 1, n + 1)] = recvcol[i];
        for (int i = 0; i < n; i++) sendcol[i] = u[AT(i + 1, n)];
        MPI_Sendrecv(sendcol, n, MPI_DOUBLE, east, 3, recvcol, n, MPI_DOUBLE, west, 3, grid,
                     MPI_STATUS_IGNORE);
        if (west != MPI_PROC_NULL)
            for (int i = 0; i < n; i++) u[AT(i + 1, 0)] = recvcol[i];

        double local = 0.0;
        for (int i = 1; i <= n; i++)
            for (int j = 1; j <= n; j++) {
                v[AT(i, j)] = 0.25 * (u[AT(i - 1, j)] + u[AT(i + 1, j)] + u[AT(i, j - 1)] +
                                      u[AT(i, j + 1)]);
                double d = v[AT(i, j)] - u[AT(i, j)];
                local += d * d;
            }
        double *t = u;
        u = v;
        v = t;
        MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, grid);
    }
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) printf("stencil: residual %.6e\n", residual);
    free(u);
    free(v);
    free(sendcol);
    free(recvcol);
    MPI_Comm_free(&grid);
    MPI_Finalize();
    return 0;
}
