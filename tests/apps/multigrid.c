/* A geometric multigrid V-cycle on a 3-D grid, as Poisson solvers write it: the ranks
 * form a periodic MPI_Dims_create grid (MPI_Cart_create), each owning an N^3 box of the
 * finest level (N a power of two); level l has (N / 2^l)^3 cells, down to 2^3. A cycle
 * goes down: smooth, exchange the six ghost faces, compute the residual, restrict it to
 * the next coarser level; on the coarsest level one MPI_Allreduce (a global correction);
 * then up: prolongate, exchange the faces, smooth. Face exchanges post six MPI_Irecv and
 * six MPI_Isend and complete them with MPI_Waitall; face sizes shrink by four at each
 * level, so the same call sites carry messages from a few hundred kilobytes to a few
 * bytes. After each cycle the residual norm is summed (MPI_Allreduce).
 *
 * Usage: multigrid N CYCLES
 * Prints the last residual norm. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_LEVELS 12

typedef struct {
    long n;     /* cells along each dimension */
    double *u;  /* (n + 2)^3 values with a ghost layer */
    double *r;  /* residual, n^3 */
} Level;

static long at(long n, long i, long j, long k) { return (i * (n + 2) + j) * (n + 2) + k; }

static MPI_Comm grid;
static double *face_out[6], *face_in[6];

/* Exchanges the six faces of a level's box with the neighbours along x, y and z. */
static void exchange(Level *lv) {
    long n = lv->n, f = n * n;
    MPI_Request reqs[12];
    for (int d = 0; d < 3; d++) {
        int minus, plus;
        MPI_Cart_shift(grid, d, 1, &minus, &plus);
        for (int side = 0; side < 2; side++) {
            int slot = 2 * d + side;
            long plane = side == 0 ? 1 : n;
            for (long a = 0; a < n; a++)
                for (long b = 0; b < n; b++) {
                    long idx = d == 0   ? at(n, plane, a + 1, b + 1)
                               : d == 1 ? at(n, a + 1, plane, b + 1)
                                        : at(n, a + 1, b + 1, plane);
                    face_out[slot][a * n + b] = lv->u[idx];
                }
            int from = side == 0 ? plus : minus, to = side == 0 ? minus : plus;
            MPI_Irecv(face_in[slot], (int)f, MPI_DOUBLE, from, slot, grid, &reqs[slot]);
            MPI_Isend(face_out[slot], (int)f, MPI_DOUBLE, to, slot, grid, &reqs[6 + slot]);
        }
    }
    MPI_Waitall(12, reqs, MPI_STATUSES_IGNORE);
    for (int slot = 0; slot < 6; slot++) {
        int d = slot / 2, side = slot % 2;
        long plane = side == 0 ? n + 1 : 0;
        for (long a = 0; a < n; a++)
            for (long b = 0; b < n; b++) {
                long idx = d == 0   ? at(n, plane, a + 1, b + 1)
                           : d == 1 ? at(n, a + 1, plane, b + 1)
                                    : at(n, a + 1, b + 1, plane);
                lv->u[idx] = face_in[slot][a * n + b];
            }
    }
}

/* A weighted Jacobi sweep (in place, Gauss-Seidel-like order), `sweeps` times. */
static void smooth(Level *lv, int sweeps) {
    long n = lv->n;
    for (int s = 0; s < sweeps; s++)
        for (long i = 1; i <= n; i++)
            for (long j = 1; j <= n; j++)
                for (long k = 1; k <= n; k++) {
                    double sum = lv->u[at(n, i - 1, j, k)] + lv->u[at(n, i + 1, j, k)] +
                                 lv->u[at(n, i, j - 1, k)] + lv->u[at(n, i, j + 1, k)] +
                                 lv->u[at(n, i, j, k - 1)] + lv->u[at(n, i, j, k + 1)];
                    lv->u[at(n, i, j, k)] = 0.8 * lv->u[at(n, i, j, k)] + 0.2 * sum / 6.0;
                }
}

static double residual(Level *lv) {
    long n = lv->n;
    double norm = 0.0;
    for (long i = 1; i <= n; i++)
        for (long j = 1; j <= n; j++)
            for (long k = 1; k <= n; k++) {
                double v = 6.0 * lv->u[at(n, i, j, k)] - lv->u[at(n, i - 1, j, k)] -
                           lv->u[at(n, i + 1, j, k)] - lv->u[at(n, i, j - 1, k)] -
                           lv->u[at(n, i, j + 1, k)] - lv->u[at(n, i, j, k - 1)] -
                           lv->u[at(n, i, j, k + 1)];
                lv->r[((i - 1) * n + (j - 1)) * n + (k - 1)] = v;
                norm += v * v;
            }
    return norm;
}

/* The coarse level's values: the mean of each 2x2x2 block of the fine residual. */
static void restrict_to(Level *fine, Level *coarse) {
    long n = coarse->n, m = fine->n;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++)
            for (long k = 0; k < n; k++) {
                double s = 0.0;
                for (int a = 0; a < 8; a++)
                    s += fine->r[((2 * i + (a >> 2)) * m + 2 * j + ((a >> 1) & 1)) * m + 2 * k +
                                 (a & 1)];
                coarse->u[at(n, i + 1, j + 1, k + 1)] = s / 8.0;
            }
}

/* Adds the coarse level's values to the fine level's, each to its 2x2x2 block. */
static void prolongate(Level *coarse, Level *fine) {
    long n = coarse->n, m = fine->n;
    for (long i = 1; i <= m; i++)
        for (long j = 1; j <= m; j++)
            for (long k = 1; k <= m; k++)
                fine->u[at(m, i, j, k)] +=
                    0.5 * coarse->u[at(n, (i + 1) / 2, (j + 1) / 2, (k + 1) / 2)];
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long n = argc > 1 ? atol(argv[1]) : 32;
    int cycles = argc > 2 ? atoi(argv[2]) : 10;
    if (n < 4 || (n & (n - 1)) != 0 || n > 1024 || cycles < 1) {
        fprintf(stderr, "usage: multigrid N CYCLES (N a power of two, 4..1024)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1};
    MPI_Dims_create(size, 3, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &grid);
    MPI_Comm_rank(grid, &rank);
    Level levels[MAX_LEVELS];
    int depth = 0;
    for (long m = n; m >= 2 && depth < MAX_LEVELS; m /= 2) {
        levels[depth].n = m;
        levels[depth].u = calloc((size_t)((m + 2) * (m + 2) * (m + 2)), sizeof(double));
        levels[depth].r = calloc((size_t)(m * m * m), sizeof(double));
        if (!levels[depth].u || !levels[depth].r) MPI_Abort(MPI_COMM_WORLD, 3);
        depth++;
    }
    for (int s = 0; s < 6; s++) {
        face_out[s] = calloc((size_t)(n * n), sizeof(double));
        face_in[s] = calloc((size_t)(n * n), sizeof(double));
        if (!face_out[s] || !face_in[s]) MPI_Abort(MPI_COMM_WORLD, 3);
    }
    /* A point source per rank. */
    levels[0].u[at(n, n / 2, n / 2, n / 2)] = 1.0 + rank;
    double norm = 0.0;
    for (int c = 0; c < cycles; c++) {
        for (int l = 0; l + 1 < depth; l++) {
            smooth(&levels[l], 2);
            exchange(&levels[l]);
            residual(&levels[l]);
            restrict_to(&levels[l], &levels[l + 1]);
        }
        Level *coarsest = &levels[depth - 1];
        double local = residual(coarsest), global = 0.0;
        MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, grid);
        coarsest->u[at(coarsest->n, 1, 1, 1)] -= 1e-3 * global;
        for (int l = depth - 2; l >= 0; l--) {
            prolongate(&levels[l + 1], &levels[l]);
            exchange(&levels[l]);
            smooth(&levels[l], 2);
        }
        exchange(&levels[0]);
        double mine = residual(&levels[0]);
        MPI_Allreduce(&mine, &norm, 1, MPI_DOUBLE, MPI_SUM, grid);
    }
    if (rank == 0) printf("residual norm %.6e after %d cycles\n", norm, cycles);
    for (int l = 0; l < depth; l++) {
        free(levels[l].u);
        free(levels[l].r);
    }
    for (int s = 0; s < 6; s++) {
        free(face_out[s]);
        free(face_in[s]);
    }
    MPI_Comm_free(&grid);
    MPI_Finalize();
    return 0;
}
