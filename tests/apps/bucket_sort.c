/* A parallel integer sort by buckets, as sample/bucket sorts of integer keys are written
 * (particle sorting, sparse assembly, the sort benchmark of many suites): each rank owns
 * KEYS keys drawn from a bell-shaped distribution (the mean of four uniform draws), so
 * ranks' buckets hold different numbers of keys and the exchange sizes vary with the data.
 * Each iteration changes a few keys, counts the local keys per destination rank (one
 * contiguous key range per rank), exchanges the counts (MPI_Alltoall), then the keys
 * themselves (MPI_Alltoallv, counts and displacements from the exchanged counts), ranks
 * the received keys with a counting sort, and sums a checksum (MPI_Allreduce). After the
 * last iteration a partial verification: each rank sends its smallest key to the rank
 * before it (MPI_Irecv/MPI_Send/MPI_Wait) and checks its largest one against it;
 * MPI_Reduce of the failures to rank 0.
 *
 * Usage: bucket_sort KEYS ITERATIONS
 * Prints the checksum and the number of ordering failures (0). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEY (1 << 19)

static unsigned long long state;

static unsigned draw(void) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(state >> 33);
}

static int key(void) {
    unsigned s = 0;
    for (int k = 0; k < 4; k++) s += draw() % MAX_KEY;
    return (int)(s / 4);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long n = argc > 1 ? atol(argv[1]) : 1 << 16;
    int iterations = argc > 2 ? atoi(argv[2]) : 10;
    if (n < 1 || iterations < 1) {
        fprintf(stderr, "usage: bucket_sort KEYS>=1 ITERATIONS>=1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    state = 0x9e3779b97f4a7c15ULL * (unsigned long long)(rank + 1);
    int *keys = malloc((size_t)n * sizeof(int));
    int *sorted = malloc((size_t)n * sizeof(int));
    /* Received keys: at most all ranks' keys land on one rank. */
    long room = n * (long)size;
    int *received = malloc((size_t)room * sizeof(int));
    int *counts = calloc((size_t)size, sizeof(int));
    int *incoming = calloc((size_t)size, sizeof(int));
    int *sdispls = calloc((size_t)size, sizeof(int));
    int *rdispls = calloc((size_t)size, sizeof(int));
    int *next = calloc((size_t)size, sizeof(int));
    int span = (MAX_KEY + size - 1) / size;
    int *rank_of = calloc((size_t)span, sizeof(int));
    if (!keys || !sorted || !received || !counts || !incoming || !sdispls || !rdispls ||
        !next || !rank_of)
        MPI_Abort(MPI_COMM_WORLD, 3);
    for (long i = 0; i < n; i++) keys[i] = key();
    long long checksum = 0;
    long got = 0;
    for (int it = 0; it < iterations; it++) {
        /* A few keys change every iteration, as the benchmark-style sorts do. */
        keys[it % n] = (it * 7919) % MAX_KEY;
        keys[(it * 31) % n] = MAX_KEY - 1 - (it * 7919) % MAX_KEY;
        memset(counts, 0, (size_t)size * sizeof(int));
        for (long i = 0; i < n; i++) counts[keys[i] / span]++;
        sdispls[0] = 0;
        for (int r = 1; r < size; r++) sdispls[r] = sdispls[r - 1] + counts[r - 1];
        memcpy(next, sdispls, (size_t)size * sizeof(int));
        for (long i = 0; i < n; i++) sorted[next[keys[i] / span]++] = keys[i];
        MPI_Alltoall(counts, 1, MPI_INT, incoming, 1, MPI_INT, MPI_COMM_WORLD);
        rdispls[0] = 0;
        for (int r = 1; r < size; r++) rdispls[r] = rdispls[r - 1] + incoming[r - 1];
        got = rdispls[size - 1] + incoming[size - 1];
        MPI_Alltoallv(sorted, counts, sdispls, MPI_INT, received, incoming, rdispls, MPI_INT,
                      MPI_COMM_WORLD);
        /* Rank the received keys within this rank's range: a counting sort. */
        int low = rank * span;
        memset(rank_of, 0, (size_t)span * sizeof(int));
        for (long i = 0; i < got; i++) rank_of[received[i] - low]++;
        long long local = 0;
        for (int v = 1; v < span; v++) {
            rank_of[v] += rank_of[v - 1];
            local += rank_of[v] & 0xff;
        }
        long long total = 0;
        MPI_Allreduce(&local, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        checksum += total;
    }
    /* Partial verification: the received keys, in order, must not exceed the smallest
     * key of the next rank. */
    int smallest = MAX_KEY, largest = -1;
    for (long i = 0; i < got; i++) {
        if (received[i] < smallest) smallest = received[i];
        if (received[i] > largest) largest = received[i];
    }
    int after = MAX_KEY;
    MPI_Request req = MPI_REQUEST_NULL;
    if (rank + 1 < size) MPI_Irecv(&after, 1, MPI_INT, rank + 1, 0, MPI_COMM_WORLD, &req);
    if (rank > 0) MPI_Send(&smallest, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    int failures = largest > after, all = 0;
    MPI_Reduce(&failures, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("checksum %lld, ordering failures %d\n", checksum, all);
    free(keys);
    free(sorted);
    free(received);
    free(counts);
    free(incoming);
    free(sdispls);
    free(rdispls);
    free(next);
    free(rank_of);
    MPI_Finalize();
    return 0;
}
