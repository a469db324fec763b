/* PMPI wrappers of the C bindings: take the application's MPI calls, give events to
 * core.h's emit(). Each wrapper times the PMPI call, then fills the event's fields. */

#define TRACED (g_on && !g_depth)
#define BEGIN(call)                                                                  \
    if (!TRACED) return call;                                                        \
    void *ra_ = __builtin_return_address(0);                                         \
    g_depth++;                                                                       \
    uint64_t t0_ = now_ns();                                                         \
    int rc_ = call;                                                                  \
    uint64_t t1_ = now_ns();                                                         \
    ev_t e_;                                                                         \
    memset(&e_, 0, sizeof e_)
#define END(opcode)                                                                  \
    e_.op = opcode;                                                                  \
    emit(&e_, t0_, t1_, ra_);                                                        \
    g_depth--;                                                                       \
    return rc_

static int comm_size(MPI_Comm c) {
    int n = 0;
    PMPI_Comm_size(c, &n);
    return n;
}
static int comm_rank(MPI_Comm c) {
    int r = 0;
    PMPI_Comm_rank(c, &r);
    return r;
}
static int64_t sum_counts(const int *counts, int n) {
    int64_t s = 0;
    for (int i = 0; counts && i < n; i++) s += counts[i];
    return s;
}

/* ---- init / finalize ---- */

int MPI_Init(int *argc, char ***argv) {
    uint64_t t0 = now_ns();
    g_depth++;
    int rc = PMPI_Init(argc, argv);
    g_depth--;
    if (g_depth) return rc;
    tracer_start(t0);
    if (g_on) {
        ev_t e;
        memset(&e, 0, sizeof e);
        e.op = OP_INIT;
        emit(&e, t0, now_ns(), __builtin_return_address(0));
    }
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    uint64_t t0 = now_ns();
    g_depth++;
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    g_depth--;
    if (g_depth) return rc;
    tracer_start(t0);
    if (g_on) {
        ev_t e;
        memset(&e, 0, sizeof e);
        e.op = OP_INIT_THREAD;
        emit(&e, t0, now_ns(), __builtin_return_address(0));
    }
    return rc;
}

int MPI_Finalize(void) {
    if (!TRACED) return PMPI_Finalize();
    void *ra = __builtin_return_address(0);
    uint64_t t0 = now_ns();
    g_depth++;
    int rc = PMPI_Finalize();
    g_depth--;
    ev_t e;
    memset(&e, 0, sizeof e);
    e.op = OP_FINALIZE;
    emit(&e, t0, now_ns(), ra);
    tracer_stop();
    return rc;
}

int MPI_Abort(MPI_Comm comm, int code) {
    if (TRACED) {
        ev_t e;
        memset(&e, 0, sizeof e);
        e.op = OP_ABORT;
        e.mask = F_COMM | F_FLAG;
        e.comm = comm_get(comm)->id;
        e.flag = (uint64_t)(uint32_t)code;
        uint64_t t = now_ns();
        emit(&e, t, t, __builtin_return_address(0));
        flush_buf();
    }
    return PMPI_Abort(comm, code);
}

/* ---- point to point ---- */

#define SEND_LIKE(NAME, OPC)                                                         \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag,    \
                   MPI_Comm comm) {                                                   \
        BEGIN(PMPI_##NAME(buf, count, dt, dest, tag, comm));                          \
        ev_p2p(&e_, comm, dest, tag, count, dt);                                      \
        END(OPC);                                                                     \
    }
SEND_LIKE(Send, OP_SEND)
SEND_LIKE(Bsend, OP_BSEND)
SEND_LIKE(Ssend, OP_SSEND)
SEND_LIKE(Rsend, OP_RSEND)

#define ISEND_LIKE(NAME, OPC)                                                        \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag,    \
                   MPI_Comm comm, MPI_Request *req) {                                 \
        BEGIN(PMPI_##NAME(buf, count, dt, dest, tag, comm, req));                     \
        ev_p2p(&e_, comm, dest, tag, count, dt);                                      \
        e_.mask |= F_REQ;                                                             \
        e_.req = req_new(*req);                                                       \
        END(OPC);                                                                     \
    }
ISEND_LIKE(Isend, OP_ISEND)
ISEND_LIKE(Ibsend, OP_IBSEND)
ISEND_LIKE(Issend, OP_ISSEND)
ISEND_LIKE(Irsend, OP_IRSEND)

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    BEGIN(PMPI_Recv(buf, count, dt, source, tag, comm, st));
    ev_p2p(&e_, comm, source, tag, count, dt);
    if (source != MPI_PROC_NULL) ev_recv_status(&e_, comm, st, dt);
    END(OP_RECV);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
              MPI_Request *req) {
    BEGIN(PMPI_Irecv(buf, count, dt, source, tag, comm, req));
    ev_p2p(&e_, comm, source, tag, count, dt);
    e_.mask |= F_REQ;
    e_.req = req_new(*req);
    END(OP_IRECV);
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                 void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag,
                 MPI_Comm comm, MPI_Status *status) {
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    BEGIN(PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag,
                        comm, st));
    comm_t *c = comm_get(comm);
    ev_p2p(&e_, comm, dest, stag, scount, stype);
    e_.mask |= F_SRC | F_RTAG | F_RBYTES;
    e_.src = to_world(c, source);
    e_.rtag = norm_tag(rtag);
    e_.rbytes = 0;
    if (source != MPI_PROC_NULL) {
        int n = 0;
        e_.src = to_world(c, st->MPI_SOURCE);
        e_.rtag = norm_tag(st->MPI_TAG);
        PMPI_Get_count(st, rtype, &n);
        if (n != MPI_UNDEFINED) e_.rbytes = type_bytes(rtype, n);
    }
    END(OP_SENDRECV);
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int stag,
                         int source, int rtag, MPI_Comm comm, MPI_Status *status) {
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    BEGIN(PMPI_Sendrecv_replace(buf, count, dt, dest, stag, source, rtag, comm, st));
    comm_t *c = comm_get(comm);
    ev_p2p(&e_, comm, dest, stag, count, dt);
    e_.mask |= F_SRC | F_RTAG | F_RBYTES;
    e_.src = to_world(c, source == MPI_PROC_NULL ? source : st->MPI_SOURCE);
    e_.rtag = norm_tag(source == MPI_PROC_NULL ? rtag : st->MPI_TAG);
    e_.rbytes = source == MPI_PROC_NULL ? 0 : type_bytes(dt, count);
    END(OP_SENDRECV_REPLACE);
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    BEGIN(PMPI_Probe(source, tag, comm, st));
    ev_p2p(&e_, comm, source, tag, 0, MPI_BYTE);
    if (source != MPI_PROC_NULL) ev_recv_status(&e_, comm, st, MPI_BYTE);
    END(OP_PROBE);
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    BEGIN(PMPI_Iprobe(source, tag, comm, flag, st));
    ev_p2p(&e_, comm, source, tag, 0, MPI_BYTE);
    if (*flag && source != MPI_PROC_NULL) ev_recv_status(&e_, comm, st, MPI_BYTE);
    e_.mask |= F_FLAG;
    e_.flag = (uint64_t)(*flag != 0);
    END(OP_IPROBE);
}

/* ---- completion ---- */

/* Pops the ids of the requests completed at the given positions of `before` (the
 * handles as they were before the call; all positions when idx is NULL) into `ids`, and
 * sets the event's request list. */
static void complete_reqs(ev_t *e, uint64_t *ids, const MPI_Request *before, int n,
                          const int *idx, int n_idx) {
    int k = 0;
    int m = idx ? n_idx : n;
    for (int j = 0; j < m; j++) {
        int i = idx ? idx[j] : j;
        if (i < 0 || i >= n) continue;
        uint64_t id = req_pop(before[i]);
        if (id) ids[k++] = id;
    }
    e->mask |= F_REQS;
    e->reqs = ids;
    e->n_reqs = k;
}

int MPI_Wait(MPI_Request *req, MPI_Status *status) {
    MPI_Request before = *req;
    uint64_t id = 0;
    BEGIN(PMPI_Wait(req, status));
    complete_reqs(&e_, &id, &before, 1, NULL, 0);
    END(OP_WAIT);
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
    MPI_Request before = *req;
    uint64_t id = 0;
    BEGIN(PMPI_Test(req, flag, status));
    complete_reqs(&e_, &id, &before, *flag ? 1 : 0, NULL, 0);
    e_.mask |= F_FLAG;
    e_.flag = (uint64_t)(*flag != 0);
    END(OP_TEST);
}

#define WAIT_MANY(NAME, OPC, CALL, DONE, IDX, NIDX, FLAG)                            \
    if (!TRACED) return CALL;                                                        \
    int n_ = count > 0 ? count : 0;                                                  \
    uint64_t ids_small[64];                                                          \
    uint64_t *ids = n_ <= 64 ? ids_small : malloc(sizeof(uint64_t) * (size_t)n_);    \
    MPI_Request before_small[64];                                                    \
    MPI_Request *before = n_ <= 64 ? before_small : malloc(sizeof(MPI_Request) * (size_t)n_); \
    if (n_) memcpy(before, reqs, sizeof(MPI_Request) * (size_t)n_);                   \
    void *ra_ = __builtin_return_address(0);                                         \
    g_depth++;                                                                       \
    uint64_t t0_ = now_ns();                                                         \
    int rc_ = CALL;                                                                  \
    uint64_t t1_ = now_ns();                                                         \
    ev_t e_;                                                                         \
    memset(&e_, 0, sizeof e_);                                                       \
    complete_reqs(&e_, ids, before, (DONE) ? n_ : 0, IDX, NIDX);                     \
    if (FLAG) {                                                                      \
        e_.mask |= F_FLAG;                                                           \
        e_.flag = (uint64_t)((DONE) != 0);                                           \
    }                                                                                \
    e_.op = OPC;                                                                     \
    emit(&e_, t0_, t1_, ra_);                                                        \
    g_depth--;                                                                       \
    if (ids != ids_small) free(ids);                                                 \
    if (before != before_small) free(before);                                        \
    return rc_

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[]) {
    WAIT_MANY(Waitall, OP_WAITALL, PMPI_Waitall(count, reqs, statuses), 1, NULL, 0, 0);
}
int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[]) {
    WAIT_MANY(Testall, OP_TESTALL, PMPI_Testall(count, reqs, flag, statuses), *flag, NULL,
              0, 1);
}
int MPI_Waitany(int count, MPI_Request reqs[], int *index, MPI_Status *status) {
    WAIT_MANY(Waitany, OP_WAITANY, PMPI_Waitany(count, reqs, index, status),
              *index != MPI_UNDEFINED, index, 1, 0);
}
int MPI_Testany(int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
    WAIT_MANY(Testany, OP_TESTANY, PMPI_Testany(count, reqs, index, flag, status),
              *flag && *index != MPI_UNDEFINED, index, 1, 1);
}
int MPI_Waitsome(int count, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[]) {
    WAIT_MANY(Waitsome, OP_WAITSOME, PMPI_Waitsome(count, reqs, outcount, indices, statuses),
              *outcount != MPI_UNDEFINED && *outcount > 0, indices, *outcount, 0);
}
int MPI_Testsome(int count, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[]) {
    WAIT_MANY(Testsome, OP_TESTSOME, PMPI_Testsome(count, reqs, outcount, indices, statuses),
              *outcount != MPI_UNDEFINED && *outcount > 0, indices, *outcount, 1);
}

/* A cancel names the request it cancels; the wait or test that completes it follows. */
int MPI_Cancel(MPI_Request *req) {
    MPI_Request before = *req;
    uint64_t id = 0;
    BEGIN(PMPI_Cancel(req));
    id = req_peek(before);
    e_.mask |= F_REQS;
    e_.reqs = &id;
    e_.n_reqs = id ? 1 : 0;
    END(OP_CANCEL);
}

int MPI_Request_free(MPI_Request *req) {
    if (TRACED) {
        req_pop(*req);
        persist_forget(*req);
    }
    return PMPI_Request_free(req);
}

/* ---- persistent requests ---- */

/* Remembers what starting the persistent request `req` records (see core.h). */
static void persist_init(unsigned op, MPI_Comm comm, int peer, int tag, int64_t count,
                         MPI_Datatype dt, MPI_Request req) {
    ev_t e;
    memset(&e, 0, sizeof e);
    e.op = op;
    ev_p2p(&e, comm, peer, tag, (int)count, dt);
    persist_put(req, &e);
}

#define P2P_INIT(NAME, OPC, CONST)                                                   \
    int MPI_##NAME(CONST void *buf, int count, MPI_Datatype dt, int peer, int tag,    \
                   MPI_Comm comm, MPI_Request *req) {                                 \
        if (!TRACED) return PMPI_##NAME(buf, count, dt, peer, tag, comm, req);        \
        g_depth++;                                                                   \
        int rc = PMPI_##NAME(buf, count, dt, peer, tag, comm, req);                  \
        if (rc == MPI_SUCCESS) persist_init(OPC, comm, peer, tag, count, dt, *req);  \
        g_depth--;                                                                   \
        return rc;                                                                   \
    }
P2P_INIT(Send_init, OP_ISEND, const)
P2P_INIT(Bsend_init, OP_IBSEND, const)
P2P_INIT(Ssend_init, OP_ISSEND, const)
P2P_INIT(Rsend_init, OP_IRSEND, const)
P2P_INIT(Recv_init, OP_IRECV, )

int MPI_Start(MPI_Request *req) {
    if (!TRACED) return PMPI_Start(req);
    void *ra = __builtin_return_address(0);
    MPI_Request handle = *req;
    g_depth++;
    uint64_t t0 = now_ns();
    int rc = PMPI_Start(req);
    uint64_t t1 = now_ns();
    if (rc == MPI_SUCCESS) persist_starts(&handle, 1, t0, t1, ra);
    g_depth--;
    return rc;
}

int MPI_Startall(int count, MPI_Request reqs[]) {
    if (!TRACED) return PMPI_Startall(count, reqs);
    void *ra = __builtin_return_address(0);
    g_depth++;
    uint64_t t0 = now_ns();
    int rc = PMPI_Startall(count, reqs);
    uint64_t t1 = now_ns();
    if (rc == MPI_SUCCESS) persist_starts(reqs, count, t0, t1, ra);
    g_depth--;
    return rc;
}

/* ---- collectives ---- */

int MPI_Barrier(MPI_Comm comm) {
    BEGIN(PMPI_Barrier(comm));
    ev_coll(&e_, comm, 0, 0);
    END(OP_BARRIER);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
    BEGIN(PMPI_Bcast(buf, count, dt, root, comm));
    uint64_t b = type_bytes(dt, count);
    ev_coll(&e_, comm, comm_rank(comm) == root ? b : 0, comm_rank(comm) == root ? 0 : b);
    ev_root(&e_, comm, root);
    END(OP_BCAST);
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
               MPI_Comm comm) {
    BEGIN(PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm));
    uint64_t b = type_bytes(dt, count);
    ev_coll(&e_, comm, b, comm_rank(comm) == root ? b : 0);
    ev_root(&e_, comm, root);
    END(OP_REDUCE);
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                  MPI_Comm comm) {
    BEGIN(PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm));
    uint64_t b = type_bytes(dt, count);
    ev_coll(&e_, comm, b, b);
    END(OP_ALLREDUCE);
}

int MPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
             MPI_Comm comm) {
    BEGIN(PMPI_Scan(sbuf, rbuf, count, dt, op, comm));
    uint64_t b = type_bytes(dt, count);
    ev_coll(&e_, comm, b, b);
    END(OP_SCAN);
}

int MPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
               MPI_Comm comm) {
    BEGIN(PMPI_Exscan(sbuf, rbuf, count, dt, op, comm));
    uint64_t b = type_bytes(dt, count);
    ev_coll(&e_, comm, b, b);
    END(OP_EXSCAN);
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm) {
    BEGIN(PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
    int is_root = comm_rank(comm) == root;
    uint64_t sb = sbuf == MPI_IN_PLACE ? type_bytes(rtype, rcount) : type_bytes(stype, scount);
    ev_coll(&e_, comm, sb, is_root ? type_bytes(rtype, (int64_t)rcount * comm_size(comm)) : 0);
    ev_root(&e_, comm, root);
    END(OP_GATHER);
}

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                const int rcounts[], const int displs[], MPI_Datatype rtype, int root,
                MPI_Comm comm) {
    BEGIN(PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm));
    int is_root = comm_rank(comm) == root;
    uint64_t sb = sbuf == MPI_IN_PLACE ? 0 : type_bytes(stype, scount);
    ev_coll(&e_, comm, sb,
            is_root ? type_bytes(rtype, sum_counts(rcounts, comm_size(comm))) : 0);
    ev_root(&e_, comm, root);
    END(OP_GATHERV);
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm) {
    BEGIN(PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
    int is_root = comm_rank(comm) == root;
    ev_coll(&e_, comm, is_root ? type_bytes(stype, (int64_t)scount * comm_size(comm)) : 0,
            rbuf == MPI_IN_PLACE ? 0 : type_bytes(rtype, rcount));
    ev_root(&e_, comm, root);
    END(OP_SCATTER);
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[],
                 MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
                 MPI_Comm comm) {
    BEGIN(PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm));
    int is_root = comm_rank(comm) == root;
    ev_coll(&e_, comm, is_root ? type_bytes(stype, sum_counts(scounts, comm_size(comm))) : 0,
            rbuf == MPI_IN_PLACE ? 0 : type_bytes(rtype, rcount));
    ev_root(&e_, comm, root);
    END(OP_SCATTERV);
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm) {
    BEGIN(PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
    uint64_t sb = sbuf == MPI_IN_PLACE ? type_bytes(rtype, rcount) : type_bytes(stype, scount);
    ev_coll(&e_, comm, sb, type_bytes(rtype, (int64_t)rcount * comm_size(comm)));
    END(OP_ALLGATHER);
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                   const int rcounts[], const int displs[], MPI_Datatype rtype,
                   MPI_Comm comm) {
    BEGIN(PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm));
    uint64_t sb = sbuf == MPI_IN_PLACE ? 0 : type_bytes(stype, scount);
    ev_coll(&e_, comm, sb, type_bytes(rtype, sum_counts(rcounts, comm_size(comm))));
    END(OP_ALLGATHERV);
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm) {
    BEGIN(PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
    int n = comm_size(comm);
    uint64_t rb = type_bytes(rtype, (int64_t)rcount * n);
    ev_coll(&e_, comm, sbuf == MPI_IN_PLACE ? rb : type_bytes(stype, (int64_t)scount * n), rb);
    END(OP_ALLTOALL);
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[],
                  MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                  MPI_Datatype rtype, MPI_Comm comm) {
    BEGIN(PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm));
    int n = comm_size(comm);
    uint64_t rb = type_bytes(rtype, sum_counts(rcounts, n));
    ev_coll(&e_, comm, sbuf == MPI_IN_PLACE ? rb : type_bytes(stype, sum_counts(scounts, n)),
            rb);
    END(OP_ALLTOALLV);
}

int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype dt,
                       MPI_Op op, MPI_Comm comm) {
    BEGIN(PMPI_Reduce_scatter(sbuf, rbuf, rcounts, dt, op, comm));
    ev_coll(&e_, comm, type_bytes(dt, sum_counts(rcounts, comm_size(comm))),
            type_bytes(dt, rcounts[comm_rank(comm)]));
    END(OP_REDUCE_SCATTER);
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt,
                             MPI_Op op, MPI_Comm comm) {
    BEGIN(PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm));
    ev_coll(&e_, comm, type_bytes(dt, (int64_t)rcount * comm_size(comm)),
            type_bytes(dt, rcount));
    END(OP_REDUCE_SCATTER_BLOCK);
}

/* ---- nonblocking collectives ---- */

#define NB_REQ()                                                                     \
    e_.mask |= F_REQ;                                                                \
    e_.req = req_new(*req)

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Ibarrier(comm, req));
    ev_coll(&e_, comm, 0, 0);
    NB_REQ();
    END(OP_IBARRIER);
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
               MPI_Request *req) {
    BEGIN(PMPI_Ibcast(buf, count, dt, root, comm, req));
    uint64_t b = type_bytes(dt, count);
    ev_coll(&e_, comm, comm_rank(comm) == root ? b : 0, comm_rank(comm) == root ? 0 : b);
    ev_root(&e_, comm, root);
    NB_REQ();
    END(OP_IBCAST);
}

int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Ireduce(sbuf, rbuf, count, dt, op, root, comm, req));
    uint64_t b = type_bytes(dt, count);
    ev_coll(&e_, comm, b, comm_rank(comm) == root ? b : 0);
    ev_root(&e_, comm, root);
    NB_REQ();
    END(OP_IREDUCE);
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Iallreduce(sbuf, rbuf, count, dt, op, comm, req));
    uint64_t b = type_bytes(dt, count);
    ev_coll(&e_, comm, b, b);
    NB_REQ();
    END(OP_IALLREDUCE);
}

int MPI_Igather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req));
    int is_root = comm_rank(comm) == root;
    uint64_t sb = sbuf == MPI_IN_PLACE ? type_bytes(rtype, rcount) : type_bytes(stype, scount);
    ev_coll(&e_, comm, sb, is_root ? type_bytes(rtype, (int64_t)rcount * comm_size(comm)) : 0);
    ev_root(&e_, comm, root);
    NB_REQ();
    END(OP_IGATHER);
}

int MPI_Iscatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req));
    int is_root = comm_rank(comm) == root;
    ev_coll(&e_, comm, is_root ? type_bytes(stype, (int64_t)scount * comm_size(comm)) : 0,
            rbuf == MPI_IN_PLACE ? 0 : type_bytes(rtype, rcount));
    ev_root(&e_, comm, root);
    NB_REQ();
    END(OP_ISCATTER);
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
    uint64_t sb = sbuf == MPI_IN_PLACE ? type_bytes(rtype, rcount) : type_bytes(stype, scount);
    ev_coll(&e_, comm, sb, type_bytes(rtype, (int64_t)rcount * comm_size(comm)));
    NB_REQ();
    END(OP_IALLGATHER);
}

int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
    int n = comm_size(comm);
    uint64_t rb = type_bytes(rtype, (int64_t)rcount * n);
    ev_coll(&e_, comm, sbuf == MPI_IN_PLACE ? rb : type_bytes(stype, (int64_t)scount * n), rb);
    NB_REQ();
    END(OP_IALLTOALL);
}

int MPI_Igatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                 const int rcounts[], const int displs[], MPI_Datatype rtype, int root,
                 MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Igatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, req));
    int is_root = comm_rank(comm) == root;
    uint64_t sb = sbuf == MPI_IN_PLACE ? 0 : type_bytes(stype, scount);
    ev_coll(&e_, comm, sb,
            is_root ? type_bytes(rtype, sum_counts(rcounts, comm_size(comm))) : 0);
    ev_root(&e_, comm, root);
    NB_REQ();
    END(OP_IGATHERV);
}

int MPI_Iscatterv(const void *sbuf, const int scounts[], const int displs[],
                  MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
                  MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Iscatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, req));
    int is_root = comm_rank(comm) == root;
    ev_coll(&e_, comm, is_root ? type_bytes(stype, sum_counts(scounts, comm_size(comm))) : 0,
            rbuf == MPI_IN_PLACE ? 0 : type_bytes(rtype, rcount));
    ev_root(&e_, comm, root);
    NB_REQ();
    END(OP_ISCATTERV);
}

int MPI_Iallgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                    const int rcounts[], const int displs[], MPI_Datatype rtype,
                    MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req));
    uint64_t sb = sbuf == MPI_IN_PLACE ? 0 : type_bytes(stype, scount);
    ev_coll(&e_, comm, sb, type_bytes(rtype, sum_counts(rcounts, comm_size(comm))));
    NB_REQ();
    END(OP_IALLGATHERV);
}

int MPI_Ialltoallv(const void *sbuf, const int scounts[], const int sdispls[],
                   MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm,
                          req));
    int n = comm_size(comm);
    uint64_t rb = type_bytes(rtype, sum_counts(rcounts, n));
    ev_coll(&e_, comm, sbuf == MPI_IN_PLACE ? rb : type_bytes(stype, sum_counts(scounts, n)),
            rb);
    NB_REQ();
    END(OP_IALLTOALLV);
}

int MPI_Ireduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype dt,
                        MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Ireduce_scatter(sbuf, rbuf, rcounts, dt, op, comm, req));
    ev_coll(&e_, comm, type_bytes(dt, sum_counts(rcounts, comm_size(comm))),
            type_bytes(dt, rcounts[comm_rank(comm)]));
    NB_REQ();
    END(OP_IREDUCE_SCATTER);
}

int MPI_Ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt,
                              MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    BEGIN(PMPI_Ireduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm, req));
    ev_coll(&e_, comm, type_bytes(dt, (int64_t)rcount * comm_size(comm)),
            type_bytes(dt, rcount));
    NB_REQ();
    END(OP_IREDUCE_SCATTER_BLOCK);
}

#define ISCAN_LIKE(NAME, OPC)                                                        \
    int MPI_##NAME(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, \
                   MPI_Comm comm, MPI_Request *req) {                                 \
        BEGIN(PMPI_##NAME(sbuf, rbuf, count, dt, op, comm, req));                     \
        uint64_t b = type_bytes(dt, count);                                           \
        ev_coll(&e_, comm, b, b);                                                     \
        NB_REQ();                                                                     \
        END(OPC);                                                                     \
    }
ISCAN_LIKE(Iscan, OP_ISCAN)
ISCAN_LIKE(Iexscan, OP_IEXSCAN)

/* ---- communicators ---- */

static void ev_newcomm(ev_t *e, MPI_Comm parent, MPI_Comm created) {
    e->mask |= F_COMM;
    e->comm = comm_get(parent)->id;
    if (created != MPI_COMM_NULL) {
        e->mask |= F_NEWCOMM;
        comm_forget(HANDLE_KEY(created));
        e->newcomm = comm_register(created)->id;
    }
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
    BEGIN(PMPI_Comm_dup(comm, newcomm));
    ev_newcomm(&e_, comm, *newcomm);
    END(OP_COMM_DUP);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
    BEGIN(PMPI_Comm_split(comm, color, key, newcomm));
    ev_newcomm(&e_, comm, *newcomm);
    END(OP_COMM_SPLIT);
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
    BEGIN(PMPI_Comm_create(comm, group, newcomm));
    ev_newcomm(&e_, comm, *newcomm);
    END(OP_COMM_CREATE);
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[],
                    int reorder, MPI_Comm *newcomm) {
    BEGIN(PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm));
    ev_newcomm(&e_, comm, *newcomm);
    END(OP_CART_CREATE);
}

int MPI_Cart_sub(MPI_Comm comm, const int remain[], MPI_Comm *newcomm) {
    BEGIN(PMPI_Cart_sub(comm, remain, newcomm));
    ev_newcomm(&e_, comm, *newcomm);
    END(OP_CART_SUB);
}

int MPI_Comm_free(MPI_Comm *comm) {
    MPI_Comm before = *comm;
    uint64_t id = 0;
    if (TRACED) id = comm_get(before)->id;
    BEGIN(PMPI_Comm_free(comm));
    e_.mask |= F_COMM;
    e_.comm = id;
    comm_forget(HANDLE_KEY(before));
    END(OP_COMM_FREE);
}

/* ---- one-sided communication (format version 4) ----
 * Recorded so that the calls are seen and counted, not modelled: window creation names
 * the communicator and the local window size (bytes), synchronization names the
 * window's communicator (and the target, as a world rank, where there is one), data
 * movement the target and the origin buffer's bytes (rbytes: the result buffer's). */

#define WIN_NEW(OPC, SIZE)                                                           \
    if (rc_ == MPI_SUCCESS) win_register(*win, comm);                                \
    e_.mask |= F_COMM | F_BYTES;                                                     \
    e_.comm = comm_get(comm)->id;                                                    \
    e_.bytes = (uint64_t)(SIZE);                                                     \
    END(OPC)

int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                   MPI_Win *win) {
    BEGIN(PMPI_Win_create(base, size, disp_unit, info, comm, win));
    WIN_NEW(OP_WIN_CREATE, size > 0 ? size : 0);
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                     void *baseptr, MPI_Win *win) {
    BEGIN(PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win));
    WIN_NEW(OP_WIN_ALLOCATE, size > 0 ? size : 0);
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                            void *baseptr, MPI_Win *win) {
    BEGIN(PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win));
    WIN_NEW(OP_WIN_ALLOCATE_SHARED, size > 0 ? size : 0);
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win) {
    BEGIN(PMPI_Win_create_dynamic(info, comm, win));
    WIN_NEW(OP_WIN_CREATE_DYNAMIC, 0);
}

int MPI_Win_free(MPI_Win *win) {
    MPI_Win before = *win;
    BEGIN(PMPI_Win_free(win));
    ev_win(&e_, win_get(before));
    win_forget(HANDLE_KEY(before));
    END(OP_WIN_FREE);
}

#define WIN_SYNC(NAME, OPC, PARAMS, ARGS)                                            \
    int MPI_##NAME PARAMS {                                                          \
        BEGIN(PMPI_##NAME ARGS);                                                     \
        ev_win(&e_, win_get(win));                                                   \
        END(OPC);                                                                    \
    }
WIN_SYNC(Win_fence, OP_WIN_FENCE, (int assert_, MPI_Win win), (assert_, win))
WIN_SYNC(Win_lock_all, OP_WIN_LOCK_ALL, (int assert_, MPI_Win win), (assert_, win))
WIN_SYNC(Win_unlock_all, OP_WIN_UNLOCK_ALL, (MPI_Win win), (win))
WIN_SYNC(Win_flush_all, OP_WIN_FLUSH_ALL, (MPI_Win win), (win))
WIN_SYNC(Win_post, OP_WIN_POST, (MPI_Group group, int assert_, MPI_Win win),
         (group, assert_, win))
WIN_SYNC(Win_start, OP_WIN_START, (MPI_Group group, int assert_, MPI_Win win),
         (group, assert_, win))
WIN_SYNC(Win_complete, OP_WIN_COMPLETE, (MPI_Win win), (win))
WIN_SYNC(Win_wait, OP_WIN_WAIT, (MPI_Win win), (win))

int MPI_Win_lock(int lock_type, int rank, int assert_, MPI_Win win) {
    BEGIN(PMPI_Win_lock(lock_type, rank, assert_, win));
    ev_target(&e_, win_get(win), rank);
    END(OP_WIN_LOCK);
}

int MPI_Win_unlock(int rank, MPI_Win win) {
    BEGIN(PMPI_Win_unlock(rank, win));
    ev_target(&e_, win_get(win), rank);
    END(OP_WIN_UNLOCK);
}

int MPI_Win_flush(int rank, MPI_Win win) {
    BEGIN(PMPI_Win_flush(rank, win));
    ev_target(&e_, win_get(win), rank);
    END(OP_WIN_FLUSH);
}

/* Target and origin bytes of a data-moving call. */
static inline void ev_rma(ev_t *e, MPI_Win win, int target, int64_t count, MPI_Datatype dt) {
    ev_target(e, win_get(win), target);
    e->mask |= F_BYTES;
    e->bytes = target == MPI_PROC_NULL ? 0 : type_bytes(dt, count);
}

int MPI_Put(const void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint disp,
            int tcount, MPI_Datatype ttype, MPI_Win win) {
    BEGIN(PMPI_Put(obuf, ocount, otype, target, disp, tcount, ttype, win));
    ev_rma(&e_, win, target, ocount, otype);
    END(OP_PUT);
}

int MPI_Get(void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint disp,
            int tcount, MPI_Datatype ttype, MPI_Win win) {
    BEGIN(PMPI_Get(obuf, ocount, otype, target, disp, tcount, ttype, win));
    ev_rma(&e_, win, target, ocount, otype);
    END(OP_GET);
}

int MPI_Accumulate(const void *obuf, int ocount, MPI_Datatype otype, int target,
                   MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Op op, MPI_Win win) {
    BEGIN(PMPI_Accumulate(obuf, ocount, otype, target, disp, tcount, ttype, op, win));
    ev_rma(&e_, win, target, ocount, otype);
    END(OP_ACCUMULATE);
}

int MPI_Get_accumulate(const void *obuf, int ocount, MPI_Datatype otype, void *rbuf,
                       int rcount, MPI_Datatype rtype, int target, MPI_Aint disp, int tcount,
                       MPI_Datatype ttype, MPI_Op op, MPI_Win win) {
    BEGIN(PMPI_Get_accumulate(obuf, ocount, otype, rbuf, rcount, rtype, target, disp, tcount,
                              ttype, op, win));
    ev_rma(&e_, win, target, ocount, otype);
    e_.mask |= F_RBYTES;
    e_.rbytes = target == MPI_PROC_NULL ? 0 : type_bytes(rtype, rcount);
    END(OP_GET_ACCUMULATE);
}

int MPI_Fetch_and_op(const void *obuf, void *rbuf, MPI_Datatype dt, int target,
                     MPI_Aint disp, MPI_Op op, MPI_Win win) {
    BEGIN(PMPI_Fetch_and_op(obuf, rbuf, dt, target, disp, op, win));
    ev_rma(&e_, win, target, 1, dt);
    END(OP_FETCH_AND_OP);
}

int MPI_Compare_and_swap(const void *obuf, const void *cbuf, void *rbuf, MPI_Datatype dt,
                         int target, MPI_Aint disp, MPI_Win win) {
    BEGIN(PMPI_Compare_and_swap(obuf, cbuf, rbuf, dt, target, disp, win));
    ev_rma(&e_, win, target, 1, dt);
    END(OP_COMPARE_AND_SWAP);
}

int MPI_Rput(const void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint disp,
             int tcount, MPI_Datatype ttype, MPI_Win win, MPI_Request *req) {
    BEGIN(PMPI_Rput(obuf, ocount, otype, target, disp, tcount, ttype, win, req));
    ev_rma(&e_, win, target, ocount, otype);
    NB_REQ();
    END(OP_RPUT);
}

int MPI_Rget(void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint disp,
             int tcount, MPI_Datatype ttype, MPI_Win win, MPI_Request *req) {
    BEGIN(PMPI_Rget(obuf, ocount, otype, target, disp, tcount, ttype, win, req));
    ev_rma(&e_, win, target, ocount, otype);
    NB_REQ();
    END(OP_RGET);
}

/* ---- intercommunicators (format version 4) ----
 * The intercommunicator's communicator record lists the remote group (as point-to-point
 * peers on it are remote ranks); the merged intracommunicator is a new communicator. */

int MPI_Intercomm_create(MPI_Comm local, int local_leader, MPI_Comm peer_comm,
                         int remote_leader, int tag, MPI_Comm *newcomm) {
    BEGIN(PMPI_Intercomm_create(local, local_leader, peer_comm, remote_leader, tag, newcomm));
    ev_newcomm(&e_, local, *newcomm);
    /* The remote leader is a rank of peer_comm, which only the local leader must pass. */
    if (comm_rank(local) == local_leader && peer_comm != MPI_COMM_NULL) {
        e_.mask |= F_PEER;
        e_.peer = to_world(comm_get(peer_comm), remote_leader);
    }
    e_.mask |= F_TAG;
    e_.tag = norm_tag(tag);
    END(OP_INTERCOMM_CREATE);
}

int MPI_Intercomm_merge(MPI_Comm inter, int high, MPI_Comm *newcomm) {
    BEGIN(PMPI_Intercomm_merge(inter, high, newcomm));
    ev_newcomm(&e_, inter, *newcomm);
    e_.mask |= F_FLAG;
    e_.flag = (uint64_t)(high != 0);
    END(OP_INTERCOMM_MERGE);
}

int MPI_Comm_spawn(const char *command, char *argv[], int maxprocs, MPI_Info info, int root,
                   MPI_Comm comm, MPI_Comm *intercomm, int errcodes[]) {
    BEGIN(PMPI_Comm_spawn(command, argv, maxprocs, info, root, comm, intercomm, errcodes));
    ev_newcomm(&e_, comm, *intercomm);
    ev_root(&e_, comm, root);
    END(OP_COMM_SPAWN);
}
