/* A program built like a production LAMMPS: the MPI calls are in a shared library
 * (this file built with -DHALO_LIB as libhalo.so), the executable only drives it, and
 * both are stripped, so only the library's dynamic symbol table names functions. One
 * function has a C++ name (an asm label, so a C compiler suffices) and calls MPI twice;
 * a local function has no symbol left; main calls MPI from the stripped executable.
 * Not an example application. Usage: stripped_halo N ITERS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef HALO_LIB
void reverse_comm(double *buf, int n, int left, int right)
    __asm__("_ZN4halo4Comm12reverse_commEPdiii");
__attribute__((noinline)) void reverse_comm(double *buf, int n, int left, int right) {
    MPI_Sendrecv(buf, n, MPI_DOUBLE, left, 1, buf + n, n, MPI_DOUBLE, right, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(buf + 2 * n, n, MPI_DOUBLE, right, 2, buf + 3 * n, n, MPI_DOUBLE, left, 2,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* Work after the last call, so that it is not a tail call. */
    buf[0] += 0.5 * (buf[n] + buf[3 * n]);
}

__attribute__((noinline)) static double local_sum(double x) {
    double y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return y + 1.0;
}

double step(double *buf, int n, int left, int right) {
    reverse_comm(buf, n, left, right);
    return local_sum(buf[0]);
}
#else
extern double step(double *buf, int n, int left, int right);

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = argc > 1 ? atoi(argv[1]) : 16;
    int iters = argc > 2 ? atoi(argv[2]) : 3;
    if (n < 1) n = 1;
    double *buf = calloc(4 * (size_t)n, sizeof(double));
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < 4 * n; i++) buf[i] = rank + i;
    double total = 0;
    for (int it = 0; it < iters; it++)
        total += step(buf, n, (rank + size - 1) % size, (rank + 1) % size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("total %g\n", total);
    free(buf);
    MPI_Finalize();
    return 0;
}
#endif
