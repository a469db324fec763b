/* Runs of failed polls (trace format 7): each even rank posts a receive its odd partner
 * sends only when told to, and meanwhile polls it POLLS times with each of MPI_Test,
 * MPI_Iprobe, MPI_Testany, MPI_Testall and MPI_Testsome, a little work between calls,
 * so every one of those calls fails; then it tells the partner to send and tests until
 * the message is there. Then the same with MPI_Testany over 10 receives (more than the
 * tracer's untimed path takes). The tracer writes each run of failed calls as one record
 * that counts them.
 *
 * Usage: polls POLLS (4 ranks) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MANY 10

static volatile double sink;

static void work(void) {
    double x = 1.0;
    for (int i = 0; i < 50; i++) x = x * 1.000001 + 0.5;
    sink = x;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long polls = argc > 1 ? atol(argv[1]) : 5000;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int partner = rank ^ 1, go = 1, flag = 0, idx = 0, out = 0, indices[MANY];
    double buf[MANY] = {0};
    MPI_Status st[MANY]; /* not MPI_STATUSES_IGNORE: GCC warns on MPICH's prototypes */
    if (partner < size && rank % 2 == 0) {
        MPI_Request req, many[MANY];
        MPI_Irecv(buf, 1, MPI_DOUBLE, partner, 5, MPI_COMM_WORLD, &req);
        for (long i = 0; i < polls; i++) {
            MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            work();
        }
        for (long i = 0; i < polls; i++) {
            MPI_Iprobe(partner, 6, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            work();
        }
        for (long i = 0; i < polls; i++) {
            MPI_Testany(1, &req, &idx, &flag, MPI_STATUS_IGNORE);
            work();
        }
        for (long i = 0; i < polls; i++) {
            MPI_Testall(1, &req, &flag, st);
            work();
        }
        for (long i = 0; i < polls; i++) {
            MPI_Testsome(1, &req, &out, indices, st);
            work();
        }
        MPI_Send(&go, 1, MPI_INT, partner, 7, MPI_COMM_WORLD);
        for (flag = 0; !flag;) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        for (int k = 0; k < MANY; k++)
            MPI_Irecv(&buf[k], 1, MPI_DOUBLE, partner, 8, MPI_COMM_WORLD, &many[k]);
        for (long i = 0; i < polls; i++) {
            MPI_Testany(MANY, many, &idx, &flag, MPI_STATUS_IGNORE);
            work();
        }
        MPI_Send(&go, 1, MPI_INT, partner, 9, MPI_COMM_WORLD);
        MPI_Waitall(MANY, many, st);
    } else if (partner < size) {
        double v = rank;
        MPI_Recv(&go, 1, MPI_INT, partner, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&v, 1, MPI_DOUBLE, partner, 5, MPI_COMM_WORLD);
        MPI_Recv(&go, 1, MPI_INT, partner, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int k = 0; k < MANY; k++) MPI_Send(&v, 1, MPI_DOUBLE, partner, 8, MPI_COMM_WORLD);
    }
    if (rank == 0) printf("polls done\n");
    MPI_Finalize();
    return 0;
}
