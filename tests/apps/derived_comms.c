/* Communicators derived from derived communicators, as real solvers make them: the
 * first q*q ranks (the largest square) split off MPI_COMM_WORLD (the others get
 * MPI_COMM_NULL through MPI_UNDEFINED), the solver duplicates that communicator, lays a
 * periodic q x q grid over the duplicate with MPI_Cart_create and takes its rows and
 * columns with MPI_Cart_sub; MPI_Comm_create makes a communicator of the even world
 * ranks. Every iteration exchanges with the grid's x neighbours, reduces along rows,
 * broadcasts down columns, reduces over the even ranks and ends in a world barrier.
 *
 * Usage: derived_comms N_DOUBLES ITERATIONS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 256;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int q = 1;
    while ((q + 1) * (q + 1) <= size)
        q++;

    MPI_Comm active = MPI_COMM_NULL, solver = MPI_COMM_NULL, grid = MPI_COMM_NULL;
    MPI_Comm row = MPI_COMM_NULL, col = MPI_COMM_NULL, evens = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, rank < q * q ? 1 : MPI_UNDEFINED, rank, &active);
    if (active != MPI_COMM_NULL) {
        MPI_Comm_dup(active, &solver);
        int dims[2] = {q, q}, periods[2] = {1, 1};
        MPI_Cart_create(solver, 2, dims, periods, 0, &grid);
        int keep_row[2] = {0, 1}, keep_col[2] = {1, 0};
        MPI_Cart_sub(grid, keep_row, &row);
        MPI_Cart_sub(grid, keep_col, &col);
    }
    MPI_Group world_group, even_group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    int n_even = (size + 1) / 2;
    int *evens_list = malloc(sizeof(int) * (size_t)n_even);
    for (int i = 0; i < n_even; i++)
        evens_list[i] = 2 * i;
    MPI_Group_incl(world_group, n_even, evens_list, &even_group);
    MPI_Comm_create(MPI_COMM_WORLD, even_group, &evens);

    double *a = calloc((size_t)n, sizeof(double));
    double *b = calloc((size_t)n, sizeof(double));
    double sum = 0.0, total = 0.0;
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < n; i++)
            a[i] = a[i] * 0.5 + (double)(i + it + rank);
        if (grid != MPI_COMM_NULL) {
            int west, east;
            MPI_Cart_shift(grid, 0, 1, &west, &east);
            MPI_Sendrecv(a, n, MPI_DOUBLE, east, 1, b, n, MPI_DOUBLE, west, 1, grid,
                         MPI_STATUS_IGNORE);
            sum = b[0];
            MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, row);
            MPI_Bcast(b, n / 4, MPI_DOUBLE, 0, col);
        }
        if (evens != MPI_COMM_NULL)
            MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_MAX, evens);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("q=%d total=%g\n", q, total);
    free(a);
    free(b);
    free(evens_list);
    MPI_Finalize();
    return 0;
}
