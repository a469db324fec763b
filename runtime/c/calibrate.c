/* calibrate.c: the ping-pong program `perfskel calibrate` builds and runs on 2 or more
 * ranks. Ranks 0 and 1 bounce messages of growing size; every size is timed in several
 * rounds and the median half round trip is printed (with the fastest and slowest
 * round), then the time of MPI_Comm_split, then the eager limit: rank 0 sends a message
 * of each size while rank 1 waits DELAY before it posts the receive; a send that
 * returns well before DELAY was buffered (eager), one that waited for the receive was
 * not (rendezvous). Rank 0 prints lines `pingpong bytes=B seconds=S fastest=F
 * slowest=L`, `comm_split seconds=S` and `eager bytes=B send_seconds=S delay=D`. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int max_bytes = 4 << 20;
    char *buf = calloc(max_bytes, 1);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    enum { ROUNDS = 7 };
    double t[ROUNDS];
    for (int bytes = 0; bytes <= max_bytes; bytes = bytes == 0 ? 8 : bytes * 4) {
        int reps = bytes <= 4096 ? 500 : bytes <= 262144 ? 60 : 12;
        for (int round = 0; round < ROUNDS; round++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < reps; i++) {
                if (rank == 0) {
                    MPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                    MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else if (rank == 1) {
                    MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
                }
            }
            t[round] = (MPI_Wtime() - t0) / (2.0 * reps);
        }
        qsort(t, ROUNDS, sizeof t[0], cmp);
        if (rank == 0)
            printf("pingpong bytes=%d seconds=%.9e fastest=%.9e slowest=%.9e\n", bytes,
                   t[ROUNDS / 2], t[0], t[ROUNDS - 1]);
    }
    for (int round = 0; round < ROUNDS; round++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Comm c;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &c);
        MPI_Comm_free(&c);
        t[round] = MPI_Wtime() - t0;
    }
    qsort(t, ROUNDS, sizeof t[0], cmp);
    if (rank == 0) printf("comm_split seconds=%.9e\n", t[ROUNDS / 2]);
    const double delay = 2e-3;
    for (int bytes = 16; bytes <= 1 << 20; bytes *= 2) {
        for (int round = 0; round < ROUNDS; round++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (rank == 0) {
                MPI_Send(buf, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                t[round] = MPI_Wtime() - t0;
            } else if (rank == 1) {
                while (MPI_Wtime() - t0 < delay) {
                }
                MPI_Recv(buf, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        }
        qsort(t, ROUNDS, sizeof t[0], cmp);
        if (rank == 0)
            printf("eager bytes=%d send_seconds=%.9e delay=%.9e\n", bytes, t[ROUNDS / 2], delay);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
