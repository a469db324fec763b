/* Updates sent wherever the data says, as random-access benchmarks, graph traversals and
 * particle codes send them: each rank draws updates from its own random generator; an
 * update belongs to the rank that owns its table entry, so it goes into that rank's
 * bucket, and whenever the last send has completed the fullest bucket goes out (one
 * MPI_Isend in flight). A pool of MPI_ANY_SOURCE receives takes whatever arrives
 * (MPI_Testany, each re-posted as it completes). Once a rank has drawn all its updates it
 * flushes its buckets, tells every other rank it is done (a 0-byte message with the DONE
 * tag), keeps receiving (MPI_Waitany) until every other rank is done, and cancels its
 * pool. Which peer each message goes to, its size, and the order in which messages
 * arrive all follow the random data, and differ on every rank.
 *
 * Usage: random_updates UPDATES_PER_RANK ROUNDS
 * Each round is one such exchange, between two barriers. Prints the table's checksum. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL 4
#define BUCKET 128
#define TABLE 4096
#define TAG_UPDATE 1
#define TAG_DONE 2

static uint64_t table[TABLE];

static void apply(const uint64_t *u, int n) {
    for (int i = 0; i < n; i++) table[(u[i] >> 8) % TABLE] ^= u[i];
}

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Takes a completed pool receive: applies it or counts a DONE, and re-posts it. */
static void take(int k, const MPI_Status *st, uint64_t (*in)[BUCKET], MPI_Request *pool,
                 int *done) {
    if (st->MPI_TAG == TAG_DONE) {
        (*done)++;
    } else {
        int n = 0;
        MPI_Get_count(st, MPI_UINT64_T, &n);
        apply(in[k], n);
    }
    MPI_Irecv(in[k], BUCKET, MPI_UINT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &pool[k]);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long updates = argc > 1 ? atol(argv[1]) : 20000;
    int rounds = argc > 2 ? atoi(argv[2]) : 2;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    uint64_t seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(rank + 1);
    uint64_t(*bucket)[BUCKET] = calloc((size_t)size, sizeof *bucket);
    int *fill = calloc((size_t)size, sizeof *fill);
    uint64_t in[POOL][BUCKET], out[BUCKET];
    uint64_t nothing = 0;
    MPI_Request *done_req = calloc((size_t)size, sizeof *done_req);
    MPI_Status *done_st = calloc((size_t)size, sizeof *done_st);
    for (int r = 0; r < rounds; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Request pool[POOL], sending = MPI_REQUEST_NULL;
        for (int k = 0; k < POOL; k++)
            MPI_Irecv(in[k], BUCKET, MPI_UINT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                      &pool[k]);
        int done = 0;
        long drawn = 0;
        for (;;) {
            int k, flag = 1;
            MPI_Status st;
            while (flag) {
                MPI_Testany(POOL, pool, &k, &flag, &st);
                if (flag && k != MPI_UNDEFINED) take(k, &st, in, pool, &done);
                else flag = 0;
            }
            for (int i = 0; i < 64 && drawn < updates; i++, drawn++) {
                uint64_t u = next(&seed);
                int owner = (int)((u >> 8) % TABLE * (uint64_t)size / TABLE);
                if (owner == rank) apply(&u, 1);
                else if (fill[owner] < BUCKET) bucket[owner][fill[owner]++] = u;
                else apply(&u, 1); /* a full bucket: kept (the owner's copy is stale) */
            }
            int idle = 1;
            MPI_Test(&sending, &idle, MPI_STATUS_IGNORE);
            int best = -1;
            for (int p = 0; p < size; p++)
                if (fill[p] > 0 && (best < 0 || fill[p] > fill[best])) best = p;
            if (idle && best >= 0 && (drawn == updates || fill[best] >= BUCKET / 2)) {
                memcpy(out, bucket[best], (size_t)fill[best] * sizeof out[0]);
                MPI_Isend(out, fill[best], MPI_UINT64_T, best, TAG_UPDATE, MPI_COMM_WORLD,
                          &sending);
                fill[best] = 0;
            }
            if (drawn == updates && best < 0) break;
        }
        MPI_Wait(&sending, MPI_STATUS_IGNORE);
        int n_done = 0;
        for (int p = 0; p < size; p++)
            if (p != rank)
                MPI_Isend(&nothing, 0, MPI_UINT64_T, p, TAG_DONE, MPI_COMM_WORLD,
                          &done_req[n_done++]);
        while (done < size - 1) {
            int k;
            MPI_Status st;
            MPI_Waitany(POOL, pool, &k, &st);
            take(k, &st, in, pool, &done);
        }
        MPI_Waitall(n_done, done_req, done_st);
        for (int k = 0; k < POOL; k++) {
            MPI_Cancel(&pool[k]);
            MPI_Wait(&pool[k], MPI_STATUS_IGNORE);
        }
    }
    uint64_t sum = 0, all = 0;
    for (int i = 0; i < TABLE; i++) sum += table[i];
    MPI_Reduce(&sum, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("random_updates: checksum %llu\n", (unsigned long long)all);
    free(bucket);
    free(fill);
    free(done_req);
    free(done_st);
    MPI_Finalize();
    return 0;
}
