/* Nonblocking collectives, the completion family, receives from MPI_ANY_SOURCE and
 * persistent requests, in the same order as calls_nb_f.f90 (mpif.h-style bindings) and
 * calls_nb_f08.f90 (mpi_f08), so tests/tracer.rs checks all three traces with one
 * function. Not an example application: no computation. Needs 4 ranks. */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n != 4) MPI_Abort(MPI_COMM_WORLD, 1);
    int next = (r + 1) % 4, prev = (r + 3) % 4;
    int counts[4], displs[4], ones[4] = {1, 1, 1, 1}, idx[4] = {0, 1, 2, 3};
    for (int i = 0; i < 4; i++) {
        counts[i] = i + 1;
        displs[i] = i * (i + 1) / 2;
    }
    int in[64] = {0}, o[16][16];
    double d = r, dout[4];
    MPI_Request q[16];
    MPI_Status st[16];
    int flag = 0, index, outcount, indices[16], done;

    /* Sixteen nonblocking collectives. */
    MPI_Ibcast(o[0], 3, MPI_INT, 2, MPI_COMM_WORLD, &q[0]);
    MPI_Ireduce(&d, &dout[0], 1, MPI_DOUBLE, MPI_SUM, 1, MPI_COMM_WORLD, &q[1]);
    MPI_Igatherv(in, r + 1, MPI_INT, o[1], counts, displs, MPI_INT, 0, MPI_COMM_WORLD, &q[2]);
    MPI_Iscatterv(in, counts, displs, MPI_INT, o[2], r + 1, MPI_INT, 3, MPI_COMM_WORLD, &q[3]);
    MPI_Iallgatherv(in, r + 1, MPI_INT, o[3], counts, displs, MPI_INT, MPI_COMM_WORLD, &q[4]);
    MPI_Ialltoallv(in, ones, idx, MPI_INT, o[4], ones, idx, MPI_INT, MPI_COMM_WORLD, &q[5]);
    MPI_Waitall(6, q, st);
    MPI_Ireduce_scatter(in, o[5], counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[6]);
    MPI_Ireduce_scatter_block(in, o[6], 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[7]);
    MPI_Iscan(&d, &dout[1], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[8]);
    MPI_Iexscan(&d, &dout[2], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[9]);
    while (!flag) MPI_Testall(4, &q[6], &flag, &st[6]);
    MPI_Igather(in, 2, MPI_INT, o[7], 2, MPI_INT, 1, MPI_COMM_WORLD, &q[10]);
    MPI_Iscatter(in, 1, MPI_INT, o[8], 1, MPI_INT, 1, MPI_COMM_WORLD, &q[11]);
    MPI_Iallgather(in, 1, MPI_INT, o[9], 1, MPI_INT, MPI_COMM_WORLD, &q[12]);
    for (done = 0; done < 3;) {
        MPI_Testany(3, &q[10], &index, &flag, MPI_STATUS_IGNORE);
        if (flag && index != MPI_UNDEFINED) done++;
    }
    MPI_Ialltoall(in, 1, MPI_INT, o[10], 1, MPI_INT, MPI_COMM_WORLD, &q[13]);
    MPI_Iallreduce(in, o[11], 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[14]);
    MPI_Ibarrier(MPI_COMM_WORLD, &q[15]);
    for (done = 0; done < 3;) {
        MPI_Testsome(3, &q[13], &outcount, indices, &st[13]);
        if (outcount != MPI_UNDEFINED) done += outcount;
    }
    MPI_Reduce_scatter_block(in, o[12], 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

    /* Receives from MPI_ANY_SOURCE: the trace holds the actual source. */
    MPI_Isend(in, 5, MPI_INT, next, 20, MPI_COMM_WORLD, &q[0]);
    MPI_Recv(o[0], 5, MPI_INT, MPI_ANY_SOURCE, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&q[0], MPI_STATUS_IGNORE);
    MPI_Isend(in, 3, MPI_INT, prev, 21, MPI_COMM_WORLD, &q[0]);
    MPI_Probe(MPI_ANY_SOURCE, 21, MPI_COMM_WORLD, &st[0]);
    MPI_Recv(o[0], 3, MPI_INT, MPI_ANY_SOURCE, 21, MPI_COMM_WORLD, &st[1]);
    if (st[0].MPI_SOURCE != next || st[1].MPI_SOURCE != next) MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Wait(&q[0], MPI_STATUS_IGNORE);
    MPI_Sendrecv(in, 2, MPI_INT, next, 22, o[0], 2, MPI_INT, MPI_ANY_SOURCE, 22, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (r % 2 == 0) {
        MPI_Send(in, 1, MPI_INT, r + 1, 23, MPI_COMM_WORLD);
    } else {
        for (flag = 0; !flag;)
            MPI_Iprobe(MPI_ANY_SOURCE, 23, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        MPI_Recv(o[0], 1, MPI_INT, r - 1, 23, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Irecv(o[0], 2, MPI_INT, MPI_ANY_SOURCE, 24, MPI_COMM_WORLD, &q[0]);
    MPI_Irecv(o[1], 2, MPI_INT, MPI_ANY_SOURCE, 25, MPI_COMM_WORLD, &q[1]);
    MPI_Send(in, 2, MPI_INT, next, 24, MPI_COMM_WORLD);
    MPI_Send(in, 2, MPI_INT, prev, 25, MPI_COMM_WORLD);
    MPI_Waitany(2, q, &index, MPI_STATUS_IGNORE);
    MPI_Waitany(2, q, &index, MPI_STATUS_IGNORE);
    MPI_Irecv(o[0], 2, MPI_INT, MPI_ANY_SOURCE, 26, MPI_COMM_WORLD, &q[0]);
    MPI_Irecv(o[1], 2, MPI_INT, MPI_ANY_SOURCE, 27, MPI_COMM_WORLD, &q[1]);
    MPI_Send(in, 2, MPI_INT, next, 26, MPI_COMM_WORLD);
    MPI_Send(in, 2, MPI_INT, prev, 27, MPI_COMM_WORLD);
    for (done = 0; done < 2;) {
        MPI_Waitsome(2, q, &outcount, indices, st);
        if (outcount != MPI_UNDEFINED) done += outcount;
    }

    /* Persistent requests: each start is recorded as the nonblocking call it starts. */
    MPI_Request p[8];
    MPI_Send_init(in, 4, MPI_INT, next, 30, MPI_COMM_WORLD, &p[0]);
    MPI_Recv_init(o[0], 4, MPI_INT, prev, 30, MPI_COMM_WORLD, &p[1]);
    for (int k = 0; k < 2; k++) {
        MPI_Startall(2, p);
        MPI_Waitall(2, p, st);
    }
    MPI_Ssend_init(in, 2, MPI_INT, next, 31, MPI_COMM_WORLD, &p[2]);
    MPI_Recv_init(o[1], 2, MPI_INT, MPI_ANY_SOURCE, 31, MPI_COMM_WORLD, &p[3]);
    MPI_Start(&p[3]);
    MPI_Start(&p[2]);
    MPI_Wait(&p[2], MPI_STATUS_IGNORE);
    MPI_Wait(&p[3], MPI_STATUS_IGNORE);
    int bsize = 1024;
    void *battach = malloc((size_t)bsize);
    MPI_Buffer_attach(battach, bsize);
    MPI_Bsend_init(in, 1, MPI_INT, next, 32, MPI_COMM_WORLD, &p[4]);
    MPI_Recv_init(o[2], 1, MPI_INT, prev, 32, MPI_COMM_WORLD, &p[5]);
    MPI_Start(&p[5]);
    MPI_Start(&p[4]);
    MPI_Waitall(2, &p[4], st);
    MPI_Buffer_detach(&battach, &bsize);
    free(battach);
    MPI_Rsend_init(in, 1, MPI_INT, next, 33, MPI_COMM_WORLD, &p[6]);
    MPI_Recv_init(o[3], 1, MPI_INT, prev, 33, MPI_COMM_WORLD, &p[7]);
    MPI_Start(&p[7]);
    MPI_Barrier(MPI_COMM_WORLD); /* every receive is posted before the ready send */
    MPI_Start(&p[6]);
    MPI_Waitall(2, &p[6], st);
    for (int i = 0; i < 8; i++) MPI_Request_free(&p[i]);
    MPI_Finalize();
    return 0;
}
