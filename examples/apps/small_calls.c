/* Many small MPI calls in a regular nest, to make very long traces (the 100 M-event
 * trace of scripts/bench-stream.sh): every outer iteration does INNER nonblocking
 * exchanges with both ring neighbours (MPI_Irecv, MPI_Isend, MPI_Waitall of 8 bytes),
 * a little compute, then an 8-byte MPI_Allreduce: 3 * INNER + 1 events per outer
 * iteration and rank.
 * Usage: small_calls OUTER INNER */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long outer = argc > 1 ? atol(argv[1]) : 1000;
    int inner = argc > 2 ? atoi(argv[2]) : 10;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    double out = rank, in = 0.0, acc = 0.0, sum = 0.0;
    MPI_Request reqs[2];
    MPI_Status stats[2]; /* not MPI_STATUSES_IGNORE: GCC's -Wstringop-overflow trips on it with MPICH */
    for (long it = 0; it < outer; it++) {
        for (int k = 0; k < inner; k++) {
            MPI_Irecv(&in, 1, MPI_DOUBLE, prev, 0, MPI_COMM_WORLD, &reqs[0]);
            MPI_Isend(&out, 1, MPI_DOUBLE, next, 0, MPI_COMM_WORLD, &reqs[1]);
            MPI_Waitall(2, reqs, stats);
            out = 0.5 * (out + in);
        }
        for (int i = 0; i < 64; i++) acc += 1.0 / (1.0 + acc + i);
        MPI_Allreduce(&acc, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        acc = sum / size;
    }
    if (rank == 0) printf("small_calls: %ld x %d exchanges, sum %.6f\n", outer, inner, sum);
    MPI_Finalize();
    return 0;
}
