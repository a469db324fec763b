/* One function that communicates for two callers, as a library's halo exchange does for
 * a forward and a reverse pass (LAMMPS's Comm::forward_comm and reverse_comm share
 * their send and receive code): at stack depth 1 its calls are one call site, at depth
 * 2 two, named by the caller (perfskel record --stack-depth). Pairs of ranks swap. */
#include <mpi.h>
#include <stdio.h>

/* Each function does some work after its call so that the call is not a tail call,
 * which would leave no frame for the function and give its call to the caller. */
static void __attribute__((noinline)) exchange(int peer, double *buf, int n) {
    MPI_Sendrecv_replace(buf, n, MPI_DOUBLE, peer, 0, peer, 0, /* SITE exchange */
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    buf[1] += 1.0;
}

static void __attribute__((noinline)) forward(int peer, double *buf) {
    exchange(peer, buf, 16); /* SITE forward */
    buf[2] += 1.0;
}

static void __attribute__((noinline)) reverse(int peer, double *buf) {
    exchange(peer, buf, 64); /* SITE reverse */
    buf[3] += 1.0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double buf[64] = {0};
    int peer = (rank ^ 1) < size ? rank ^ 1 : MPI_PROC_NULL;
    for (int i = 0; i < 3; i++) forward(peer, buf); /* SITE main-forward */
    for (int i = 0; i < 5; i++) reverse(peer, buf); /* SITE main-reverse */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("%.1f\n", buf[1] + buf[2] + buf[3]);
    MPI_Finalize();
    return 0;
}
