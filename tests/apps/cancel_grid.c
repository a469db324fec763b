/* A declared process grid and cancelled receives, as HPC codes use them: a 2-D grid from
 * MPI_Dims_create and MPI_Cart_create (periodic in dimension 0 only), neighbours from
 * MPI_Cart_shift, and every iteration a halo exchange in both dimensions (Sendrecv; the
 * non-periodic dimension's borders send to MPI_PROC_NULL) and an MPI_Allreduce. Each
 * iteration also posts a receive from MPI_ANY_SOURCE that no message ever matches (a
 * server loop's last receive, as HPCC's RandomAccess leaves one), cancels it with
 * MPI_Cancel and completes it with MPI_Wait: the receive gets no message.
 *
 * Usage: cancel_grid N_DOUBLES ITERATIONS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 64;
    int iters = argc > 2 ? atoi(argv[2]) : 4;
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int dims[2] = {0, 0}, periods[2] = {1, 0};
    MPI_Dims_create(size, 2, dims);
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    int nb[2][2];
    MPI_Cart_shift(grid, 0, 1, &nb[0][0], &nb[0][1]);
    MPI_Cart_shift(grid, 1, 1, &nb[1][0], &nb[1][1]);

    double *out = calloc((size_t)n, sizeof(double));
    double *in = calloc((size_t)n, sizeof(double));
    double never[4];
    int cancelled_all = 1;
    for (int it = 0; it < iters; it++) {
        MPI_Request pending;
        MPI_Irecv(never, 4, MPI_DOUBLE, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &pending);
        for (int d = 0; d < 2; d++) {
            MPI_Sendrecv(out, n, MPI_DOUBLE, nb[d][1], d, in, n, MPI_DOUBLE, nb[d][0], d, grid,
                         MPI_STATUS_IGNORE);
            MPI_Sendrecv(out, n, MPI_DOUBLE, nb[d][0], 2 + d, in, n, MPI_DOUBLE, nb[d][1],
                         2 + d, grid, MPI_STATUS_IGNORE);
        }
        double x = (double)it, sum = 0.0;
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Status st;
        MPI_Cancel(&pending);
        MPI_Wait(&pending, &st);
        int flag = 0;
        MPI_Test_cancelled(&st, &flag);
        cancelled_all &= flag;
    }
    if (!cancelled_all) fprintf(stderr, "cancel_grid: a receive was not cancelled\n");
    MPI_Comm_free(&grid);
    free(out);
    free(in);
    MPI_Finalize();
    return cancelled_all ? 0 : 1;
}
