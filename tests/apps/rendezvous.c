/* A rendezvous exchange whose ranks take different code paths through the same
 * collectives, as LAMMPS's set-up of SHAKE clusters does (Comm::rendezvous, called again
 * where a rank's data asks for it): each round, every rank exchanges counts
 * (MPI_Alltoall) and then data of its own size (MPI_Alltoallv); then a second exchange,
 * which a rank whose data is not settled makes through the first routine again (the same
 * call sites), and the others through a second routine (other call sites). Which ranks
 * take which path changes with the round. Every rank calls the same collectives in the
 * same order, with counts that differ per rank and per round.
 *
 * Usage: rendezvous ROUNDS
 * Prints the sum of what rank 0 received. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Doubles each rank sends to every other in round r of exchange k. */
static int count_of(int rank, int round, int k) {
    return 8 + (int)(((unsigned)rank * 2654435761u + (unsigned)round * 40503u + (unsigned)k * 977u) % 23u);
}

static double exchange(int mine, int nranks, double *send, double *recv, int *sc, int *sd,
                       int *rc, int *rd) {
    for (int i = 0; i < nranks; i++) {
        sc[i] = mine;
        sd[i] = i * mine;
    }
    MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, MPI_COMM_WORLD);
    int at = 0;
    for (int i = 0; i < nranks; i++) {
        rd[i] = at;
        at += rc[i];
    }
    MPI_Alltoallv(send, sc, sd, MPI_DOUBLE, recv, rc, rd, MPI_DOUBLE, MPI_COMM_WORLD);
    double s = 0;
    for (int i = 0; i < at; i++) s += recv[i];
    return s;
}

/* The second routine: the same calls from other call sites. */
static double exchange_again(int mine, int nranks, double *send, double *recv, int *sc,
                             int *sd, int *rc, int *rd) {
    for (int i = 0; i < nranks; i++) {
        sc[i] = mine;
        sd[i] = i * mine;
    }
    MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, MPI_COMM_WORLD);
    int at = 0;
    for (int i = 0; i < nranks; i++) {
        rd[i] = at;
        at += rc[i];
    }
    MPI_Alltoallv(send, sc, sd, MPI_DOUBLE, recv, rc, rd, MPI_DOUBLE, MPI_COMM_WORLD);
    double s = 0;
    for (int i = 0; i < at; i++) s += 2 * recv[i];
    return s;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    int most = 32 * nranks;
    double *send = malloc(sizeof(double) * (size_t)most);
    double *recv = malloc(sizeof(double) * (size_t)most);
    int *ints = malloc(sizeof(int) * 4 * (size_t)nranks);
    if (!send || !recv || !ints) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < most; i++) send[i] = rank + i * 0.001;
    int *sc = ints, *sd = ints + nranks, *rc = ints + 2 * nranks, *rd = ints + 3 * nranks;
    double total = 0;
    for (int r = 0; r < rounds; r++) {
        total += exchange(count_of(rank, r, 0), nranks, send, recv, sc, sd, rc, rd);
        /* Not settled: ranks whose data says so go through the first routine again. */
        if ((rank + r / 4) % 3 == 2) {
            total += exchange(count_of(rank, r, 1), nranks, send, recv, sc, sd, rc, rd);
        } else {
            total += exchange_again(count_of(rank, r, 1), nranks, send, recv, sc, sd, rc, rd);
        }
        double local = total, global = 0;
        MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        total = global / nranks;
    }
    if (rank == 0) printf("%.6e\n", total);
    free(send);
    free(recv);
    free(ints);
    MPI_Finalize();
    return 0;
}
