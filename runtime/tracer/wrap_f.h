/* Wrappers of the Fortran bindings: take calls from Fortran code, give events to emit().
 * `use mpi` / mpif.h: gfortran's `mpi_send_`, with the aliases `mpi_send__` and
 * `MPI_SEND`. `use mpi_f08`: Open MPI's `mpi_send_f08_`, MPICH's `mpi_send_f08ts_`
 * (routines with a choice buffer) and `mpi_wait_f08_`; f08 handles are structs holding
 * the same integer, passed by reference, so one body serves all. Receives hand the real
 * routine a status of the tracer's own, so the actual source is known even when the
 * caller passed MPI_STATUS_IGNORE (see f_status_done).
 *
 * Each wrapper forwards to the MPI library's own Fortran symbol (found with
 * dlsym(RTLD_NEXT)) with g_depth raised, so MPICH's Fortran layer, which calls MPI_*,
 * is not counted twice, and OpenMPI's, which calls PMPI_* directly, is still seen.
 * Handles are converted with the MPI_*_f2c functions to find the same communicator and
 * request entries as the C wrappers. */

typedef MPI_Fint F;

#define FREAL(name, type)                                                            \
    static type real_;                                                               \
    if (!real_) real_ = (type)dlsym(RTLD_NEXT, #name);                               \
    if (!real_) {                                                                    \
        fprintf(stderr, "perfskel tracer: %s not found in the MPI library\n", #name); \
        abort();                                                                     \
    }
#define FALIAS(name, a, b)                                                           \
    __typeof__(name) a __attribute__((alias(#name)));                                \
    __typeof__(name) b __attribute__((alias(#name)));
#define FBEGIN(call)                                                                 \
    if (!TRACED) {                                                                   \
        g_depth++;                                                                   \
        call;                                                                        \
        g_depth--;                                                                   \
        return;                                                                      \
    }                                                                                \
    void *ra_ = __builtin_return_address(0);                                         \
    g_depth++;                                                                       \
    uint64_t t0_ = now_ns();                                                         \
    call;                                                                            \
    uint64_t t1_ = now_ns();                                                         \
    ev_t e_;                                                                         \
    memset(&e_, 0, sizeof e_)
#define FEND(opcode)                                                                 \
    e_.op = opcode;                                                                  \
    emit(&e_, t0_, t1_, ra_);                                                        \
    g_depth--

#define CCOMM(c) MPI_Comm_f2c(*(c))
#define CTYPE(t) MPI_Type_f2c(*(t))

typedef void (*f_init_t)(F *);
#define FDEF_MPI_INIT(lname, f08)                                                       \
void lname(F *ierr) {                                                                   \
    FREAL(lname, f_init_t);                                                             \
    uint64_t t0 = now_ns();                                                             \
    g_depth++;                                                                          \
    real_(ierr);                                                                        \
    g_depth--;                                                                          \
    if (g_depth) return;                                                                \
    tracer_start(t0);                                                                   \
    if (g_on) {                                                                         \
        ev_t e;                                                                         \
        memset(&e, 0, sizeof e);                                                        \
        e.op = OP_INIT;                                                                 \
        emit(&e, t0, now_ns(), __builtin_return_address(0));                            \
    }                                                                                   \
}
FDEF_MPI_INIT(mpi_init_, 0)
FALIAS(mpi_init_, mpi_init__, MPI_INIT)
FDEF_MPI_INIT(mpi_init_f08_, 1)
FDEF_MPI_INIT(mpi_init_f08ts_, 1)

typedef void (*f_init_thread_t)(F *, F *, F *);
#define FDEF_MPI_INIT_THREAD(lname, f08)                                                \
void lname(F *required, F *provided, F *ierr) {                                         \
    FREAL(lname, f_init_thread_t);                                                      \
    uint64_t t0 = now_ns();                                                             \
    g_depth++;                                                                          \
    real_(required, provided, ierr);                                                    \
    g_depth--;                                                                          \
    if (g_depth) return;                                                                \
    tracer_start(t0);                                                                   \
    if (g_on) {                                                                         \
        ev_t e;                                                                         \
        memset(&e, 0, sizeof e);                                                        \
        e.op = OP_INIT_THREAD;                                                          \
        emit(&e, t0, now_ns(), __builtin_return_address(0));                            \
    }                                                                                   \
}
FDEF_MPI_INIT_THREAD(mpi_init_thread_, 0)
FALIAS(mpi_init_thread_, mpi_init_thread__, MPI_INIT_THREAD)
FDEF_MPI_INIT_THREAD(mpi_init_thread_f08_, 1)
FDEF_MPI_INIT_THREAD(mpi_init_thread_f08ts_, 1)

#define FDEF_MPI_FINALIZE(lname, f08)                                                   \
void lname(F *ierr) {                                                                   \
    FREAL(lname, f_init_t);                                                             \
    FBEGIN(real_(ierr));                                                                \
    FEND(OP_FINALIZE);                                                                  \
    tracer_stop();                                                                      \
}
FDEF_MPI_FINALIZE(mpi_finalize_, 0)
FALIAS(mpi_finalize_, mpi_finalize__, MPI_FINALIZE)
FDEF_MPI_FINALIZE(mpi_finalize_f08_, 1)
FDEF_MPI_FINALIZE(mpi_finalize_f08ts_, 1)

typedef void (*f_send_t)(void *, F *, F *, F *, F *, F *, F *);
#define F_SEND_LIKE(lname, OPC)                                                \
    void lname(void *buf, F *count, F *dt, F *dest, F *tag, F *comm, F *ierr) {       \
        FREAL(lname, f_send_t);                                                      \
        FBEGIN(real_(buf, count, dt, dest, tag, comm, ierr));                        \
        ev_p2p(&e_, CCOMM(comm), *dest, *tag, *count, CTYPE(dt));                    \
        FEND(OPC);                                                                   \
    }
F_SEND_LIKE(mpi_send_, OP_SEND)
FALIAS(mpi_send_, mpi_send__, MPI_SEND)
F_SEND_LIKE(mpi_send_f08_, OP_SEND)
F_SEND_LIKE(mpi_send_f08ts_, OP_SEND)
F_SEND_LIKE(mpi_ssend_, OP_SSEND)
FALIAS(mpi_ssend_, mpi_ssend__, MPI_SSEND)
F_SEND_LIKE(mpi_ssend_f08_, OP_SSEND)
F_SEND_LIKE(mpi_ssend_f08ts_, OP_SSEND)
F_SEND_LIKE(mpi_bsend_, OP_BSEND)
FALIAS(mpi_bsend_, mpi_bsend__, MPI_BSEND)
F_SEND_LIKE(mpi_bsend_f08_, OP_BSEND)
F_SEND_LIKE(mpi_bsend_f08ts_, OP_BSEND)
F_SEND_LIKE(mpi_rsend_, OP_RSEND)
FALIAS(mpi_rsend_, mpi_rsend__, MPI_RSEND)
F_SEND_LIKE(mpi_rsend_f08_, OP_RSEND)
F_SEND_LIKE(mpi_rsend_f08ts_, OP_RSEND)

typedef void (*f_isend_t)(void *, F *, F *, F *, F *, F *, F *, F *);
#define F_ISEND_LIKE(lname, OPC)                                               \
    void lname(void *buf, F *count, F *dt, F *peer, F *tag, F *comm, F *req, F *ierr) { \
        FREAL(lname, f_isend_t);                                                     \
        FBEGIN(real_(buf, count, dt, peer, tag, comm, req, ierr));                   \
        ev_p2p(&e_, CCOMM(comm), *peer, *tag, *count, CTYPE(dt));                    \
        e_.mask |= F_REQ;                                                            \
        e_.req = req_new(MPI_Request_f2c(*req));                                     \
        FEND(OPC);                                                                   \
    }
F_ISEND_LIKE(mpi_isend_, OP_ISEND)
FALIAS(mpi_isend_, mpi_isend__, MPI_ISEND)
F_ISEND_LIKE(mpi_isend_f08_, OP_ISEND)
F_ISEND_LIKE(mpi_isend_f08ts_, OP_ISEND)
F_ISEND_LIKE(mpi_issend_, OP_ISSEND)
FALIAS(mpi_issend_, mpi_issend__, MPI_ISSEND)
F_ISEND_LIKE(mpi_issend_f08_, OP_ISSEND)
F_ISEND_LIKE(mpi_issend_f08ts_, OP_ISSEND)
F_ISEND_LIKE(mpi_irecv_, OP_IRECV)
FALIAS(mpi_irecv_, mpi_irecv__, MPI_IRECV)
F_ISEND_LIKE(mpi_irecv_f08_, OP_IRECV)
F_ISEND_LIKE(mpi_irecv_f08ts_, OP_IRECV)

/* Statuses. Under both MPIs a `mpif.h` status (MPI_STATUS_SIZE integers) and an f08
 * TYPE(MPI_Status) take sizeof(MPI_Status) bytes, and the f08 one has the C layout
 * (Open MPI: MPI_SOURCE, MPI_TAG, MPI_ERROR, private fields; MPICH: count_lo,
 * count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR). A wrapper passes the real
 * routine a status of its own (`FSTATUS`), then f_status_done copies it to the caller's
 * unless that is MPI_STATUS_IGNORE — MPI_F_STATUS_IGNORE, or for f08 MPICH's
 * MPI_F08_STATUS_IGNORE (Open MPI's f08 MPI_STATUS_IGNORE is the same object as its
 * MPI_F_STATUS_IGNORE) — and converts it to C. */
#ifdef MPICH
#define F08_STATUS_IGNORE ((const void *)MPI_F08_STATUS_IGNORE)
#else
#define F08_STATUS_IGNORE ((const void *)MPI_F_STATUS_IGNORE)
#endif
#define FSTATUS(status)                                                              \
    MPI_Status mine_;                                                                \
    F *st_ = TRACED ? (F *)&mine_ : (status)

static void f_status_done(F *user, int f08, F *mine, MPI_Status *c) {
    const void *ignore = f08 ? F08_STATUS_IGNORE : (const void *)MPI_F_STATUS_IGNORE;
    if (user && (const void *)user != ignore) memcpy(user, mine, sizeof(MPI_Status));
    if (f08 || PMPI_Status_f2c(mine, c) != MPI_SUCCESS) memcpy(c, mine, sizeof *c);
}

typedef void (*f_recv_t)(void *, F *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_RECV(lname, f08)                                                         \
void lname(void *buf, F *count, F *dt, F *src, F *tag, F *comm, F *status, F *ierr) {     \
    FREAL(lname, f_recv_t);                                                               \
    FSTATUS(status);                                                                      \
    FBEGIN(real_(buf, count, dt, src, tag, comm, st_, ierr));                             \
    MPI_Status c_;                                                                        \
    f_status_done(status, f08, st_, &c_);                                                 \
    ev_p2p(&e_, CCOMM(comm), *src, *tag, *count, CTYPE(dt));                              \
    if (*src != MPI_PROC_NULL) ev_recv_status(&e_, CCOMM(comm), &c_, CTYPE(dt));          \
    FEND(OP_RECV);                                                                        \
}
FDEF_MPI_RECV(mpi_recv_, 0)
FALIAS(mpi_recv_, mpi_recv__, MPI_RECV)
FDEF_MPI_RECV(mpi_recv_f08_, 1)
FDEF_MPI_RECV(mpi_recv_f08ts_, 1)

/* Both halves of a sendrecv(_replace): the receive half from the status. */
static void f_sendrecv_event(ev_t *e, MPI_Comm c, int dest, int stag, int scount,
                             MPI_Datatype stype, int src, int rtag, MPI_Datatype rtype,
                             const MPI_Status *st) {
    comm_t *cm = comm_get(c);
    ev_p2p(e, c, dest, stag, scount, stype);
    e->mask |= F_SRC | F_RTAG | F_RBYTES;
    e->src = to_world(cm, src);
    e->rtag = norm_tag(rtag);
    e->rbytes = 0;
    if (src != MPI_PROC_NULL) {
        int n = 0;
        e->src = to_world(cm, st->MPI_SOURCE);
        e->rtag = norm_tag(st->MPI_TAG);
        PMPI_Get_count(st, rtype, &n);
        if (n != MPI_UNDEFINED) e->rbytes = type_bytes(rtype, n);
    }
}

typedef void (*f_sendrecv_t)(void *, F *, F *, F *, F *, void *, F *, F *, F *, F *, F *,
                             F *, F *);
#define FDEF_MPI_SENDRECV(lname, f08)                                                   \
void lname(void *sbuf, F *scount, F *stype, F *dest, F *stag, void *rbuf, F *rcount,    \
                   F *rtype, F *src, F *rtag, F *comm, F *status, F *ierr) {            \
    FREAL(lname, f_sendrecv_t);                                                         \
    FSTATUS(status);                                                                    \
    FBEGIN(real_(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, \
                 st_, ierr));                                                           \
    MPI_Status c_;                                                                      \
    f_status_done(status, f08, st_, &c_);                                               \
    f_sendrecv_event(&e_, CCOMM(comm), *dest, *stag, *scount, CTYPE(stype), *src,       \
                     *rtag, CTYPE(rtype), &c_);                                         \
    FEND(OP_SENDRECV);                                                                  \
}
FDEF_MPI_SENDRECV(mpi_sendrecv_, 0)
FALIAS(mpi_sendrecv_, mpi_sendrecv__, MPI_SENDRECV)
FDEF_MPI_SENDRECV(mpi_sendrecv_f08_, 1)
FDEF_MPI_SENDRECV(mpi_sendrecv_f08ts_, 1)

typedef void (*f_wait_t)(F *, F *, F *);
#define FDEF_MPI_WAIT(lname, f08)                                                       \
void lname(F *req, F *status, F *ierr) {                                                \
    FREAL(lname, f_wait_t);                                                             \
    MPI_Request before = MPI_Request_f2c(*req);                                         \
    uint64_t id = 0;                                                                    \
    FBEGIN(real_(req, status, ierr));                                                   \
    complete_reqs(&e_, &id, &before, 1, NULL, 0);                                       \
    FEND(OP_WAIT);                                                                      \
}
FDEF_MPI_WAIT(mpi_wait_, 0)
FALIAS(mpi_wait_, mpi_wait__, MPI_WAIT)
FDEF_MPI_WAIT(mpi_wait_f08_, 1)
FDEF_MPI_WAIT(mpi_wait_f08ts_, 1)

typedef void (*f_waitall_t)(F *, F *, F *, F *);
#define FDEF_MPI_WAITALL(lname, f08)                                                    \
void lname(F *count, F *reqs, F *statuses, F *ierr) {                                   \
    FREAL(lname, f_waitall_t);                                                          \
    if (!TRACED) {                                                                      \
        g_depth++;                                                                      \
        real_(count, reqs, statuses, ierr);                                             \
        g_depth--;                                                                      \
        return;                                                                         \
    }                                                                                   \
    int n = *count > 0 ? *count : 0;                                                    \
    MPI_Request *before = malloc(sizeof(MPI_Request) * (size_t)n + 1);                  \
    uint64_t *ids = malloc(sizeof(uint64_t) * (size_t)n + 1);                           \
    if (!before || !ids) abort();                                                       \
    for (int i = 0; i < n; i++) {                                                       \
        before[i] = MPI_Request_f2c(reqs[i]);                                           \
    }                                                                                   \
    FBEGIN(real_(count, reqs, statuses, ierr));                                         \
    complete_reqs(&e_, ids, before, n, NULL, 0);                                        \
    FEND(OP_WAITALL);                                                                   \
    free(before);                                                                       \
    free(ids);                                                                          \
}
FDEF_MPI_WAITALL(mpi_waitall_, 0)
FALIAS(mpi_waitall_, mpi_waitall__, MPI_WAITALL)
FDEF_MPI_WAITALL(mpi_waitall_f08_, 1)
FDEF_MPI_WAITALL(mpi_waitall_f08ts_, 1)

typedef void (*f_barrier_t)(F *, F *);
#define FDEF_MPI_BARRIER(lname, f08)                                                    \
void lname(F *comm, F *ierr) {                                                          \
    FREAL(lname, f_barrier_t);                                                          \
    FBEGIN(real_(comm, ierr));                                                          \
    ev_coll(&e_, CCOMM(comm), 0, 0);                                                    \
    FEND(OP_BARRIER);                                                                   \
}
FDEF_MPI_BARRIER(mpi_barrier_, 0)
FALIAS(mpi_barrier_, mpi_barrier__, MPI_BARRIER)
FDEF_MPI_BARRIER(mpi_barrier_f08_, 1)
FDEF_MPI_BARRIER(mpi_barrier_f08ts_, 1)

typedef void (*f_bcast_t)(void *, F *, F *, F *, F *, F *);
#define FDEF_MPI_BCAST(lname, f08)                                                      \
void lname(void *buf, F *count, F *dt, F *root, F *comm, F *ierr) {                     \
    FREAL(lname, f_bcast_t);                                                            \
    FBEGIN(real_(buf, count, dt, root, comm, ierr));                                    \
    MPI_Comm c = CCOMM(comm);                                                           \
    uint64_t b = type_bytes(CTYPE(dt), *count);                                         \
    int is_root = comm_rank(c) == *root;                                                \
    ev_coll(&e_, c, is_root ? b : 0, is_root ? 0 : b);                                  \
    ev_root(&e_, c, *root);                                                             \
    FEND(OP_BCAST);                                                                     \
}
FDEF_MPI_BCAST(mpi_bcast_, 0)
FALIAS(mpi_bcast_, mpi_bcast__, MPI_BCAST)
FDEF_MPI_BCAST(mpi_bcast_f08_, 1)
FDEF_MPI_BCAST(mpi_bcast_f08ts_, 1)

typedef void (*f_reduce_t)(void *, void *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_REDUCE(lname, f08)                                                     \
void lname(void *sbuf, void *rbuf, F *count, F *dt, F *op, F *root, F *comm, F *ierr) { \
    FREAL(lname, f_reduce_t);                                                           \
    FBEGIN(real_(sbuf, rbuf, count, dt, op, root, comm, ierr));                         \
    MPI_Comm c = CCOMM(comm);                                                           \
    uint64_t b = type_bytes(CTYPE(dt), *count);                                         \
    ev_coll(&e_, c, b, comm_rank(c) == *root ? b : 0);                                  \
    ev_root(&e_, c, *root);                                                             \
    FEND(OP_REDUCE);                                                                    \
}
FDEF_MPI_REDUCE(mpi_reduce_, 0)
FALIAS(mpi_reduce_, mpi_reduce__, MPI_REDUCE)
FDEF_MPI_REDUCE(mpi_reduce_f08_, 1)
FDEF_MPI_REDUCE(mpi_reduce_f08ts_, 1)

typedef void (*f_allreduce_t)(void *, void *, F *, F *, F *, F *, F *);
#define FDEF_MPI_ALLREDUCE(lname, f08)                                                  \
void lname(void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *ierr) {          \
    FREAL(lname, f_allreduce_t);                                                        \
    FBEGIN(real_(sbuf, rbuf, count, dt, op, comm, ierr));                               \
    uint64_t b = type_bytes(CTYPE(dt), *count);                                         \
    ev_coll(&e_, CCOMM(comm), b, b);                                                    \
    FEND(OP_ALLREDUCE);                                                                 \
}
FDEF_MPI_ALLREDUCE(mpi_allreduce_, 0)
FALIAS(mpi_allreduce_, mpi_allreduce__, MPI_ALLREDUCE)
FDEF_MPI_ALLREDUCE(mpi_allreduce_f08_, 1)
FDEF_MPI_ALLREDUCE(mpi_allreduce_f08ts_, 1)

typedef void (*f_a2a_t)(void *, F *, F *, void *, F *, F *, F *, F *);
#define F_ALL_LIKE(lname, OPC, MUL)                                            \
    void lname(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm, \
               F *ierr) {                                                            \
        FREAL(lname, f_a2a_t);                                                       \
        FBEGIN(real_(sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr));         \
        MPI_Comm c = CCOMM(comm);                                                    \
        int n = comm_size(c);                                                        \
        ev_coll(&e_, c, type_bytes(CTYPE(stype), (int64_t)*scount * (MUL ? n : 1)),   \
                type_bytes(CTYPE(rtype), (int64_t)*rcount * n));                     \
        FEND(OPC);                                                                   \
    }
F_ALL_LIKE(mpi_alltoall_, OP_ALLTOALL, 1)
FALIAS(mpi_alltoall_, mpi_alltoall__, MPI_ALLTOALL)
F_ALL_LIKE(mpi_alltoall_f08_, OP_ALLTOALL, 1)
F_ALL_LIKE(mpi_alltoall_f08ts_, OP_ALLTOALL, 1)
F_ALL_LIKE(mpi_allgather_, OP_ALLGATHER, 0)
FALIAS(mpi_allgather_, mpi_allgather__, MPI_ALLGATHER)
F_ALL_LIKE(mpi_allgather_f08_, OP_ALLGATHER, 0)
F_ALL_LIKE(mpi_allgather_f08ts_, OP_ALLGATHER, 0)

typedef void (*f_split_t)(F *, F *, F *, F *, F *);
#define FDEF_MPI_COMM_SPLIT(lname, f08)                                                 \
void lname(F *comm, F *color, F *key, F *newcomm, F *ierr) {                            \
    FREAL(lname, f_split_t);                                                            \
    FBEGIN(real_(comm, color, key, newcomm, ierr));                                     \
    ev_newcomm(&e_, CCOMM(comm), CCOMM(newcomm));                                       \
    FEND(OP_COMM_SPLIT);                                                                \
}
FDEF_MPI_COMM_SPLIT(mpi_comm_split_, 0)
FALIAS(mpi_comm_split_, mpi_comm_split__, MPI_COMM_SPLIT)
FDEF_MPI_COMM_SPLIT(mpi_comm_split_f08_, 1)
FDEF_MPI_COMM_SPLIT(mpi_comm_split_f08ts_, 1)

typedef void (*f_dup_t)(F *, F *, F *);
#define FDEF_MPI_COMM_DUP(lname, f08)                                                   \
void lname(F *comm, F *newcomm, F *ierr) {                                              \
    FREAL(lname, f_dup_t);                                                              \
    FBEGIN(real_(comm, newcomm, ierr));                                                 \
    ev_newcomm(&e_, CCOMM(comm), CCOMM(newcomm));                                       \
    FEND(OP_COMM_DUP);                                                                  \
}
FDEF_MPI_COMM_DUP(mpi_comm_dup_, 0)
FALIAS(mpi_comm_dup_, mpi_comm_dup__, MPI_COMM_DUP)
FDEF_MPI_COMM_DUP(mpi_comm_dup_f08_, 1)
FDEF_MPI_COMM_DUP(mpi_comm_dup_f08ts_, 1)

typedef void (*f_cart_create_t)(F *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_CART_CREATE(lname, f08)                                                \
void lname(F *comm, F *ndims, F *dims, F *periods, F *reorder, F *newcomm,              \
                      F *ierr) {                                                        \
    FREAL(lname, f_cart_create_t);                                                      \
    FBEGIN(real_(comm, ndims, dims, periods, reorder, newcomm, ierr));                  \
    ev_newcomm(&e_, CCOMM(comm), CCOMM(newcomm));                                       \
    FEND(OP_CART_CREATE);                                                               \
}
FDEF_MPI_CART_CREATE(mpi_cart_create_, 0)
FALIAS(mpi_cart_create_, mpi_cart_create__, MPI_CART_CREATE)
FDEF_MPI_CART_CREATE(mpi_cart_create_f08_, 1)
FDEF_MPI_CART_CREATE(mpi_cart_create_f08ts_, 1)

typedef void (*f_comm_free_t)(F *, F *);
#define FDEF_MPI_COMM_FREE(lname, f08)                                                  \
void lname(F *comm, F *ierr) {                                                          \
    FREAL(lname, f_comm_free_t);                                                        \
    MPI_Comm before = CCOMM(comm);                                                      \
    uint64_t id = TRACED ? comm_get(before)->id : 0;                                    \
    FBEGIN(real_(comm, ierr));                                                          \
    e_.mask |= F_COMM;                                                                  \
    e_.comm = id;                                                                       \
    comm_forget(HANDLE_KEY(before));                                                    \
    FEND(OP_COMM_FREE);                                                                 \
}
FDEF_MPI_COMM_FREE(mpi_comm_free_, 0)
FALIAS(mpi_comm_free_, mpi_comm_free__, MPI_COMM_FREE)
FDEF_MPI_COMM_FREE(mpi_comm_free_f08_, 1)
FDEF_MPI_COMM_FREE(mpi_comm_free_f08ts_, 1)

F_ISEND_LIKE(mpi_ibsend_, OP_IBSEND)
FALIAS(mpi_ibsend_, mpi_ibsend__, MPI_IBSEND)
F_ISEND_LIKE(mpi_ibsend_f08_, OP_IBSEND)
F_ISEND_LIKE(mpi_ibsend_f08ts_, OP_IBSEND)
F_ISEND_LIKE(mpi_irsend_, OP_IRSEND)
FALIAS(mpi_irsend_, mpi_irsend__, MPI_IRSEND)
F_ISEND_LIKE(mpi_irsend_f08_, OP_IRSEND)
F_ISEND_LIKE(mpi_irsend_f08ts_, OP_IRSEND)

typedef void (*f_sendrecv_replace_t)(void *, F *, F *, F *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_SENDRECV_REPLACE(lname, f08)                                           \
void lname(void *buf, F *count, F *dt, F *dest, F *stag, F *src, F *rtag,               \
                           F *comm, F *status, F *ierr) {                               \
    FREAL(lname, f_sendrecv_replace_t);                                                 \
    FSTATUS(status);                                                                    \
    FBEGIN(real_(buf, count, dt, dest, stag, src, rtag, comm, st_, ierr));              \
    MPI_Status c_;                                                                      \
    f_status_done(status, f08, st_, &c_);                                               \
    f_sendrecv_event(&e_, CCOMM(comm), *dest, *stag, *count, CTYPE(dt), *src, *rtag,    \
                     CTYPE(dt), &c_);                                                   \
    FEND(OP_SENDRECV_REPLACE);                                                          \
}
FDEF_MPI_SENDRECV_REPLACE(mpi_sendrecv_replace_, 0)
FALIAS(mpi_sendrecv_replace_, mpi_sendrecv_replace__, MPI_SENDRECV_REPLACE)
FDEF_MPI_SENDRECV_REPLACE(mpi_sendrecv_replace_f08_, 1)
FDEF_MPI_SENDRECV_REPLACE(mpi_sendrecv_replace_f08ts_, 1)

typedef void (*f_probe_t)(F *, F *, F *, F *, F *);
#define FDEF_MPI_PROBE(lname, f08)                                                       \
void lname(F *src, F *tag, F *comm, F *status, F *ierr) {                                \
    FREAL(lname, f_probe_t);                                                             \
    FSTATUS(status);                                                                     \
    FBEGIN(real_(src, tag, comm, st_, ierr));                                            \
    MPI_Status c_;                                                                       \
    f_status_done(status, f08, st_, &c_);                                                \
    ev_p2p(&e_, CCOMM(comm), *src, *tag, 0, MPI_BYTE);                                   \
    if (*src != MPI_PROC_NULL) ev_recv_status(&e_, CCOMM(comm), &c_, MPI_BYTE);          \
    FEND(OP_PROBE);                                                                      \
}
FDEF_MPI_PROBE(mpi_probe_, 0)
FALIAS(mpi_probe_, mpi_probe__, MPI_PROBE)
FDEF_MPI_PROBE(mpi_probe_f08_, 1)
FDEF_MPI_PROBE(mpi_probe_f08ts_, 1)

typedef void (*f_iprobe_t)(F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_IPROBE(lname, f08)                                                               \
void lname(F *src, F *tag, F *comm, F *flag, F *status, F *ierr) {                                \
    FREAL(lname, f_iprobe_t);                                                                     \
    FSTATUS(status);                                                                              \
    FBEGIN(real_(src, tag, comm, flag, st_, ierr));                                               \
    MPI_Status c_;                                                                                \
    if (*flag) f_status_done(status, f08, st_, &c_);                                              \
    ev_p2p(&e_, CCOMM(comm), *src, *tag, 0, MPI_BYTE);                                            \
    if (*flag && *src != MPI_PROC_NULL) ev_recv_status(&e_, CCOMM(comm), &c_, MPI_BYTE);          \
    e_.mask |= F_FLAG;                                                                            \
    e_.flag = (uint64_t)(*flag != 0);                                                             \
    FEND(OP_IPROBE);                                                                              \
}
FDEF_MPI_IPROBE(mpi_iprobe_, 0)
FALIAS(mpi_iprobe_, mpi_iprobe__, MPI_IPROBE)
FDEF_MPI_IPROBE(mpi_iprobe_f08_, 1)
FDEF_MPI_IPROBE(mpi_iprobe_f08ts_, 1)

typedef void (*f_test_t)(F *, F *, F *, F *);
#define FDEF_MPI_TEST(lname, f08)                                                       \
void lname(F *req, F *flag, F *status, F *ierr) {                                       \
    FREAL(lname, f_test_t);                                                             \
    MPI_Request before = MPI_Request_f2c(*req);                                         \
    uint64_t id = 0;                                                                    \
    FBEGIN(real_(req, flag, status, ierr));                                             \
    complete_reqs(&e_, &id, &before, *flag ? 1 : 0, NULL, 0);                           \
    e_.mask |= F_FLAG;                                                                  \
    e_.flag = (uint64_t)(*flag != 0);                                                   \
    FEND(OP_TEST);                                                                      \
}
FDEF_MPI_TEST(mpi_test_, 0)
FALIAS(mpi_test_, mpi_test__, MPI_TEST)
FDEF_MPI_TEST(mpi_test_f08_, 1)
FDEF_MPI_TEST(mpi_test_f08ts_, 1)


typedef void (*f_gather_t)(void *, F *, F *, void *, F *, F *, F *, F *, F *);
#define FDEF_MPI_GATHER(lname, f08)                                                     \
void lname(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *root,   \
                 F *comm, F *ierr) {                                                    \
    FREAL(lname, f_gather_t);                                                           \
    FBEGIN(real_(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, ierr));          \
    MPI_Comm c = CCOMM(comm);                                                           \
    int is_root = comm_rank(c) == *root;                                                \
    ev_coll(&e_, c, type_bytes(CTYPE(stype), *scount),                                  \
            is_root ? type_bytes(CTYPE(rtype), (int64_t)*rcount * comm_size(c)) : 0);   \
    ev_root(&e_, c, *root);                                                             \
    FEND(OP_GATHER);                                                                    \
}
FDEF_MPI_GATHER(mpi_gather_, 0)
FALIAS(mpi_gather_, mpi_gather__, MPI_GATHER)
FDEF_MPI_GATHER(mpi_gather_f08_, 1)
FDEF_MPI_GATHER(mpi_gather_f08ts_, 1)

#define FDEF_MPI_SCATTER(lname, f08)                                                         \
void lname(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *root,        \
                  F *comm, F *ierr) {                                                        \
    FREAL(lname, f_gather_t);                                                                \
    FBEGIN(real_(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, ierr));               \
    MPI_Comm c = CCOMM(comm);                                                                \
    int is_root = comm_rank(c) == *root;                                                     \
    ev_coll(&e_, c, is_root ? type_bytes(CTYPE(stype), (int64_t)*scount * comm_size(c)) : 0, \
            type_bytes(CTYPE(rtype), *rcount));                                              \
    ev_root(&e_, c, *root);                                                                  \
    FEND(OP_SCATTER);                                                                        \
}
FDEF_MPI_SCATTER(mpi_scatter_, 0)
FALIAS(mpi_scatter_, mpi_scatter__, MPI_SCATTER)
FDEF_MPI_SCATTER(mpi_scatter_f08_, 1)
FDEF_MPI_SCATTER(mpi_scatter_f08ts_, 1)

typedef void (*f_gatherv_t)(void *, F *, F *, void *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_GATHERV(lname, f08)                                                    \
void lname(void *sbuf, F *scount, F *stype, void *rbuf, F *rcounts, F *displs,          \
                  F *rtype, F *root, F *comm, F *ierr) {                                \
    FREAL(lname, f_gatherv_t);                                                          \
    FBEGIN(real_(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, ierr)); \
    MPI_Comm c = CCOMM(comm);                                                           \
    int is_root = comm_rank(c) == *root;                                                \
    ev_coll(&e_, c, type_bytes(CTYPE(stype), *scount),                                  \
            is_root ? type_bytes(CTYPE(rtype), sum_counts(rcounts, comm_size(c))) : 0); \
    ev_root(&e_, c, *root);                                                             \
    FEND(OP_GATHERV);                                                                   \
}
FDEF_MPI_GATHERV(mpi_gatherv_, 0)
FALIAS(mpi_gatherv_, mpi_gatherv__, MPI_GATHERV)
FDEF_MPI_GATHERV(mpi_gatherv_f08_, 1)
FDEF_MPI_GATHERV(mpi_gatherv_f08ts_, 1)

typedef void (*f_scatterv_t)(void *, F *, F *, F *, void *, F *, F *, F *, F *, F *);
#define FDEF_MPI_SCATTERV(lname, f08)                                                          \
void lname(void *sbuf, F *scounts, F *displs, F *stype, void *rbuf, F *rcount,                 \
                   F *rtype, F *root, F *comm, F *ierr) {                                      \
    FREAL(lname, f_scatterv_t);                                                                \
    FBEGIN(real_(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, ierr));        \
    MPI_Comm c = CCOMM(comm);                                                                  \
    int is_root = comm_rank(c) == *root;                                                       \
    ev_coll(&e_, c, is_root ? type_bytes(CTYPE(stype), sum_counts(scounts, comm_size(c))) : 0, \
            type_bytes(CTYPE(rtype), *rcount));                                                \
    ev_root(&e_, c, *root);                                                                    \
    FEND(OP_SCATTERV);                                                                         \
}
FDEF_MPI_SCATTERV(mpi_scatterv_, 0)
FALIAS(mpi_scatterv_, mpi_scatterv__, MPI_SCATTERV)
FDEF_MPI_SCATTERV(mpi_scatterv_f08_, 1)
FDEF_MPI_SCATTERV(mpi_scatterv_f08ts_, 1)

typedef void (*f_allgatherv_t)(void *, F *, F *, void *, F *, F *, F *, F *, F *);
#define FDEF_MPI_ALLGATHERV(lname, f08)                                                 \
void lname(void *sbuf, F *scount, F *stype, void *rbuf, F *rcounts, F *displs,          \
                     F *rtype, F *comm, F *ierr) {                                      \
    FREAL(lname, f_allgatherv_t);                                                       \
    FBEGIN(real_(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, ierr));       \
    MPI_Comm c = CCOMM(comm);                                                           \
    ev_coll(&e_, c, type_bytes(CTYPE(stype), *scount),                                  \
            type_bytes(CTYPE(rtype), sum_counts(rcounts, comm_size(c))));               \
    FEND(OP_ALLGATHERV);                                                                \
}
FDEF_MPI_ALLGATHERV(mpi_allgatherv_, 0)
FALIAS(mpi_allgatherv_, mpi_allgatherv__, MPI_ALLGATHERV)
FDEF_MPI_ALLGATHERV(mpi_allgatherv_f08_, 1)
FDEF_MPI_ALLGATHERV(mpi_allgatherv_f08ts_, 1)

typedef void (*f_alltoallv_t)(void *, F *, F *, F *, void *, F *, F *, F *, F *, F *);
#define FDEF_MPI_ALLTOALLV(lname, f08)                                                       \
void lname(void *sbuf, F *scounts, F *sdispls, F *stype, void *rbuf, F *rcounts,             \
                    F *rdispls, F *rtype, F *comm, F *ierr) {                                \
    FREAL(lname, f_alltoallv_t);                                                             \
    FBEGIN(real_(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, ierr)); \
    MPI_Comm c = CCOMM(comm);                                                                \
    int n = comm_size(c);                                                                    \
    ev_coll(&e_, c, type_bytes(CTYPE(stype), sum_counts(scounts, n)),                        \
            type_bytes(CTYPE(rtype), sum_counts(rcounts, n)));                               \
    FEND(OP_ALLTOALLV);                                                                      \
}
FDEF_MPI_ALLTOALLV(mpi_alltoallv_, 0)
FALIAS(mpi_alltoallv_, mpi_alltoallv__, MPI_ALLTOALLV)
FDEF_MPI_ALLTOALLV(mpi_alltoallv_f08_, 1)
FDEF_MPI_ALLTOALLV(mpi_alltoallv_f08ts_, 1)

typedef void (*f_reduce_scatter_t)(void *, void *, F *, F *, F *, F *, F *);
#define FDEF_MPI_REDUCE_SCATTER(lname, f08)                                             \
void lname(void *sbuf, void *rbuf, F *rcounts, F *dt, F *op, F *comm, F *ierr) {        \
    FREAL(lname, f_reduce_scatter_t);                                                   \
    FBEGIN(real_(sbuf, rbuf, rcounts, dt, op, comm, ierr));                             \
    MPI_Comm c = CCOMM(comm);                                                           \
    ev_coll(&e_, c, type_bytes(CTYPE(dt), sum_counts(rcounts, comm_size(c))),           \
            type_bytes(CTYPE(dt), rcounts[comm_rank(c)]));                              \
    FEND(OP_REDUCE_SCATTER);                                                            \
}
FDEF_MPI_REDUCE_SCATTER(mpi_reduce_scatter_, 0)
FALIAS(mpi_reduce_scatter_, mpi_reduce_scatter__, MPI_REDUCE_SCATTER)
FDEF_MPI_REDUCE_SCATTER(mpi_reduce_scatter_f08_, 1)
FDEF_MPI_REDUCE_SCATTER(mpi_reduce_scatter_f08ts_, 1)

#define F_SCAN_LIKE(lname, OPC)                                                \
    void lname(void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *ierr) {    \
        FREAL(lname, f_allreduce_t);                                                 \
        FBEGIN(real_(sbuf, rbuf, count, dt, op, comm, ierr));                        \
        uint64_t bytes = type_bytes(CTYPE(dt), *count);                              \
        ev_coll(&e_, CCOMM(comm), bytes, bytes);                                     \
        FEND(OPC);                                                                   \
    }
F_SCAN_LIKE(mpi_scan_, OP_SCAN)
FALIAS(mpi_scan_, mpi_scan__, MPI_SCAN)
F_SCAN_LIKE(mpi_scan_f08_, OP_SCAN)
F_SCAN_LIKE(mpi_scan_f08ts_, OP_SCAN)
F_SCAN_LIKE(mpi_exscan_, OP_EXSCAN)
FALIAS(mpi_exscan_, mpi_exscan__, MPI_EXSCAN)
F_SCAN_LIKE(mpi_exscan_f08_, OP_EXSCAN)
F_SCAN_LIKE(mpi_exscan_f08ts_, OP_EXSCAN)

typedef void (*f_iallreduce_t)(void *, void *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_IALLREDUCE(lname, f08)                                                 \
void lname(void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *req,             \
                     F *ierr) {                                                         \
    FREAL(lname, f_iallreduce_t);                                                       \
    FBEGIN(real_(sbuf, rbuf, count, dt, op, comm, req, ierr));                          \
    uint64_t b = type_bytes(CTYPE(dt), *count);                                         \
    ev_coll(&e_, CCOMM(comm), b, b);                                                    \
    e_.mask |= F_REQ;                                                                   \
    e_.req = req_new(MPI_Request_f2c(*req));                                            \
    FEND(OP_IALLREDUCE);                                                                \
}
FDEF_MPI_IALLREDUCE(mpi_iallreduce_, 0)
FALIAS(mpi_iallreduce_, mpi_iallreduce__, MPI_IALLREDUCE)
FDEF_MPI_IALLREDUCE(mpi_iallreduce_f08_, 1)
FDEF_MPI_IALLREDUCE(mpi_iallreduce_f08ts_, 1)

typedef void (*f_ibarrier_t)(F *, F *, F *);
#define FDEF_MPI_IBARRIER(lname, f08)                                                   \
void lname(F *comm, F *req, F *ierr) {                                                  \
    FREAL(lname, f_ibarrier_t);                                                         \
    FBEGIN(real_(comm, req, ierr));                                                     \
    ev_coll(&e_, CCOMM(comm), 0, 0);                                                    \
    e_.mask |= F_REQ;                                                                   \
    e_.req = req_new(MPI_Request_f2c(*req));                                            \
    FEND(OP_IBARRIER);                                                                  \
}
FDEF_MPI_IBARRIER(mpi_ibarrier_, 0)
FALIAS(mpi_ibarrier_, mpi_ibarrier__, MPI_IBARRIER)
FDEF_MPI_IBARRIER(mpi_ibarrier_f08_, 1)
FDEF_MPI_IBARRIER(mpi_ibarrier_f08ts_, 1)

typedef void (*f_cart_sub_t)(F *, F *, F *, F *);
#define FDEF_MPI_CART_SUB(lname, f08)                                                   \
void lname(F *comm, F *remain, F *newcomm, F *ierr) {                                   \
    FREAL(lname, f_cart_sub_t);                                                         \
    FBEGIN(real_(comm, remain, newcomm, ierr));                                         \
    ev_newcomm(&e_, CCOMM(comm), CCOMM(newcomm));                                       \
    FEND(OP_CART_SUB);                                                                  \
}
FDEF_MPI_CART_SUB(mpi_cart_sub_, 0)
FALIAS(mpi_cart_sub_, mpi_cart_sub__, MPI_CART_SUB)
FDEF_MPI_CART_SUB(mpi_cart_sub_f08_, 1)
FDEF_MPI_CART_SUB(mpi_cart_sub_f08ts_, 1)

typedef void (*f_comm_create_t)(F *, F *, F *, F *);
#define FDEF_MPI_COMM_CREATE(lname, f08)                                                \
void lname(F *comm, F *group, F *newcomm, F *ierr) {                                    \
    FREAL(lname, f_comm_create_t);                                                      \
    FBEGIN(real_(comm, group, newcomm, ierr));                                          \
    ev_newcomm(&e_, CCOMM(comm), CCOMM(newcomm));                                       \
    FEND(OP_COMM_CREATE);                                                               \
}
FDEF_MPI_COMM_CREATE(mpi_comm_create_, 0)
FALIAS(mpi_comm_create_, mpi_comm_create__, MPI_COMM_CREATE)
FDEF_MPI_COMM_CREATE(mpi_comm_create_f08_, 1)
FDEF_MPI_COMM_CREATE(mpi_comm_create_f08ts_, 1)

typedef void (*f_abort_t)(F *, F *, F *);
#define FDEF_MPI_ABORT(lname, f08)                                                      \
void lname(F *comm, F *code, F *ierr) {                                                 \
    FREAL(lname, f_abort_t);                                                            \
    if (TRACED) {                                                                       \
        ev_t e;                                                                         \
        memset(&e, 0, sizeof e);                                                        \
        e.op = OP_ABORT;                                                                \
        e.mask = F_COMM | F_FLAG;                                                       \
        e.comm = comm_get(CCOMM(comm))->id;                                             \
        e.flag = (uint64_t)(uint32_t)*code;                                             \
        uint64_t t = now_ns();                                                          \
        emit(&e, t, t, __builtin_return_address(0));                                    \
        flush_buf();                                                                    \
    }                                                                                   \
    g_depth++;                                                                          \
    real_(comm, code, ierr);                                                            \
    g_depth--;                                                                          \
}
FDEF_MPI_ABORT(mpi_abort_, 0)
FALIAS(mpi_abort_, mpi_abort__, MPI_ABORT)
FDEF_MPI_ABORT(mpi_abort_f08_, 1)
FDEF_MPI_ABORT(mpi_abort_f08ts_, 1)

typedef void (*f_cancel_t)(F *, F *);
#define FDEF_MPI_CANCEL(lname, f08)                                                     \
void lname(F *req, F *ierr) {                                                           \
    FREAL(lname, f_cancel_t);                                                           \
    MPI_Request before = MPI_Request_f2c(*req);                                         \
    uint64_t id = 0;                                                                    \
    FBEGIN(real_(req, ierr));                                                           \
    id = req_peek(before);                                                              \
    e_.mask |= F_REQS;                                                                  \
    e_.reqs = &id;                                                                      \
    e_.n_reqs = id ? 1 : 0;                                                             \
    FEND(OP_CANCEL);                                                                    \
}
FDEF_MPI_CANCEL(mpi_cancel_, 0)
FALIAS(mpi_cancel_, mpi_cancel__, MPI_CANCEL)
FDEF_MPI_CANCEL(mpi_cancel_f08_, 1)
FDEF_MPI_CANCEL(mpi_cancel_f08ts_, 1)

typedef void (*f_request_free_t)(F *, F *);
#define FDEF_MPI_REQUEST_FREE(lname, f08)                                               \
void lname(F *req, F *ierr) {                                                           \
    FREAL(lname, f_request_free_t);                                                     \
    if (TRACED) {                                                                       \
        req_pop(MPI_Request_f2c(*req));                                                 \
        persist_forget(MPI_Request_f2c(*req));                                          \
    }                                                                                   \
    g_depth++;                                                                          \
    real_(req, ierr);                                                                   \
    g_depth--;                                                                          \
}
FDEF_MPI_REQUEST_FREE(mpi_request_free_, 0)
FALIAS(mpi_request_free_, mpi_request_free__, MPI_REQUEST_FREE)
FDEF_MPI_REQUEST_FREE(mpi_request_free_f08_, 1)
FDEF_MPI_REQUEST_FREE(mpi_request_free_f08ts_, 1)

/* ---- one-sided communication and intercommunicators (format version 4) ----
 * The same events as the C wrappers (wrap_c.h). Window handles are converted with
 * MPI_Win_f2c to find the C wrappers' window entries; MPI_Aint arguments
 * (INTEGER(KIND=MPI_ADDRESS_KIND)) are passed by reference like the others. */

/* The four names of one Fortran routine: `use mpi` (with its aliases) and mpi_f08. */
#define F_FOUR(DEF, l, U)                                                            \
    DEF(l##_, 0)                                                                     \
    FALIAS(l##_, l##__, U)                                                           \
    DEF(l##_f08_, 1)                                                                 \
    DEF(l##_f08ts_, 1)

#define CWIN(w) MPI_Win_f2c(*(w))

/* A window made over `comm` (a failed call leaves MPI_WIN_NULL; the f08 ierror is
 * optional, so it is not read). */
static void f_win_new(ev_t *e, F *comm, F *win, MPI_Aint size) {
    MPI_Win w = CWIN(win);
    if (w != MPI_WIN_NULL) win_register(w, CCOMM(comm));
    e->mask |= F_COMM | F_BYTES;
    e->comm = comm_get(CCOMM(comm))->id;
    e->bytes = size > 0 ? (uint64_t)size : 0;
}

typedef void (*f_win_create_t)(void *, MPI_Aint *, F *, F *, F *, F *, F *);
#define FDEF_MPI_WIN_CREATE(lname, f08)                                                 \
void lname(void *base, MPI_Aint *size, F *unit, F *info, F *comm, F *win, F *ierr) {    \
    FREAL(lname, f_win_create_t);                                                       \
    FBEGIN(real_(base, size, unit, info, comm, win, ierr));                             \
    f_win_new(&e_, comm, win, *size);                                                   \
    FEND(OP_WIN_CREATE);                                                                \
}
F_FOUR(FDEF_MPI_WIN_CREATE, mpi_win_create, MPI_WIN_CREATE)

/* MPI_Win_allocate(_shared): (size, disp_unit, info, comm, baseptr, win, ierr). */
typedef void (*f_win_allocate_t)(MPI_Aint *, F *, F *, F *, void *, F *, F *);
#define F_WIN_ALLOCATE_LIKE(lname, OPC)                                                 \
void lname(MPI_Aint *size, F *unit, F *info, F *comm, void *baseptr, F *win, F *ierr) { \
    FREAL(lname, f_win_allocate_t);                                                     \
    FBEGIN(real_(size, unit, info, comm, baseptr, win, ierr));                          \
    f_win_new(&e_, comm, win, *size);                                                   \
    FEND(OPC);                                                                          \
}
#define FDEF_MPI_WIN_ALLOCATE(lname, f08) F_WIN_ALLOCATE_LIKE(lname, OP_WIN_ALLOCATE)
#define FDEF_MPI_WIN_ALLOCATE_SHARED(lname, f08)                                        \
    F_WIN_ALLOCATE_LIKE(lname, OP_WIN_ALLOCATE_SHARED)
F_FOUR(FDEF_MPI_WIN_ALLOCATE, mpi_win_allocate, MPI_WIN_ALLOCATE)
F_FOUR(FDEF_MPI_WIN_ALLOCATE_SHARED, mpi_win_allocate_shared, MPI_WIN_ALLOCATE_SHARED)
/* Open MPI's `use mpi` has a TYPE(C_PTR) baseptr variant of each under its own name. */
F_WIN_ALLOCATE_LIKE(mpi_win_allocate_cptr_, OP_WIN_ALLOCATE)
FALIAS(mpi_win_allocate_cptr_, mpi_win_allocate_cptr__, MPI_WIN_ALLOCATE_CPTR)
F_WIN_ALLOCATE_LIKE(mpi_win_allocate_shared_cptr_, OP_WIN_ALLOCATE_SHARED)
FALIAS(mpi_win_allocate_shared_cptr_, mpi_win_allocate_shared_cptr__,
       MPI_WIN_ALLOCATE_SHARED_CPTR)

typedef void (*f_win_create_dynamic_t)(F *, F *, F *, F *);
#define FDEF_MPI_WIN_CREATE_DYNAMIC(lname, f08)                                         \
void lname(F *info, F *comm, F *win, F *ierr) {                                         \
    FREAL(lname, f_win_create_dynamic_t);                                               \
    FBEGIN(real_(info, comm, win, ierr));                                               \
    f_win_new(&e_, comm, win, 0);                                                       \
    FEND(OP_WIN_CREATE_DYNAMIC);                                                        \
}
F_FOUR(FDEF_MPI_WIN_CREATE_DYNAMIC, mpi_win_create_dynamic, MPI_WIN_CREATE_DYNAMIC)

/* Routines of one window argument: (win, ierr). */
typedef void (*f_win_t)(F *, F *);
#define FDEF_WIN1(lname, OPC)                                                           \
void lname(F *win, F *ierr) {                                                           \
    FREAL(lname, f_win_t);                                                              \
    MPI_Win before = TRACED ? CWIN(win) : MPI_WIN_NULL;                                 \
    FBEGIN(real_(win, ierr));                                                           \
    ev_win(&e_, win_get(before));                                                       \
    if (OPC == OP_WIN_FREE) win_forget(HANDLE_KEY(before));                             \
    FEND(OPC);                                                                          \
}
#define FDEF_MPI_WIN_FREE(lname, f08) FDEF_WIN1(lname, OP_WIN_FREE)
#define FDEF_MPI_WIN_UNLOCK_ALL(lname, f08) FDEF_WIN1(lname, OP_WIN_UNLOCK_ALL)
#define FDEF_MPI_WIN_FLUSH_ALL(lname, f08) FDEF_WIN1(lname, OP_WIN_FLUSH_ALL)
#define FDEF_MPI_WIN_COMPLETE(lname, f08) FDEF_WIN1(lname, OP_WIN_COMPLETE)
#define FDEF_MPI_WIN_WAIT(lname, f08) FDEF_WIN1(lname, OP_WIN_WAIT)
F_FOUR(FDEF_MPI_WIN_FREE, mpi_win_free, MPI_WIN_FREE)
F_FOUR(FDEF_MPI_WIN_UNLOCK_ALL, mpi_win_unlock_all, MPI_WIN_UNLOCK_ALL)
F_FOUR(FDEF_MPI_WIN_FLUSH_ALL, mpi_win_flush_all, MPI_WIN_FLUSH_ALL)
F_FOUR(FDEF_MPI_WIN_COMPLETE, mpi_win_complete, MPI_WIN_COMPLETE)
F_FOUR(FDEF_MPI_WIN_WAIT, mpi_win_wait, MPI_WIN_WAIT)

/* Routines of (int, win, ierr): fence and lock_all take an assertion, unlock and flush
 * a target rank. */
typedef void (*f_int_win_t)(F *, F *, F *);
#define FDEF_INT_WIN(lname, OPC, TARGET)                                                \
void lname(F *arg, F *win, F *ierr) {                                                   \
    FREAL(lname, f_int_win_t);                                                          \
    FBEGIN(real_(arg, win, ierr));                                                      \
    if (TARGET)                                                                         \
        ev_target(&e_, win_get(CWIN(win)), *arg);                                       \
    else                                                                                \
        ev_win(&e_, win_get(CWIN(win)));                                                \
    FEND(OPC);                                                                          \
}
#define FDEF_MPI_WIN_FENCE(lname, f08) FDEF_INT_WIN(lname, OP_WIN_FENCE, 0)
#define FDEF_MPI_WIN_LOCK_ALL(lname, f08) FDEF_INT_WIN(lname, OP_WIN_LOCK_ALL, 0)
#define FDEF_MPI_WIN_UNLOCK(lname, f08) FDEF_INT_WIN(lname, OP_WIN_UNLOCK, 1)
#define FDEF_MPI_WIN_FLUSH(lname, f08) FDEF_INT_WIN(lname, OP_WIN_FLUSH, 1)
F_FOUR(FDEF_MPI_WIN_FENCE, mpi_win_fence, MPI_WIN_FENCE)
F_FOUR(FDEF_MPI_WIN_LOCK_ALL, mpi_win_lock_all, MPI_WIN_LOCK_ALL)
F_FOUR(FDEF_MPI_WIN_UNLOCK, mpi_win_unlock, MPI_WIN_UNLOCK)
F_FOUR(FDEF_MPI_WIN_FLUSH, mpi_win_flush, MPI_WIN_FLUSH)

/* post and start: (group, assert, win, ierr). */
typedef void (*f_group_win_t)(F *, F *, F *, F *);
#define FDEF_GROUP_WIN(lname, OPC)                                                      \
void lname(F *group, F *assert_, F *win, F *ierr) {                                     \
    FREAL(lname, f_group_win_t);                                                        \
    FBEGIN(real_(group, assert_, win, ierr));                                           \
    ev_win(&e_, win_get(CWIN(win)));                                                    \
    FEND(OPC);                                                                          \
}
#define FDEF_MPI_WIN_POST(lname, f08) FDEF_GROUP_WIN(lname, OP_WIN_POST)
#define FDEF_MPI_WIN_START(lname, f08) FDEF_GROUP_WIN(lname, OP_WIN_START)
F_FOUR(FDEF_MPI_WIN_POST, mpi_win_post, MPI_WIN_POST)
F_FOUR(FDEF_MPI_WIN_START, mpi_win_start, MPI_WIN_START)

typedef void (*f_win_lock_t)(F *, F *, F *, F *, F *);
#define FDEF_MPI_WIN_LOCK(lname, f08)                                                   \
void lname(F *type, F *rank, F *assert_, F *win, F *ierr) {                             \
    FREAL(lname, f_win_lock_t);                                                         \
    FBEGIN(real_(type, rank, assert_, win, ierr));                                      \
    ev_target(&e_, win_get(CWIN(win)), *rank);                                          \
    FEND(OP_WIN_LOCK);                                                                  \
}
F_FOUR(FDEF_MPI_WIN_LOCK, mpi_win_lock, MPI_WIN_LOCK)

/* put and get: (obuf, ocount, otype, target, disp, tcount, ttype, win, ierr). */
typedef void (*f_put_t)(void *, F *, F *, F *, MPI_Aint *, F *, F *, F *, F *);
#define FDEF_PUT_LIKE(lname, OPC)                                                       \
void lname(void *obuf, F *ocount, F *otype, F *target, MPI_Aint *disp, F *tcount,       \
           F *ttype, F *win, F *ierr) {                                                 \
    FREAL(lname, f_put_t);                                                              \
    FBEGIN(real_(obuf, ocount, otype, target, disp, tcount, ttype, win, ierr));         \
    ev_rma(&e_, CWIN(win), *target, *ocount, CTYPE(otype));                             \
    FEND(OPC);                                                                          \
}
#define FDEF_MPI_PUT(lname, f08) FDEF_PUT_LIKE(lname, OP_PUT)
#define FDEF_MPI_GET(lname, f08) FDEF_PUT_LIKE(lname, OP_GET)
F_FOUR(FDEF_MPI_PUT, mpi_put, MPI_PUT)
F_FOUR(FDEF_MPI_GET, mpi_get, MPI_GET)

/* rput and rget: put's arguments and a request. */
typedef void (*f_rput_t)(void *, F *, F *, F *, MPI_Aint *, F *, F *, F *, F *, F *);
#define FDEF_RPUT_LIKE(lname, OPC)                                                      \
void lname(void *obuf, F *ocount, F *otype, F *target, MPI_Aint *disp, F *tcount,       \
           F *ttype, F *win, F *req, F *ierr) {                                         \
    FREAL(lname, f_rput_t);                                                             \
    FBEGIN(real_(obuf, ocount, otype, target, disp, tcount, ttype, win, req, ierr));    \
    ev_rma(&e_, CWIN(win), *target, *ocount, CTYPE(otype));                             \
    e_.mask |= F_REQ;                                                                   \
    e_.req = req_new(MPI_Request_f2c(*req));                                            \
    FEND(OPC);                                                                          \
}
#define FDEF_MPI_RPUT(lname, f08) FDEF_RPUT_LIKE(lname, OP_RPUT)
#define FDEF_MPI_RGET(lname, f08) FDEF_RPUT_LIKE(lname, OP_RGET)
F_FOUR(FDEF_MPI_RPUT, mpi_rput, MPI_RPUT)
F_FOUR(FDEF_MPI_RGET, mpi_rget, MPI_RGET)

typedef void (*f_accumulate_t)(void *, F *, F *, F *, MPI_Aint *, F *, F *, F *, F *, F *);
#define FDEF_MPI_ACCUMULATE(lname, f08)                                                 \
void lname(void *obuf, F *ocount, F *otype, F *target, MPI_Aint *disp, F *tcount,       \
           F *ttype, F *op, F *win, F *ierr) {                                          \
    FREAL(lname, f_accumulate_t);                                                       \
    FBEGIN(real_(obuf, ocount, otype, target, disp, tcount, ttype, op, win, ierr));     \
    ev_rma(&e_, CWIN(win), *target, *ocount, CTYPE(otype));                             \
    FEND(OP_ACCUMULATE);                                                                \
}
F_FOUR(FDEF_MPI_ACCUMULATE, mpi_accumulate, MPI_ACCUMULATE)

typedef void (*f_get_accumulate_t)(void *, F *, F *, void *, F *, F *, F *, MPI_Aint *, F *,
                                   F *, F *, F *, F *);
#define FDEF_MPI_GET_ACCUMULATE(lname, f08)                                             \
void lname(void *obuf, F *ocount, F *otype, void *rbuf, F *rcount, F *rtype, F *target, \
           MPI_Aint *disp, F *tcount, F *ttype, F *op, F *win, F *ierr) {               \
    FREAL(lname, f_get_accumulate_t);                                                   \
    FBEGIN(real_(obuf, ocount, otype, rbuf, rcount, rtype, target, disp, tcount, ttype, \
                 op, win, ierr));                                                       \
    ev_rma(&e_, CWIN(win), *target, *ocount, CTYPE(otype));                             \
    e_.mask |= F_RBYTES;                                                                \
    e_.rbytes = *target == MPI_PROC_NULL ? 0 : type_bytes(CTYPE(rtype), *rcount);       \
    FEND(OP_GET_ACCUMULATE);                                                            \
}
F_FOUR(FDEF_MPI_GET_ACCUMULATE, mpi_get_accumulate, MPI_GET_ACCUMULATE)

typedef void (*f_fetch_and_op_t)(void *, void *, F *, F *, MPI_Aint *, F *, F *, F *);
#define FDEF_MPI_FETCH_AND_OP(lname, f08)                                               \
void lname(void *obuf, void *rbuf, F *dt, F *target, MPI_Aint *disp, F *op, F *win,     \
           F *ierr) {                                                                   \
    FREAL(lname, f_fetch_and_op_t);                                                     \
    FBEGIN(real_(obuf, rbuf, dt, target, disp, op, win, ierr));                         \
    ev_rma(&e_, CWIN(win), *target, 1, CTYPE(dt));                                      \
    FEND(OP_FETCH_AND_OP);                                                              \
}
F_FOUR(FDEF_MPI_FETCH_AND_OP, mpi_fetch_and_op, MPI_FETCH_AND_OP)

typedef void (*f_compare_and_swap_t)(void *, void *, void *, F *, F *, MPI_Aint *, F *, F *);
#define FDEF_MPI_COMPARE_AND_SWAP(lname, f08)                                           \
void lname(void *obuf, void *cbuf, void *rbuf, F *dt, F *target, MPI_Aint *disp,        \
           F *win, F *ierr) {                                                           \
    FREAL(lname, f_compare_and_swap_t);                                                 \
    FBEGIN(real_(obuf, cbuf, rbuf, dt, target, disp, win, ierr));                       \
    ev_rma(&e_, CWIN(win), *target, 1, CTYPE(dt));                                      \
    FEND(OP_COMPARE_AND_SWAP);                                                          \
}
F_FOUR(FDEF_MPI_COMPARE_AND_SWAP, mpi_compare_and_swap, MPI_COMPARE_AND_SWAP)

typedef void (*f_intercomm_create_t)(F *, F *, F *, F *, F *, F *, F *);
#define FDEF_MPI_INTERCOMM_CREATE(lname, f08)                                           \
void lname(F *local, F *local_leader, F *peer_comm, F *remote_leader, F *tag,           \
           F *newcomm, F *ierr) {                                                       \
    FREAL(lname, f_intercomm_create_t);                                                 \
    FBEGIN(real_(local, local_leader, peer_comm, remote_leader, tag, newcomm, ierr));   \
    ev_newcomm(&e_, CCOMM(local), CCOMM(newcomm));                                      \
    if (comm_rank(CCOMM(local)) == *local_leader && CCOMM(peer_comm) != MPI_COMM_NULL) { \
        e_.mask |= F_PEER;                                                              \
        e_.peer = to_world(comm_get(CCOMM(peer_comm)), *remote_leader);                 \
    }                                                                                   \
    e_.mask |= F_TAG;                                                                   \
    e_.tag = norm_tag(*tag);                                                            \
    FEND(OP_INTERCOMM_CREATE);                                                          \
}
F_FOUR(FDEF_MPI_INTERCOMM_CREATE, mpi_intercomm_create, MPI_INTERCOMM_CREATE)

typedef void (*f_intercomm_merge_t)(F *, F *, F *, F *);
#define FDEF_MPI_INTERCOMM_MERGE(lname, f08)                                            \
void lname(F *inter, F *high, F *newcomm, F *ierr) {                                    \
    FREAL(lname, f_intercomm_merge_t);                                                  \
    FBEGIN(real_(inter, high, newcomm, ierr));                                          \
    ev_newcomm(&e_, CCOMM(inter), CCOMM(newcomm));                                      \
    e_.mask |= F_FLAG;                                                                  \
    e_.flag = (uint64_t)(*high != 0);                                                   \
    FEND(OP_INTERCOMM_MERGE);                                                           \
}
F_FOUR(FDEF_MPI_INTERCOMM_MERGE, mpi_intercomm_merge, MPI_INTERCOMM_MERGE)
