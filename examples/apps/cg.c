/* CG-like solver of a 1D Laplacian split into contiguous blocks: each iteration does a
 * nonblocking halo exchange with the left and right neighbours (MPI_Irecv, MPI_Isend,
 * MPI_Waitall), a matrix-vector product and two MPI_Allreduce dot products.
 * Usage: cg N ITERS   (N unknowns per rank) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 4096;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    /* p has one ghost cell on each side. */
    double *x = calloc((size_t)n, sizeof(double)), *r = malloc(sizeof(double) * n);
    double *p = calloc((size_t)n + 2, sizeof(double)), *q = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) r[i] = p[i + 1] = 1.0;
    double rr_local = (double)n, rr;
    MPI_Allreduce(&rr_local, &rr, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int it = 0; it < iters; it++) {
        MPI_Request reqs[4];
        MPI_Status stats[4];
        MPI_Irecv(&p[0], 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &reqs[0]);
        MPI_Irecv(&p[n + 1], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &reqs[1]);
        MPI_Isend(&p[1], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &reqs[2]);
        MPI_Isend(&p[n], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &reqs[3]);
        MPI_Waitall(4, reqs, stats);
        double pq_local = 0.0, pq;
        for (int i = 0; i < n; i++) {
            q[i] = 2.0 * p[i + 1] - p[i] - p[i + 2];
            pq_local += p[i + 1] * q[i];
        }
        MPI_Allreduce(&pq_local, &pq, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double alpha = rr / pq, rr_new_local = 0.0, rr_new;
        for (int i = 0; i < n; i++) {
            x[i] += alpha * p[i + 1];
            r[i] -= alpha * q[i];
            rr_new_local += r[i] * r[i];
        }
        MPI_Allreduce(&rr_new_local, &rr_new, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double beta = rr_new / rr;
        rr = rr_new;
        for (int i = 0; i < n; i++) p[i + 1] = r[i] + beta * p[i + 1];
    }
    if (rank == 0) printf("cg: residual %.6e\n", rr);
    free(x);
    free(r);
    free(p);
    free(q);
    MPI_Finalize();
    return 0;
}
