/* The ghost exchange of a 3-D domain decomposition as molecular-dynamics and grid codes
 * write it (LAMMPS's CommBrick, many CFD solvers): the ranks form a periodic
 * MPI_Dims_create grid (MPI_Cart_create); each step exchanges along x, then y, then z,
 * two swaps per dimension (send to the +1 neighbour and receive from the -1 one, then the
 * reverse), each swap packing the face (compute in proportion to its size), posting
 * MPI_Irecv, MPI_Send and MPI_Wait. The local box is NX x NY x NZ cells, so the three
 * dimensions' faces differ in size. After the exchange, interior work; every 10th step
 * an MPI_Allreduce of a diagnostic.
 *
 * Usage: halo_dims NX NY NZ STEPS
 * Prints the last diagnostic. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double work(double *a, long n, int reps) {
    double s = 0.0;
    for (int r = 0; r < reps; r++)
        for (long i = 0; i < n; i++) {
            a[i] = a[i] * 0.999 + 0.001 * (double)(i % 7);
            s += a[i];
        }
    return s;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long nx = argc > 1 ? atol(argv[1]) : 24;
    long ny = argc > 2 ? atol(argv[2]) : 16;
    long nz = argc > 3 ? atol(argv[3]) : 12;
    int steps = argc > 4 ? atoi(argv[4]) : 40;
    if (nx < 2 || ny < 2 || nz < 2 || steps < 1) {
        fprintf(stderr, "usage: halo_dims NX>=2 NY>=2 NZ>=2 STEPS>=1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1};
    MPI_Dims_create(size, 3, dims);
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &grid);
    MPI_Comm_rank(grid, &rank);
    long face[3] = {ny * nz, nx * nz, nx * ny};
    long most = face[0] > face[1] ? face[0] : face[1];
    most = most > face[2] ? most : face[2];
    double *sendbuf = calloc((size_t)most, sizeof(double));
    double *recvbuf = calloc((size_t)most, sizeof(double));
    long cells = nx * ny * nz;
    double *field = calloc((size_t)cells, sizeof(double));
    if (!sendbuf || !recvbuf || !field) MPI_Abort(MPI_COMM_WORLD, 3);
    double diag = 0.0;
    for (int step = 0; step < steps; step++) {
        for (int d = 0; d < 3; d++) {
            int minus, plus;
            MPI_Cart_shift(grid, d, 1, &minus, &plus);
            for (int side = 0; side < 2; side++) {
                int to = side == 0 ? plus : minus, from = side == 0 ? minus : plus;
                for (long i = 0; i < face[d]; i++) sendbuf[i] = field[(i * 7) % cells];
                work(sendbuf, face[d], 4);
                MPI_Request req;
                MPI_Irecv(recvbuf, (int)face[d], MPI_DOUBLE, from, 0, grid, &req);
                MPI_Send(sendbuf, (int)face[d], MPI_DOUBLE, to, 0, grid);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
                for (long i = 0; i < face[d]; i++) field[(i * 11) % cells] += 1e-3 * recvbuf[i];
            }
        }
        double local = work(field, cells, 2);
        if (step % 10 == 9) MPI_Allreduce(&local, &diag, 1, MPI_DOUBLE, MPI_SUM, grid);
    }
    if (rank == 0) printf("%g\n", diag);
    free(sendbuf);
    free(recvbuf);
    free(field);
    MPI_Comm_free(&grid);
    MPI_Finalize();
    return 0;
}
