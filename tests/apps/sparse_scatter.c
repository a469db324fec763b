/* The ghost exchange of an unstructured sparse matrix-vector product, as PETSc's
 * VecScatter, graph partitioners and FFT remaps do it by hand: the rows of the matrix
 * are partitioned over the ranks, and each rank needs the vector entries of the ranks
 * its rows couple to. The coupling graph comes from the mesh (here a fixed pseudo-random
 * graph over the ranks, plus a chain that keeps it connected), so ranks have different
 * numbers of partners and partners are not grid neighbours. Each iteration: post an
 * MPI_Irecv from every partner on a duplicate of MPI_COMM_WORLD (libraries duplicate the
 * communicator they are given), pack and MPI_Send to every partner, MPI_Waitall, the
 * local product, then a dot product (MPI_Allreduce). Every ITERS/4 iterations the vector
 * is also smoothed along a ring (MPI_Irecv/MPI_Isend with both ring neighbours on the
 * world): a regular halo next to the irregular scatter. With BLOCKS > 1 each partner's
 * ghosts go as that many messages (one per field, as codes that send coordinates,
 * velocities and ids apart do), so a rank has up to BLOCKS x its partners on each side.
 *
 * Usage: sparse_scatter ROWS_PER_RANK ITERS [BLOCKS (1..8, default 1)]
 * Prints the final norm. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_PARTNERS 64
#define MAX_BLOCKS 8

/* Whether ranks a < b are coupled: a chain, plus pseudo-random long-range couplings. */
static int coupled(int a, int b) {
    if (a > b) {
        int t = a;
        a = b;
        b = t;
    }
    if (b == a + 1) return 1;
    return b > a + 1 && (((unsigned)a * 73856093u) ^ ((unsigned)b * 19349663u)) % 97u < 15u;
}

/* Entries a rank sends to its partner (the same both ways). */
static int ghosts(int a, int b) {
    if (a > b) {
        int t = a;
        a = b;
        b = t;
    }
    return 100 + (a * 31 + b * 17) % 200;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rows = argc > 1 ? atoi(argv[1]) : 20000;
    int iters = argc > 2 ? atoi(argv[2]) : 50;
    int blocks = argc > 3 ? atoi(argv[3]) : 1;
    if (rows < 300 || iters < 1 || blocks < 1 || blocks > MAX_BLOCKS) {
        if (rank == 0)
            fprintf(stderr, "usage: sparse_scatter ROWS_PER_RANK>=300 ITERS>=1 [BLOCKS 1..8]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm scatter;
    MPI_Comm_dup(MPI_COMM_WORLD, &scatter);

    int partners[MAX_PARTNERS], n = 0;
    for (int q = 0; q < size && n < MAX_PARTNERS; q++)
        if (q != rank && coupled(rank, q)) partners[n++] = q;

    double *x = malloc(sizeof(double) * (size_t)rows);
    double *y = malloc(sizeof(double) * (size_t)rows);
    double *out = malloc(sizeof(double) * 300 * MAX_PARTNERS);
    double *in = malloc(sizeof(double) * 300 * MAX_PARTNERS);
    double edge[2], halo[2];
    if (!x || !y || !out || !in) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < rows; i++) x[i] = 1.0 + (double)((rank * 7 + i) % 13) / 13.0;

    MPI_Request reqs[MAX_PARTNERS * MAX_BLOCKS + 4];
    MPI_Status statuses[MAX_PARTNERS * MAX_BLOCKS + 4];
    double norm = 0.0;
    for (int it = 0; it < iters; it++) {
        /* Block b of a partner's g ghosts: entries [g*b/blocks, g*(b+1)/blocks). */
        for (int k = 0; k < n; k++) {
            int g = ghosts(rank, partners[k]);
            for (int b = 0; b < blocks; b++) {
                int lo = g * b / blocks, hi = g * (b + 1) / blocks;
                MPI_Irecv(in + 300 * k + lo, hi - lo, MPI_DOUBLE, partners[k], b, scatter,
                          &reqs[k * blocks + b]);
            }
        }
        for (int k = 0; k < n; k++) {
            int g = ghosts(rank, partners[k]);
            for (int i = 0; i < g; i++) out[300 * k + i] = x[(i * 37 + partners[k]) % rows];
            for (int b = 0; b < blocks; b++) {
                int lo = g * b / blocks, hi = g * (b + 1) / blocks;
                MPI_Send(out + 300 * k + lo, hi - lo, MPI_DOUBLE, partners[k], b, scatter);
            }
        }
        MPI_Waitall(n * blocks, reqs, statuses);
        /* The local product: a banded stencil plus the ghosts. */
        for (int rep = 0; rep < 20; rep++)
            for (int i = 1; i < rows - 1; i++) y[i] = 0.5 * x[i] + 0.25 * (x[i - 1] + x[i + 1]);
        for (int k = 0; k < n; k++)
            for (int i = 0; i < ghosts(rank, partners[k]); i++)
                y[(i * 11 + k) % rows] += 1e-3 * in[300 * k + i];
        double local = 0.0, dot = 0.0;
        for (int i = 0; i < rows; i++) local += y[i] * y[i];
        MPI_Allreduce(&local, &dot, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double scale = 1.0 / (1.0 + 1e-9 * dot);
        for (int i = 0; i < rows; i++) x[i] = y[i] * scale + 0.5;
        norm = dot;
        if (iters >= 4 && it % (iters / 4) == 0) {
            int next = (rank + 1) % size, prev = (rank + size - 1) % size;
            edge[0] = x[0];
            edge[1] = x[rows - 1];
            MPI_Irecv(&halo[0], 1, MPI_DOUBLE, prev, 1, MPI_COMM_WORLD, &reqs[0]);
            MPI_Irecv(&halo[1], 1, MPI_DOUBLE, next, 1, MPI_COMM_WORLD, &reqs[1]);
            MPI_Isend(&edge[1], 1, MPI_DOUBLE, next, 1, MPI_COMM_WORLD, &reqs[2]);
            MPI_Isend(&edge[0], 1, MPI_DOUBLE, prev, 1, MPI_COMM_WORLD, &reqs[3]);
            MPI_Waitall(4, reqs, statuses);
            x[0] = 0.5 * (x[0] + halo[0]);
            x[rows - 1] = 0.5 * (x[rows - 1] + halo[1]);
        }
    }
    if (rank == 0) printf("norm %.6e\n", norm);
    MPI_Comm_free(&scatter);
    free(x);
    free(y);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
