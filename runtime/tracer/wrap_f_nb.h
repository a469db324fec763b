/* Wrappers of the Fortran bindings, continued (see wrap_f.h for the scheme): takes the
 * completion family with arrays (waitany, testany, waitsome, testsome, testall), the
 * nonblocking collectives, reduce_scatter_block and persistent requests (send_init & co.,
 * start, startall) from Fortran code, gives events to emit(). */

/* ---- completion ---- */

/* Fortran request handles (f08: TYPE(MPI_Request), the same integer) as C handles, in
 * `small` when they fit, else in memory the caller frees. */
static MPI_Request *f_reqs_c(const F *reqs, int n, MPI_Request *small, int cap) {
    MPI_Request *c = n <= cap ? small : malloc(sizeof(MPI_Request) * (size_t)n);
    if (!c) abort();
    for (int i = 0; i < n; i++) c[i] = MPI_Request_f2c(reqs[i]);
    return c;
}

/* Pops the requests completed at Fortran indices idx[0..n_idx) (counted from `base`),
 * or at every position when idx is NULL, and sets the event's request list. */
static void f_complete(ev_t *e, const MPI_Request *before, int n, const F *idx, int n_idx,
                       int base, uint64_t *ids) {
    if (!idx || n_idx <= 0) {
        complete_reqs(e, ids, before, idx ? 0 : n, NULL, 0);
        return;
    }
    int small[64];
    int *c = n_idx <= 64 ? small : malloc(sizeof(int) * (size_t)n_idx);
    if (!c) abort();
    for (int j = 0; j < n_idx; j++) c[j] = idx[j] - base;
    complete_reqs(e, ids, before, n, c, n_idx);
    if (c != small) free(c);
}

typedef void (*f_waitany_t)(F *, F *, F *, F *, F *);
typedef void (*f_testany_t)(F *, F *, F *, F *, F *, F *);
typedef void (*f_waitsome_t)(F *, F *, F *, F *, F *, F *);
typedef void (*f_testall_t)(F *, F *, F *, F *, F *);
enum { K_WAITANY, K_TESTANY, K_WAITSOME, K_TESTSOME };

/* The base of the indices a waitany/testany/waitsome/testsome binding returns. The
 * standard says 1, but MPICH 4.0's mpi_f08 bindings return 0-based indices
 * (pmodels/mpich#6270, fixed in 4.1). The first traced call of each binding asks the
 * routine itself: it completes an MPI_Ibarrier on MPI_COMM_SELF placed second in
 * [MPI_REQUEST_NULL, request]; index 2 means 1-based, 1 means 0-based. */
static int f_index_base(void (*fn)(void), int kind) {
    MPI_Request c;
    F reqs[2], cnt = 2, idx = -1, flag = 0, out = 0, ind[2] = {-1, -1}, ierr = 0;
    MPI_Status st[2];
    g_depth++;
    reqs[0] = MPI_Request_c2f(MPI_REQUEST_NULL);
    if (PMPI_Ibarrier(MPI_COMM_SELF, &c) != MPI_SUCCESS) {
        g_depth--;
        return 1;
    }
    reqs[1] = MPI_Request_c2f(c);
    switch (kind) {
    case K_WAITANY:
        ((f_waitany_t)fn)(&cnt, reqs, &idx, (F *)st, &ierr);
        break;
    case K_TESTANY:
        do ((f_testany_t)fn)(&cnt, reqs, &idx, &flag, (F *)st, &ierr);
        while (!flag && !ierr);
        break;
    default:
        do {
            ((f_waitsome_t)fn)(&cnt, reqs, &out, ind, (F *)st, &ierr);
            idx = out > 0 && out != MPI_UNDEFINED ? ind[0] : -1;
        } while (kind == K_TESTSOME && out == 0 && !ierr);
        break;
    }
    g_depth--;
    return idx == 1 ? 0 : 1;
}

/* Shared body of the array completions: `CALL` is the real routine's call, `DONE` says
 * whether it completed anything, IDX/NIDX are the Fortran indices completed (NULL: all),
 * KIND the index probe (-1: none), FLAG whether the event gets a flag. */
#define F_WAIT_MANY(lname, type, OPC, CALL, DONE, IDX, NIDX, KIND, FLAG)             \
    FREAL(lname, type);                                                              \
    if (!TRACED) {                                                                   \
        g_depth++;                                                                   \
        CALL;                                                                        \
        g_depth--;                                                                   \
        return;                                                                      \
    }                                                                                \
    static int base_ = -1;                                                           \
    if (base_ < 0) base_ = (KIND) < 0 ? 1 : f_index_base((void (*)(void))real_, KIND); \
    int n = *count > 0 ? *count : 0;                                                 \
    MPI_Request small_[64];                                                          \
    uint64_t ids_small[64];                                                          \
    MPI_Request *before = f_reqs_c(reqs, n, small_, 64);                             \
    uint64_t *ids = n <= 64 ? ids_small : malloc(sizeof(uint64_t) * (size_t)n);      \
    if (!ids) abort();                                                               \
    FBEGIN(CALL);                                                                    \
    int done_ = (DONE);                                                              \
    f_complete(&e_, before, done_ ? n : 0, IDX, done_ ? (NIDX) : 0, base_, ids);     \
    if (FLAG) {                                                                      \
        e_.mask |= F_FLAG;                                                           \
        e_.flag = (uint64_t)(done_ != 0);                                            \
    }                                                                                \
    FEND(OPC);                                                                       \
    if (before != small_) free(before);                                              \
    if (ids != ids_small) free(ids)

#define FDEF_MPI_WAITANY(lname, f08)                                                 \
    void lname(F *count, F *reqs, F *index, F *status, F *ierr) {                    \
        F_WAIT_MANY(lname, f_waitany_t, OP_WAITANY,                                  \
                    real_(count, reqs, index, status, ierr),                         \
                    *index != MPI_UNDEFINED, index, 1, K_WAITANY, 0);                \
    }
FDEF_MPI_WAITANY(mpi_waitany_, 0)
FALIAS(mpi_waitany_, mpi_waitany__, MPI_WAITANY)
FDEF_MPI_WAITANY(mpi_waitany_f08_, 1)
FDEF_MPI_WAITANY(mpi_waitany_f08ts_, 1)

#define FDEF_MPI_TESTANY(lname, f08)                                                 \
    void lname(F *count, F *reqs, F *index, F *flag, F *status, F *ierr) {           \
        F_WAIT_MANY(lname, f_testany_t, OP_TESTANY,                                  \
                    real_(count, reqs, index, flag, status, ierr),                   \
                    *flag && *index != MPI_UNDEFINED, index, 1, K_TESTANY, 1);       \
    }
FDEF_MPI_TESTANY(mpi_testany_, 0)
FALIAS(mpi_testany_, mpi_testany__, MPI_TESTANY)
FDEF_MPI_TESTANY(mpi_testany_f08_, 1)
FDEF_MPI_TESTANY(mpi_testany_f08ts_, 1)

#define FDEF_MPI_WAITSOME(lname, OPC, KIND, FLAG)                                    \
    void lname(F *count, F *reqs, F *outcount, F *indices, F *statuses, F *ierr) {   \
        F_WAIT_MANY(lname, f_waitsome_t, OPC,                                        \
                    real_(count, reqs, outcount, indices, statuses, ierr),           \
                    *outcount != MPI_UNDEFINED && *outcount > 0, indices, *outcount, \
                    KIND, FLAG);                                                     \
    }
FDEF_MPI_WAITSOME(mpi_waitsome_, OP_WAITSOME, K_WAITSOME, 0)
FALIAS(mpi_waitsome_, mpi_waitsome__, MPI_WAITSOME)
FDEF_MPI_WAITSOME(mpi_waitsome_f08_, OP_WAITSOME, K_WAITSOME, 0)
FDEF_MPI_WAITSOME(mpi_waitsome_f08ts_, OP_WAITSOME, K_WAITSOME, 0)
FDEF_MPI_WAITSOME(mpi_testsome_, OP_TESTSOME, K_TESTSOME, 1)
FALIAS(mpi_testsome_, mpi_testsome__, MPI_TESTSOME)
FDEF_MPI_WAITSOME(mpi_testsome_f08_, OP_TESTSOME, K_TESTSOME, 1)
FDEF_MPI_WAITSOME(mpi_testsome_f08ts_, OP_TESTSOME, K_TESTSOME, 1)

#define FDEF_MPI_TESTALL(lname, f08)                                                 \
    void lname(F *count, F *reqs, F *flag, F *statuses, F *ierr) {                   \
        F_WAIT_MANY(lname, f_testall_t, OP_TESTALL,                                  \
                    real_(count, reqs, flag, statuses, ierr), *flag, NULL, 0, -1, 1); \
    }
FDEF_MPI_TESTALL(mpi_testall_, 0)
FALIAS(mpi_testall_, mpi_testall__, MPI_TESTALL)
FDEF_MPI_TESTALL(mpi_testall_f08_, 1)
FDEF_MPI_TESTALL(mpi_testall_f08ts_, 1)

/* ---- nonblocking collectives ---- */

#define F_NB_REQ()                                                                   \
    e_.mask |= F_REQ;                                                                \
    e_.req = req_new(MPI_Request_f2c(*req))

typedef void (*f_ibcast_t)(void *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_IBCAST(lname, f08)                                                  \
    void lname(void *buf, F *count, F *dt, F *root, F *comm, F *req, F *ierr) {      \
        FREAL(lname, f_ibcast_t);                                                    \
        FBEGIN(real_(buf, count, dt, root, comm, req, ierr));                        \
        MPI_Comm c = CCOMM(comm);                                                    \
        uint64_t b = type_bytes(CTYPE(dt), *count);                                  \
        int is_root = comm_rank(c) == *root;                                         \
        ev_coll(&e_, c, is_root ? b : 0, is_root ? 0 : b);                           \
        ev_root(&e_, c, *root);                                                      \
        F_NB_REQ();                                                                  \
        FEND(OP_IBCAST);                                                             \
    }
FDEF_MPI_IBCAST(mpi_ibcast_, 0)
FALIAS(mpi_ibcast_, mpi_ibcast__, MPI_IBCAST)
FDEF_MPI_IBCAST(mpi_ibcast_f08_, 1)
FDEF_MPI_IBCAST(mpi_ibcast_f08ts_, 1)

typedef void (*f_ireduce_t)(void *, void *, F *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_IREDUCE(lname, f08)                                                 \
    void lname(void *sbuf, void *rbuf, F *count, F *dt, F *op, F *root, F *comm,     \
               F *req, F *ierr) {                                                    \
        FREAL(lname, f_ireduce_t);                                                   \
        FBEGIN(real_(sbuf, rbuf, count, dt, op, root, comm, req, ierr));             \
        MPI_Comm c = CCOMM(comm);                                                    \
        uint64_t b = type_bytes(CTYPE(dt), *count);                                  \
        ev_coll(&e_, c, b, comm_rank(c) == *root ? b : 0);                           \
        ev_root(&e_, c, *root);                                                      \
        F_NB_REQ();                                                                  \
        FEND(OP_IREDUCE);                                                            \
    }
FDEF_MPI_IREDUCE(mpi_ireduce_, 0)
FALIAS(mpi_ireduce_, mpi_ireduce__, MPI_IREDUCE)
FDEF_MPI_IREDUCE(mpi_ireduce_f08_, 1)
FDEF_MPI_IREDUCE(mpi_ireduce_f08ts_, 1)

/* igather and iscatter share the argument list; GATHER says which one it is. */
typedef void (*f_igather_t)(void *, F *, F *, void *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_IGATHER(lname, OPC, GATHER)                                         \
    void lname(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype,     \
               F *root, F *comm, F *req, F *ierr) {                                  \
        FREAL(lname, f_igather_t);                                                   \
        FBEGIN(real_(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req, ierr)); \
        MPI_Comm c = CCOMM(comm);                                                    \
        int is_root = comm_rank(c) == *root, n = comm_size(c);                       \
        if (GATHER)                                                                  \
            ev_coll(&e_, c, type_bytes(CTYPE(stype), *scount),                       \
                    is_root ? type_bytes(CTYPE(rtype), (int64_t)*rcount * n) : 0);   \
        else                                                                         \
            ev_coll(&e_, c, is_root ? type_bytes(CTYPE(stype), (int64_t)*scount * n) : 0, \
                    type_bytes(CTYPE(rtype), *rcount));                              \
        ev_root(&e_, c, *root);                                                      \
        F_NB_REQ();                                                                  \
        FEND(OPC);                                                                   \
    }
FDEF_MPI_IGATHER(mpi_igather_, OP_IGATHER, 1)
FALIAS(mpi_igather_, mpi_igather__, MPI_IGATHER)
FDEF_MPI_IGATHER(mpi_igather_f08_, OP_IGATHER, 1)
FDEF_MPI_IGATHER(mpi_igather_f08ts_, OP_IGATHER, 1)
FDEF_MPI_IGATHER(mpi_iscatter_, OP_ISCATTER, 0)
FALIAS(mpi_iscatter_, mpi_iscatter__, MPI_ISCATTER)
FDEF_MPI_IGATHER(mpi_iscatter_f08_, OP_ISCATTER, 0)
FDEF_MPI_IGATHER(mpi_iscatter_f08ts_, OP_ISCATTER, 0)

typedef void (*f_igatherv_t)(void *, F *, F *, void *, F *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_IGATHERV(lname, f08)                                                \
    void lname(void *sbuf, F *scount, F *stype, void *rbuf, F *rcounts, F *displs,   \
               F *rtype, F *root, F *comm, F *req, F *ierr) {                        \
        FREAL(lname, f_igatherv_t);                                                  \
        FBEGIN(real_(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, req, \
                     ierr));                                                         \
        MPI_Comm c = CCOMM(comm);                                                    \
        int is_root = comm_rank(c) == *root;                                         \
        ev_coll(&e_, c, type_bytes(CTYPE(stype), *scount),                           \
                is_root ? type_bytes(CTYPE(rtype), sum_counts(rcounts, comm_size(c))) : 0); \
        ev_root(&e_, c, *root);                                                      \
        F_NB_REQ();                                                                  \
        FEND(OP_IGATHERV);                                                           \
    }
FDEF_MPI_IGATHERV(mpi_igatherv_, 0)
FALIAS(mpi_igatherv_, mpi_igatherv__, MPI_IGATHERV)
FDEF_MPI_IGATHERV(mpi_igatherv_f08_, 1)
FDEF_MPI_IGATHERV(mpi_igatherv_f08ts_, 1)

typedef void (*f_iscatterv_t)(void *, F *, F *, F *, void *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_ISCATTERV(lname, f08)                                               \
    void lname(void *sbuf, F *scounts, F *displs, F *stype, void *rbuf, F *rcount,   \
               F *rtype, F *root, F *comm, F *req, F *ierr) {                        \
        FREAL(lname, f_iscatterv_t);                                                 \
        FBEGIN(real_(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, req, \
                     ierr));                                                         \
        MPI_Comm c = CCOMM(comm);                                                    \
        int is_root = comm_rank(c) == *root;                                         \
        ev_coll(&e_, c,                                                              \
                is_root ? type_bytes(CTYPE(stype), sum_counts(scounts, comm_size(c))) : 0, \
                type_bytes(CTYPE(rtype), *rcount));                                  \
        ev_root(&e_, c, *root);                                                      \
        F_NB_REQ();                                                                  \
        FEND(OP_ISCATTERV);                                                          \
    }
FDEF_MPI_ISCATTERV(mpi_iscatterv_, 0)
FALIAS(mpi_iscatterv_, mpi_iscatterv__, MPI_ISCATTERV)
FDEF_MPI_ISCATTERV(mpi_iscatterv_f08_, 1)
FDEF_MPI_ISCATTERV(mpi_iscatterv_f08ts_, 1)

/* iallgather sends one block, ialltoall one per rank (MUL). */
typedef void (*f_ia2a_t)(void *, F *, F *, void *, F *, F *, F *, F *, F *);
#define FDEF_MPI_IALL(lname, OPC, MUL)                                               \
    void lname(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype,     \
               F *comm, F *req, F *ierr) {                                           \
        FREAL(lname, f_ia2a_t);                                                      \
        FBEGIN(real_(sbuf, scount, stype, rbuf, rcount, rtype, comm, req, ierr));    \
        MPI_Comm c = CCOMM(comm);                                                    \
        int n = comm_size(c);                                                        \
        ev_coll(&e_, c, type_bytes(CTYPE(stype), (int64_t)*scount * ((MUL) ? n : 1)), \
                type_bytes(CTYPE(rtype), (int64_t)*rcount * n));                     \
        F_NB_REQ();                                                                  \
        FEND(OPC);                                                                   \
    }
FDEF_MPI_IALL(mpi_iallgather_, OP_IALLGATHER, 0)
FALIAS(mpi_iallgather_, mpi_iallgather__, MPI_IALLGATHER)
FDEF_MPI_IALL(mpi_iallgather_f08_, OP_IALLGATHER, 0)
FDEF_MPI_IALL(mpi_iallgather_f08ts_, OP_IALLGATHER, 0)
FDEF_MPI_IALL(mpi_ialltoall_, OP_IALLTOALL, 1)
FALIAS(mpi_ialltoall_, mpi_ialltoall__, MPI_IALLTOALL)
FDEF_MPI_IALL(mpi_ialltoall_f08_, OP_IALLTOALL, 1)
FDEF_MPI_IALL(mpi_ialltoall_f08ts_, OP_IALLTOALL, 1)

typedef void (*f_iallgatherv_t)(void *, F *, F *, void *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_IALLGATHERV(lname, f08)                                             \
    void lname(void *sbuf, F *scount, F *stype, void *rbuf, F *rcounts, F *displs,   \
               F *rtype, F *comm, F *req, F *ierr) {                                 \
        FREAL(lname, f_iallgatherv_t);                                               \
        FBEGIN(real_(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req, ierr)); \
        MPI_Comm c = CCOMM(comm);                                                    \
        ev_coll(&e_, c, type_bytes(CTYPE(stype), *scount),                           \
                type_bytes(CTYPE(rtype), sum_counts(rcounts, comm_size(c))));        \
        F_NB_REQ();                                                                  \
        FEND(OP_IALLGATHERV);                                                        \
    }
FDEF_MPI_IALLGATHERV(mpi_iallgatherv_, 0)
FALIAS(mpi_iallgatherv_, mpi_iallgatherv__, MPI_IALLGATHERV)
FDEF_MPI_IALLGATHERV(mpi_iallgatherv_f08_, 1)
FDEF_MPI_IALLGATHERV(mpi_iallgatherv_f08ts_, 1)

typedef void (*f_ialltoallv_t)(void *, F *, F *, F *, void *, F *, F *, F *, F *, F *,
                               F *);
#define FDEF_MPI_IALLTOALLV(lname, f08)                                              \
    void lname(void *sbuf, F *scounts, F *sdispls, F *stype, void *rbuf, F *rcounts, \
               F *rdispls, F *rtype, F *comm, F *req, F *ierr) {                     \
        FREAL(lname, f_ialltoallv_t);                                                \
        FBEGIN(real_(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, \
                     req, ierr));                                                    \
        MPI_Comm c = CCOMM(comm);                                                    \
        int n = comm_size(c);                                                        \
        ev_coll(&e_, c, type_bytes(CTYPE(stype), sum_counts(scounts, n)),            \
                type_bytes(CTYPE(rtype), sum_counts(rcounts, n)));                   \
        F_NB_REQ();                                                                  \
        FEND(OP_IALLTOALLV);                                                         \
    }
FDEF_MPI_IALLTOALLV(mpi_ialltoallv_, 0)
FALIAS(mpi_ialltoallv_, mpi_ialltoallv__, MPI_IALLTOALLV)
FDEF_MPI_IALLTOALLV(mpi_ialltoallv_f08_, 1)
FDEF_MPI_IALLTOALLV(mpi_ialltoallv_f08ts_, 1)

typedef void (*f_ireduce_scatter_t)(void *, void *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_IREDUCE_SCATTER(lname, f08)                                         \
    void lname(void *sbuf, void *rbuf, F *rcounts, F *dt, F *op, F *comm, F *req,    \
               F *ierr) {                                                            \
        FREAL(lname, f_ireduce_scatter_t);                                           \
        FBEGIN(real_(sbuf, rbuf, rcounts, dt, op, comm, req, ierr));                 \
        MPI_Comm c = CCOMM(comm);                                                    \
        ev_coll(&e_, c, type_bytes(CTYPE(dt), sum_counts(rcounts, comm_size(c))),    \
                type_bytes(CTYPE(dt), rcounts[comm_rank(c)]));                       \
        F_NB_REQ();                                                                  \
        FEND(OP_IREDUCE_SCATTER);                                                    \
    }
FDEF_MPI_IREDUCE_SCATTER(mpi_ireduce_scatter_, 0)
FALIAS(mpi_ireduce_scatter_, mpi_ireduce_scatter__, MPI_IREDUCE_SCATTER)
FDEF_MPI_IREDUCE_SCATTER(mpi_ireduce_scatter_f08_, 1)
FDEF_MPI_IREDUCE_SCATTER(mpi_ireduce_scatter_f08ts_, 1)

/* ireduce_scatter_block, iscan and iexscan share iallreduce's argument list; KIND says
 * what each rank sends and receives. */
enum { K_RS_BLOCK, K_SCAN };
#define FDEF_MPI_IREDUCE_LIKE(lname, OPC, KIND)                                      \
    void lname(void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *req,      \
               F *ierr) {                                                            \
        FREAL(lname, f_iallreduce_t);                                                \
        FBEGIN(real_(sbuf, rbuf, count, dt, op, comm, req, ierr));                   \
        MPI_Comm c = CCOMM(comm);                                                    \
        uint64_t b = type_bytes(CTYPE(dt), *count);                                  \
        ev_coll(&e_, c, (KIND) == K_RS_BLOCK ? b * (uint64_t)comm_size(c) : b, b);   \
        F_NB_REQ();                                                                  \
        FEND(OPC);                                                                   \
    }
FDEF_MPI_IREDUCE_LIKE(mpi_ireduce_scatter_block_, OP_IREDUCE_SCATTER_BLOCK, K_RS_BLOCK)
FALIAS(mpi_ireduce_scatter_block_, mpi_ireduce_scatter_block__, MPI_IREDUCE_SCATTER_BLOCK)
FDEF_MPI_IREDUCE_LIKE(mpi_ireduce_scatter_block_f08_, OP_IREDUCE_SCATTER_BLOCK, K_RS_BLOCK)
FDEF_MPI_IREDUCE_LIKE(mpi_ireduce_scatter_block_f08ts_, OP_IREDUCE_SCATTER_BLOCK,
                      K_RS_BLOCK)
FDEF_MPI_IREDUCE_LIKE(mpi_iscan_, OP_ISCAN, K_SCAN)
FALIAS(mpi_iscan_, mpi_iscan__, MPI_ISCAN)
FDEF_MPI_IREDUCE_LIKE(mpi_iscan_f08_, OP_ISCAN, K_SCAN)
FDEF_MPI_IREDUCE_LIKE(mpi_iscan_f08ts_, OP_ISCAN, K_SCAN)
FDEF_MPI_IREDUCE_LIKE(mpi_iexscan_, OP_IEXSCAN, K_SCAN)
FALIAS(mpi_iexscan_, mpi_iexscan__, MPI_IEXSCAN)
FDEF_MPI_IREDUCE_LIKE(mpi_iexscan_f08_, OP_IEXSCAN, K_SCAN)
FDEF_MPI_IREDUCE_LIKE(mpi_iexscan_f08ts_, OP_IEXSCAN, K_SCAN)

/* reduce_scatter_block has allreduce's argument list. */
#define FDEF_MPI_REDUCE_SCATTER_BLOCK(lname, f08)                                    \
    void lname(void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *ierr) {   \
        FREAL(lname, f_allreduce_t);                                                 \
        FBEGIN(real_(sbuf, rbuf, count, dt, op, comm, ierr));                        \
        MPI_Comm c = CCOMM(comm);                                                    \
        uint64_t b = type_bytes(CTYPE(dt), *count);                                  \
        ev_coll(&e_, c, b * (uint64_t)comm_size(c), b);                              \
        FEND(OP_REDUCE_SCATTER_BLOCK);                                               \
    }
FDEF_MPI_REDUCE_SCATTER_BLOCK(mpi_reduce_scatter_block_, 0)
FALIAS(mpi_reduce_scatter_block_, mpi_reduce_scatter_block__, MPI_REDUCE_SCATTER_BLOCK)
FDEF_MPI_REDUCE_SCATTER_BLOCK(mpi_reduce_scatter_block_f08_, 1)
FDEF_MPI_REDUCE_SCATTER_BLOCK(mpi_reduce_scatter_block_f08ts_, 1)

/* ---- persistent requests ---- */

/* send_init & co. have isend's argument list; the init is not an event, it stores what
 * each start records (core.h). */
#define FDEF_MPI_P2P_INIT(lname, OPC)                                                \
    void lname(void *buf, F *count, F *dt, F *peer, F *tag, F *comm, F *req, F *ierr) { \
        FREAL(lname, f_isend_t);                                                     \
        int traced = TRACED;                                                         \
        g_depth++;                                                                   \
        real_(buf, count, dt, peer, tag, comm, req, ierr);                           \
        if (traced && (!ierr || *ierr == MPI_SUCCESS))                               \
            persist_init(OPC, CCOMM(comm), *peer, *tag, *count, CTYPE(dt),           \
                         MPI_Request_f2c(*req));                                     \
        g_depth--;                                                                   \
    }
FDEF_MPI_P2P_INIT(mpi_send_init_, OP_ISEND)
FALIAS(mpi_send_init_, mpi_send_init__, MPI_SEND_INIT)
FDEF_MPI_P2P_INIT(mpi_send_init_f08_, OP_ISEND)
FDEF_MPI_P2P_INIT(mpi_send_init_f08ts_, OP_ISEND)
FDEF_MPI_P2P_INIT(mpi_bsend_init_, OP_IBSEND)
FALIAS(mpi_bsend_init_, mpi_bsend_init__, MPI_BSEND_INIT)
FDEF_MPI_P2P_INIT(mpi_bsend_init_f08_, OP_IBSEND)
FDEF_MPI_P2P_INIT(mpi_bsend_init_f08ts_, OP_IBSEND)
FDEF_MPI_P2P_INIT(mpi_ssend_init_, OP_ISSEND)
FALIAS(mpi_ssend_init_, mpi_ssend_init__, MPI_SSEND_INIT)
FDEF_MPI_P2P_INIT(mpi_ssend_init_f08_, OP_ISSEND)
FDEF_MPI_P2P_INIT(mpi_ssend_init_f08ts_, OP_ISSEND)
FDEF_MPI_P2P_INIT(mpi_rsend_init_, OP_IRSEND)
FALIAS(mpi_rsend_init_, mpi_rsend_init__, MPI_RSEND_INIT)
FDEF_MPI_P2P_INIT(mpi_rsend_init_f08_, OP_IRSEND)
FDEF_MPI_P2P_INIT(mpi_rsend_init_f08ts_, OP_IRSEND)
FDEF_MPI_P2P_INIT(mpi_recv_init_, OP_IRECV)
FALIAS(mpi_recv_init_, mpi_recv_init__, MPI_RECV_INIT)
FDEF_MPI_P2P_INIT(mpi_recv_init_f08_, OP_IRECV)
FDEF_MPI_P2P_INIT(mpi_recv_init_f08ts_, OP_IRECV)

typedef void (*f_start_t)(F *, F *);
#define FDEF_MPI_START(lname, f08)                                                   \
    void lname(F *req, F *ierr) {                                                    \
        FREAL(lname, f_start_t);                                                     \
        if (!TRACED) {                                                               \
            g_depth++;                                                               \
            real_(req, ierr);                                                        \
            g_depth--;                                                               \
            return;                                                                  \
        }                                                                            \
        void *ra = __builtin_return_address(0);                                      \
        MPI_Request handle = MPI_Request_f2c(*req);                                  \
        g_depth++;                                                                   \
        uint64_t t0 = now_ns();                                                      \
        real_(req, ierr);                                                            \
        uint64_t t1 = now_ns();                                                      \
        if (!ierr || *ierr == MPI_SUCCESS) persist_starts(&handle, 1, t0, t1, ra);   \
        g_depth--;                                                                   \
    }
FDEF_MPI_START(mpi_start_, 0)
FALIAS(mpi_start_, mpi_start__, MPI_START)
FDEF_MPI_START(mpi_start_f08_, 1)
FDEF_MPI_START(mpi_start_f08ts_, 1)

typedef void (*f_startall_t)(F *, F *, F *);
#define FDEF_MPI_STARTALL(lname, f08)                                                \
    void lname(F *count, F *reqs, F *ierr) {                                         \
        FREAL(lname, f_startall_t);                                                  \
        if (!TRACED) {                                                               \
            g_depth++;                                                               \
            real_(count, reqs, ierr);                                                \
            g_depth--;                                                               \
            return;                                                                  \
        }                                                                            \
        void *ra = __builtin_return_address(0);                                      \
        int n = *count > 0 ? *count : 0;                                             \
        MPI_Request small[64];                                                       \
        MPI_Request *handles = f_reqs_c(reqs, n, small, 64);                         \
        g_depth++;                                                                   \
        uint64_t t0 = now_ns();                                                      \
        real_(count, reqs, ierr);                                                    \
        uint64_t t1 = now_ns();                                                      \
        if (!ierr || *ierr == MPI_SUCCESS) persist_starts(handles, n, t0, t1, ra);   \
        g_depth--;                                                                   \
        if (handles != small) free(handles);                                         \
    }
FDEF_MPI_STARTALL(mpi_startall_, 0)
FALIAS(mpi_startall_, mpi_startall__, MPI_STARTALL)
FDEF_MPI_STARTALL(mpi_startall_f08_, 1)
FDEF_MPI_STARTALL(mpi_startall_f08ts_, 1)
