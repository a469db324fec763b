/* Every one-sided call the tracer records but MPI_Win_fence (one_sided.c has it), once
 * each (4 ranks, each rank's target is its right neighbour, MPI_Rget's and MPI_Get's its
 * left): a passive-target epoch on an MPI_Win_allocate window (MPI_Win_lock,
 * MPI_Accumulate, MPI_Win_flush, MPI_Win_unlock), then MPI_Win_lock_all with MPI_Rput
 * and MPI_Rget (each completed by MPI_Wait), MPI_Get, MPI_Get_accumulate,
 * MPI_Fetch_and_op, MPI_Compare_and_swap, MPI_Win_flush_all and MPI_Win_unlock_all;
 * windows from MPI_Win_allocate_shared and MPI_Win_create_dynamic; a generalized
 * active-target epoch (MPI_Win_post, MPI_Win_start, MPI_Put, MPI_Win_complete,
 * MPI_Win_wait) on an MPI_Win_create window. World MPI_Barriers separate the phases.
 *
 * Usage: one_sided_all N_DOUBLES */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 16;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double *a = calloc((size_t)n, sizeof(double));
    double *b = calloc((size_t)n, sizeof(double));
    for (int i = 0; i < n; i++)
        a[i] = rank + i;
    MPI_Aint bytes = (MPI_Aint)(sizeof(double) * (size_t)n);

    double *base;
    MPI_Win win;
    MPI_Win_allocate(bytes, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    for (int i = 0; i < n; i++)
        base[i] = 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
    MPI_Accumulate(a, n, MPI_DOUBLE, right, 0, n, MPI_DOUBLE, MPI_SUM, win);
    MPI_Win_flush(right, win);
    MPI_Win_unlock(right, win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    MPI_Request req;
    MPI_Rput(a, n, MPI_DOUBLE, right, 0, n, MPI_DOUBLE, win, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Rget(b, n, MPI_DOUBLE, left, 0, n, MPI_DOUBLE, win, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Get(b, n, MPI_DOUBLE, left, 0, n, MPI_DOUBLE, win);
    double one = 1.0, old = 0.0;
    MPI_Get_accumulate(&one, 1, MPI_DOUBLE, &old, 1, MPI_DOUBLE, right, 1, 1, MPI_DOUBLE,
                       MPI_SUM, win);
    MPI_Fetch_and_op(&one, &old, MPI_DOUBLE, right, 2, MPI_SUM, win);
    int64_t swap = 7, compare = 0, result = 0;
    MPI_Compare_and_swap(&swap, &compare, &result, MPI_INT64_T, right, 3, win);
    MPI_Win_flush_all(win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);

    double *shared;
    MPI_Win_allocate_shared(bytes, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &shared,
                            &win);
    MPI_Win_free(&win);
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_free(&win);

    double *exposed = calloc((size_t)n, sizeof(double));
    MPI_Win_create(exposed, bytes, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Group world, from, to;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &left, &from);
    MPI_Group_incl(world, 1, &right, &to);
    MPI_Win_post(from, 0, win);
    MPI_Win_start(to, 0, win);
    MPI_Put(a, n, MPI_DOUBLE, right, 0, n, MPI_DOUBLE, win);
    MPI_Win_complete(win);
    MPI_Win_wait(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    if (rank == 0)
        printf("old=%g result=%ld exposed=%g\n", old, (long)result, exposed[0]);
    MPI_Group_free(&from);
    MPI_Group_free(&to);
    MPI_Group_free(&world);
    free(exposed);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
