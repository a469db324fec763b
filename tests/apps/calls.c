/* Calls every traced MPI routine once (or a few times) with sizes that depend on the
 * rank, so tests/tracer.rs can check each event's bytes, peers, roots, communicators and
 * requests. Not an example application: it has no computation. Needs 4 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n != 4) MPI_Abort(MPI_COMM_WORLD, 1);
    int ibuf[64] = {0}, obuf[64] = {0}, counts[4], displs[4], ones[4] = {1, 1, 1, 1},
        idx[4] = {0, 1, 2, 3};
    double d = r, dout = 0;
    for (int i = 0; i < 4; i++) {
        counts[i] = i + 1;
        displs[i] = i * (i + 1) / 2;
    }
    int next = (r + 1) % 4, prev = (r + 3) % 4;

    /* Collectives (ids in the comments are the tests' expectations). */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Bcast(ibuf, 10, MPI_INT, 1, MPI_COMM_WORLD);
    MPI_Reduce(&d, &dout, 1, MPI_DOUBLE, MPI_SUM, 2, MPI_COMM_WORLD);
    MPI_Gather(ibuf, 3, MPI_INT, obuf, 3, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gatherv(ibuf, r + 1, MPI_INT, obuf, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Scatter(ibuf, 2, MPI_INT, obuf, 2, MPI_INT, 3, MPI_COMM_WORLD);
    MPI_Scatterv(ibuf, counts, displs, MPI_INT, obuf, r + 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Allgather(ibuf, 2, MPI_INT, obuf, 2, MPI_INT, MPI_COMM_WORLD);
    MPI_Allgatherv(ibuf, r + 1, MPI_INT, obuf, counts, displs, MPI_INT, MPI_COMM_WORLD);
    MPI_Alltoall(ibuf, 1, MPI_INT, obuf, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Alltoallv(ibuf, ones, idx, MPI_INT, obuf, ones, idx, MPI_INT, MPI_COMM_WORLD);
    MPI_Reduce_scatter(ibuf, obuf, ones, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce_scatter_block(ibuf, obuf, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Scan(&d, &dout, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Exscan(&d, &dout, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &d, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

    /* Nonblocking collectives, completed by one Waitall. */
    MPI_Request reqs[8];
    MPI_Status stats[8];
    int nb_a[4], nb_b[4], nb_c[16], nb_d[16];
    MPI_Ibcast(nb_a, 4, MPI_INT, 0, MPI_COMM_WORLD, &reqs[0]);
    MPI_Iallreduce(ibuf, nb_b, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &reqs[1]);
    MPI_Ibarrier(MPI_COMM_WORLD, &reqs[2]);
    MPI_Ialltoall(ibuf, 1, MPI_INT, nb_c, 1, MPI_INT, MPI_COMM_WORLD, &reqs[3]);
    MPI_Iallgather(ibuf, 1, MPI_INT, nb_d, 1, MPI_INT, MPI_COMM_WORLD, &reqs[4]);
    MPI_Waitall(5, reqs, stats);
    int nb_e[16], nb_f[16];
    MPI_Igather(ibuf, 2, MPI_INT, nb_e, 2, MPI_INT, 1, MPI_COMM_WORLD, &reqs[0]);
    MPI_Iscatter(ibuf, 1, MPI_INT, nb_f, 1, MPI_INT, 1, MPI_COMM_WORLD, &reqs[1]);
    /* Waitany until both are done. */
    for (int k = 0; k < 2; k++) {
        int which;
        MPI_Waitany(2, reqs, &which, MPI_STATUS_IGNORE);
    }

    /* Point to point around the ring. */
    MPI_Sendrecv_replace(ibuf, 4, MPI_INT, next, 5, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Request sreq;
    MPI_Isend(ibuf, 6, MPI_INT, next, 6, MPI_COMM_WORLD, &sreq);
    MPI_Status st;
    MPI_Probe(MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &st);
    MPI_Recv(obuf, 6, MPI_INT, st.MPI_SOURCE, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&sreq, MPI_STATUS_IGNORE);
    MPI_Request rreq;
    MPI_Irecv(obuf, 7, MPI_INT, prev, 7, MPI_COMM_WORLD, &rreq);
    MPI_Issend(ibuf, 7, MPI_INT, next, 7, MPI_COMM_WORLD, &sreq);
    int flag = 0;
    while (!flag) MPI_Test(&rreq, &flag, MPI_STATUS_IGNORE);
    MPI_Wait(&sreq, MPI_STATUS_IGNORE);
    MPI_Irecv(obuf, 8, MPI_INT, MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, &reqs[0]);
    MPI_Irecv(obuf + 8, 8, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &reqs[1]);
    MPI_Send(ibuf, 8, MPI_INT, next, 8, MPI_COMM_WORLD);
    MPI_Send(ibuf, 8, MPI_INT, prev, 9, MPI_COMM_WORLD);
    int done = 0, outcount, indices[2];
    while (done < 2) {
        MPI_Waitsome(2, reqs, &outcount, indices, stats);
        if (outcount != MPI_UNDEFINED) done += outcount;
    }
    /* Pairs {0,1}, {2,3}: the even rank sends synchronously, the odd one probes. */
    flag = 0;
    if (r % 2 == 0) {
        MPI_Ssend(ibuf, 1, MPI_INT, r + 1, 10, MPI_COMM_WORLD);
    } else {
        while (!flag) MPI_Iprobe(r - 1, 10, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        MPI_Recv(obuf, 1, MPI_INT, r - 1, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Send(ibuf, 3, MPI_INT, MPI_PROC_NULL, 11, MPI_COMM_WORLD);

    /* Communicators: peers and roots come out as world ranks. */
    MPI_Comm dup, evens, cart, sub;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Group world_group, even_group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    int even_ranks[2] = {0, 2};
    MPI_Group_incl(world_group, 2, even_ranks, &even_group);
    MPI_Comm_create(MPI_COMM_WORLD, even_group, &evens);
    if (evens != MPI_COMM_NULL) {
        /* Local rank 1 of {0, 2} is world rank 2. */
        MPI_Bcast(ibuf, 2, MPI_INT, 1, evens);
        MPI_Comm_free(&evens);
    }
    int dims[2] = {2, 2}, periods[2] = {1, 1}, remain[2] = {0, 1};
    MPI_Cart_create(dup, 2, dims, periods, 0, &cart);
    MPI_Cart_sub(cart, remain, &sub);
    /* The sub-communicator holds the row: {0, 1} or {2, 3}. */
    MPI_Sendrecv(ibuf, 5, MPI_INT, 1 - (r % 2), 12, obuf, 5, MPI_INT, 1 - (r % 2), 12, sub,
                 MPI_STATUS_IGNORE);
    MPI_Comm_free(&sub);
    MPI_Comm_free(&cart);
    MPI_Comm_free(&dup);
    MPI_Group_free(&even_group);
    MPI_Group_free(&world_group);
    MPI_Finalize();
    return 0;
}
