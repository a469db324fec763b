/* A task farm through matched probes (MPI-3, how mpi4py's comm.recv receives): the
 * master takes results with MPI_Mprobe(MPI_ANY_SOURCE) and MPI_Mrecv and answers the
 * sender (tag 1: a task, tag 2: stop); a worker polls with MPI_Improbe, then receives
 * the message it found with MPI_Imrecv and MPI_Wait.
 * Usage: matched_probe TASKS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double work(long n) {
    double s = 0.0;
    for (long i = 1; i <= n; i++) s += 1.0 / (double)i;
    return s;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int tasks = argc > 1 ? atoi(argv[1]) : 12;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        int sent = 0, active = 0;
        long n = 200000;
        for (int w = 1; w < size; w++) {
            int tag = sent < tasks ? 1 : 2;
            MPI_Send(&n, 1, MPI_LONG, w, tag, MPI_COMM_WORLD);
            if (tag == 1) sent++, active++;
        }
        double total = 0.0;
        while (active > 0) {
            MPI_Message msg;
            MPI_Status st;
            double r;
            MPI_Mprobe(MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &msg, &st);
            MPI_Mrecv(&r, 1, MPI_DOUBLE, &msg, &st);
            total += r;
            active--;
            int tag = sent < tasks ? 1 : 2;
            MPI_Send(&n, 1, MPI_LONG, st.MPI_SOURCE, tag, MPI_COMM_WORLD);
            if (tag == 1) sent++, active++;
        }
        printf("matched_probe: %.3f\n", total);
    } else {
        for (;;) {
            int flag = 0;
            MPI_Message msg;
            MPI_Status st;
            while (!flag) MPI_Improbe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st);
            long n;
            MPI_Request req;
            MPI_Imrecv(&n, 1, MPI_LONG, &msg, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            if (st.MPI_TAG == 2) break;
            double r = work(n);
            MPI_Send(&r, 1, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD);
        }
    }
    MPI_Finalize();
    return 0;
}
