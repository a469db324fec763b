/* One-sided communication and intercommunicators, which skeletons do not model, beside
 * what they do: every iteration is a fence epoch in which each rank puts its array into
 * its right neighbour's window, a second epoch in which it gets its left neighbour's,
 * an MPI_Allreduce over the world, and a message across an intercommunicator between
 * the even and the odd ranks (MPI_Intercomm_create over a split of MPI_COMM_WORLD):
 * each even rank sends to the odd rank of the same index, which receives. At the end
 * the intercommunicator is merged (MPI_Intercomm_merge) and the merged communicator
 * takes one MPI_Barrier; a world MPI_Barrier ends the run.
 *
 * Usage: one_sided N_DOUBLES ITERATIONS (an even number of ranks) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 64;
    int iters = argc > 2 ? atoi(argv[2]) : 4;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    double *window = calloc((size_t)n, sizeof(double));
    double *a = calloc((size_t)n, sizeof(double));
    double *b = calloc((size_t)n, sizeof(double));
    MPI_Win win;
    MPI_Win_create(window, (MPI_Aint)(sizeof(double) * (size_t)n), sizeof(double),
                   MPI_INFO_NULL, MPI_COMM_WORLD, &win);

    MPI_Comm half, inter, merged;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    /* The leaders are world ranks 0 (evens) and 1 (odds). */
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 7, &inter);
    int index;
    MPI_Comm_rank(inter, &index);

    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double sum = 0.0, total = 0.0;
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < n; i++)
            a[i] = a[i] * 0.5 + (double)(i + it + rank);
        MPI_Win_fence(0, win);
        MPI_Put(a, n, MPI_DOUBLE, right, 0, n, MPI_DOUBLE, win);
        MPI_Win_fence(0, win);
        MPI_Get(b, n, MPI_DOUBLE, left, 0, n, MPI_DOUBLE, win);
        MPI_Win_fence(0, win);
        sum = b[0] + window[0];
        MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rank % 2 == 0)
            MPI_Send(a, n, MPI_DOUBLE, index, 3, inter);
        else
            MPI_Recv(b, n, MPI_DOUBLE, index, 3, inter, MPI_STATUS_IGNORE);
    }
    MPI_Intercomm_merge(inter, rank % 2, &merged);
    MPI_Barrier(merged);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("total=%g\n", total);
    MPI_Comm_free(&merged);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    MPI_Win_free(&win);
    free(window);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
