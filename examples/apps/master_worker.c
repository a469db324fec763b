/* Master/worker: rank 0 hands out TASKS ranges of numbers; workers count the primes in
 * each range and return the count. The master receives results with MPI_ANY_SOURCE and
 * answers the sender with the next task or a stop message (tag 2).
 * Usage: master_worker RANGE TASKS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static long count_primes(long lo, long hi) {
    long count = 0;
    for (long v = lo < 2 ? 2 : lo; v < hi; v++) {
        int prime = 1;
        for (long d = 2; d * d <= v; d++)
            if (v % d == 0) {
                prime = 0;
                break;
            }
        count += prime;
    }
    return count;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long range = argc > 1 ? atol(argv[1]) : 20000;
    int tasks = argc > 2 ? atoi(argv[2]) : 12;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        long next = 0, total = 0, result;
        int sent = 0, active = 0;
        for (int w = 1; w < size; w++) {
            long task[2] = {next, next + range};
            int tag = sent < tasks ? 1 : 2;
            MPI_Send(task, 2, MPI_LONG, w, tag, MPI_COMM_WORLD);
            if (tag == 1) {
                sent++;
                active++;
                next += range;
            }
        }
        while (active > 0) {
            MPI_Status st;
            MPI_Recv(&result, 1, MPI_LONG, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &st);
            total += result;
            active--;
            long task[2] = {next, next + range};
            int tag = sent < tasks ? 1 : 2;
            MPI_Send(task, 2, MPI_LONG, st.MPI_SOURCE, tag, MPI_COMM_WORLD);
            if (tag == 1) {
                sent++;
                active++;
                next += range;
            }
        }
        printf("master_worker: %ld primes\n", total);
    } else {
        for (;;) {
            long task[2];
            MPI_Status st;
            MPI_Recv(task, 2, MPI_LONG, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            if (st.MPI_TAG == 2) break;
            long result = count_primes(task[0], task[1]);
            MPI_Send(&result, 1, MPI_LONG, 0, 3, MPI_COMM_WORLD);
        }
    }
    MPI_Finalize();
    return 0;
}
