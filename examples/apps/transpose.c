/* All-to-all transpose: a (size*B) x (size*B) matrix distributed by block rows is
 * transposed each iteration with one MPI_Alltoall of B x B blocks, then smoothed locally.
 * Usage: transpose B ITERS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int b = argc > 1 ? atoi(argv[1]) : 32;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t n = (size_t)b * b * size;
    double *a = malloc(sizeof(double) * n), *t = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) a[i] = (double)((i * 31 + (size_t)rank * 7) % 101);
    for (int it = 0; it < iters; it++) {
        /* Pack: block k holds the B x B tile destined for rank k, already transposed. */
        for (int k = 0; k < size; k++)
            for (int i = 0; i < b; i++)
                for (int j = 0; j < b; j++)
                    t[(size_t)k * b * b + (size_t)j * b + i] =
                        a[(size_t)i * b * size + (size_t)k * b + j];
        MPI_Alltoall(t, b * b, MPI_DOUBLE, a, b * b, MPI_DOUBLE, MPI_COMM_WORLD);
        for (size_t i = 1; i + 1 < n; i++) a[i] = 0.5 * a[i] + 0.25 * (a[i - 1] + a[i + 1]);
    }
    double local = 0.0, total = 0.0;
    for (size_t i = 0; i < n; i++) local += a[i];
    MPI_Reduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("transpose: sum %.6f\n", total);
    free(a);
    free(t);
    MPI_Finalize();
    return 0;
}
