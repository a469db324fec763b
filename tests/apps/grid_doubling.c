/* The communication of a conjugate-gradient solver on a 2-D process grid, as codes that
 * distribute a sparse matrix over a grid of 2^k ranks write it by hand: the ranks form
 * NPROWS x NPCOLS (NPCOLS = NPROWS or 2 * NPROWS, row-major); each iteration sums the
 * partial products over the row by recursive doubling (MPI_Irecv, MPI_Send, MPI_Wait
 * with rank ^ 1, rank ^ 2, ... up to the row length), exchanges the result with the
 * transpose partner (ranks on the diagonal, their own partner, skip it), then sums a dot
 * product over the row by recursive doubling again. Everything is on MPI_COMM_WORLD with
 * partners computed from the rank, as such codes do.
 *
 * Usage: grid_doubling N ITERS
 * Prints the sum of the dot products. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    int iters = argc > 2 ? atoi(argv[2]) : 50;
    int log2p = 0;
    while ((1 << log2p) < size) log2p++;
    int npcols = 1 << ((log2p + 1) / 2), nprows = size / npcols;
    int row = rank / npcols, col = rank % npcols;
    /* The transpose partner: (col, row) on a square grid; on a 2:1 grid, the rank whose
     * pair of columns holds this rank's row. */
    int tp;
    if (npcols == nprows)
        tp = col * npcols + row;
    else
        tp = (col / 2) * npcols + 2 * row + (col % 2);
    if (n < 8 || iters < 1 || (1 << log2p) != size) {
        if (rank == 0) fprintf(stderr, "usage: grid_doubling N>=8 ITERS>=1, on 2^k ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double *x = malloc(sizeof(double) * n);
    double *w = malloc(sizeof(double) * n);
    double *r = malloc(sizeof(double) * n);
    if (!x || !w || !r) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < n; i++) x[i] = 1.0 + (rank + i) % 7;
    MPI_Status st;
    double sum = 0;
    for (int it = 0; it < iters; it++) {
        for (int rep = 0; rep < 30; rep++)
            for (int i = 1; i < n - 1; i++) w[i] = 0.5 * x[i] + 0.25 * (x[i - 1] + x[i + 1]);
        for (int j = 0; (1 << j) < npcols; j++) {
            int p = rank ^ (1 << j);
            MPI_Request q;
            MPI_Irecv(r, n / 4, MPI_DOUBLE, p, j, MPI_COMM_WORLD, &q);
            MPI_Send(w, n / 4, MPI_DOUBLE, p, j, MPI_COMM_WORLD);
            MPI_Wait(&q, &st);
            for (int i = 0; i < n / 4; i++) w[i] += r[i];
        }
        if (tp != rank) {
            MPI_Request q;
            MPI_Irecv(r, n / 4, MPI_DOUBLE, tp, 100, MPI_COMM_WORLD, &q);
            MPI_Send(w, n / 4, MPI_DOUBLE, tp, 100, MPI_COMM_WORLD);
            MPI_Wait(&q, &st);
        }
        double d = 0, e;
        for (int i = 0; i < n; i++) d += w[i] * x[i];
        for (int j = 0; (1 << j) < npcols; j++) {
            int p = rank ^ (1 << j);
            MPI_Request q;
            MPI_Irecv(&e, 1, MPI_DOUBLE, p, 200 + j, MPI_COMM_WORLD, &q);
            MPI_Send(&d, 1, MPI_DOUBLE, p, 200 + j, MPI_COMM_WORLD);
            MPI_Wait(&q, &st);
            d += e;
        }
        sum += d;
        for (int i = 0; i < n; i++) x[i] = w[i] / (1.0 + 1e-9 * d);
    }
    if (rank == 0) printf("%g\n", sum);
    free(x);
    free(w);
    free(r);
    MPI_Finalize();
    return 0;
}
