/* Tracer cost in a polling loop of cache misses, for scripts/bench-tracer.sh: each of
 * ITERS iterations makes one MPI_Testany that finds nothing (a receive nobody sends) and
 * one update of a random entry of a 128 MiB table, as HPC Challenge's RandomAccess does
 * between its polls. Prints ns per iteration. Traced, the failed polls are one record
 * per run (trace format 7) and most of them are not timed (runtime/tracer/README.md,
 * "Polls"): what is left is the tracer's fast path, whose few stores hold the loop up
 * until earlier misses land.
 * Usage: pollrate ITERS (1 rank) */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    size_t entries = (size_t)1 << 24;
    uint64_t *table = malloc(entries * sizeof *table);
    if (!table) MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < entries; i++) table[i] = i;
    char buf[64];
    MPI_Request req;
    MPI_Irecv(buf, 64, MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &req);
    uint64_t x = 1;
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) {
        int idx, flag;
        MPI_Testany(1, &req, &idx, &flag, MPI_STATUS_IGNORE);
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        table[(x >> 20) & (entries - 1)] ^= x;
    }
    double t1 = MPI_Wtime();
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    printf("%.2f\n", (t1 - t0) / (double)n * 1e9);
    if (table[5] == 42) printf("\n"); /* keeps the updates */
    free(table);
    MPI_Finalize();
    return 0;
}
