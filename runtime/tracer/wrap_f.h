/* Wrappers of the Fortran bindings (gfortran mangling `mpi_send_`, plus the `mpi_send__`
 * and `MPI_SEND` aliases): take calls from Fortran code, give events to emit().
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
void mpi_init_(F *ierr) {
    FREAL(mpi_init_, f_init_t);
    uint64_t t0 = now_ns();
    g_depth++;
    real_(ierr);
    g_depth--;
    if (g_depth) return;
    tracer_start(t0);
    if (g_on) {
        ev_t e;
        memset(&e, 0, sizeof e);
        e.op = OP_INIT;
        emit(&e, t0, now_ns(), __builtin_return_address(0));
    }
}
FALIAS(mpi_init_, mpi_init__, MPI_INIT)

typedef void (*f_init_thread_t)(F *, F *, F *);
void mpi_init_thread_(F *required, F *provided, F *ierr) {
    FREAL(mpi_init_thread_, f_init_thread_t);
    uint64_t t0 = now_ns();
    g_depth++;
    real_(required, provided, ierr);
    g_depth--;
    if (g_depth) return;
    tracer_start(t0);
    if (g_on) {
        ev_t e;
        memset(&e, 0, sizeof e);
        e.op = OP_INIT_THREAD;
        emit(&e, t0, now_ns(), __builtin_return_address(0));
    }
}
FALIAS(mpi_init_thread_, mpi_init_thread__, MPI_INIT_THREAD)

void mpi_finalize_(F *ierr) {
    FREAL(mpi_finalize_, f_init_t);
    FBEGIN(real_(ierr));
    FEND(OP_FINALIZE);
    tracer_stop();
}
FALIAS(mpi_finalize_, mpi_finalize__, MPI_FINALIZE)

typedef void (*f_send_t)(void *, F *, F *, F *, F *, F *, F *);
#define F_SEND_LIKE(lname, a, b, OPC)                                                \
    void lname(void *buf, F *count, F *dt, F *dest, F *tag, F *comm, F *ierr) {       \
        FREAL(lname, f_send_t);                                                      \
        FBEGIN(real_(buf, count, dt, dest, tag, comm, ierr));                        \
        ev_p2p(&e_, CCOMM(comm), *dest, *tag, *count, CTYPE(dt));                    \
        FEND(OPC);                                                                   \
    }                                                                                \
    FALIAS(lname, a, b)
F_SEND_LIKE(mpi_send_, mpi_send__, MPI_SEND, OP_SEND)
F_SEND_LIKE(mpi_ssend_, mpi_ssend__, MPI_SSEND, OP_SSEND)
F_SEND_LIKE(mpi_bsend_, mpi_bsend__, MPI_BSEND, OP_BSEND)
F_SEND_LIKE(mpi_rsend_, mpi_rsend__, MPI_RSEND, OP_RSEND)

typedef void (*f_isend_t)(void *, F *, F *, F *, F *, F *, F *, F *);
#define F_ISEND_LIKE(lname, a, b, OPC)                                               \
    void lname(void *buf, F *count, F *dt, F *peer, F *tag, F *comm, F *req, F *ierr) { \
        FREAL(lname, f_isend_t);                                                     \
        FBEGIN(real_(buf, count, dt, peer, tag, comm, req, ierr));                   \
        ev_p2p(&e_, CCOMM(comm), *peer, *tag, *count, CTYPE(dt));                    \
        e_.mask |= F_REQ;                                                            \
        e_.req = req_new(MPI_Request_f2c(*req));                                     \
        FEND(OPC);                                                                   \
    }                                                                                \
    FALIAS(lname, a, b)
F_ISEND_LIKE(mpi_isend_, mpi_isend__, MPI_ISEND, OP_ISEND)
F_ISEND_LIKE(mpi_issend_, mpi_issend__, MPI_ISSEND, OP_ISSEND)
F_ISEND_LIKE(mpi_irecv_, mpi_irecv__, MPI_IRECV, OP_IRECV)

/* Reads a Fortran status (unless it is MPI_STATUS_IGNORE) into the event. */
static void f_status(ev_t *e, MPI_Comm comm, F *status, MPI_Datatype dt) {
    MPI_Status st;
    if (status == MPI_F_STATUS_IGNORE || PMPI_Status_f2c(status, &st) != MPI_SUCCESS) return;
    ev_recv_status(e, comm, &st, dt);
}

typedef void (*f_recv_t)(void *, F *, F *, F *, F *, F *, F *, F *);
void mpi_recv_(void *buf, F *count, F *dt, F *src, F *tag, F *comm, F *status, F *ierr) {
    FREAL(mpi_recv_, f_recv_t);
    FBEGIN(real_(buf, count, dt, src, tag, comm, status, ierr));
    ev_p2p(&e_, CCOMM(comm), *src, *tag, *count, CTYPE(dt));
    if (*src != MPI_PROC_NULL) f_status(&e_, CCOMM(comm), status, CTYPE(dt));
    FEND(OP_RECV);
}
FALIAS(mpi_recv_, mpi_recv__, MPI_RECV)

typedef void (*f_sendrecv_t)(void *, F *, F *, F *, F *, void *, F *, F *, F *, F *, F *,
                             F *, F *);
void mpi_sendrecv_(void *sbuf, F *scount, F *stype, F *dest, F *stag, void *rbuf, F *rcount,
                   F *rtype, F *src, F *rtag, F *comm, F *status, F *ierr) {
    FREAL(mpi_sendrecv_, f_sendrecv_t);
    FBEGIN(real_(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm,
                 status, ierr));
    MPI_Comm c = CCOMM(comm);
    ev_p2p(&e_, c, *dest, *stag, *scount, CTYPE(stype));
    e_.mask |= F_SRC | F_RTAG | F_RBYTES;
    e_.src = to_world(comm_get(c), *src);
    e_.rtag = norm_tag(*rtag);
    e_.rbytes = *src == MPI_PROC_NULL ? 0 : type_bytes(CTYPE(rtype), *rcount);
    FEND(OP_SENDRECV);
}
FALIAS(mpi_sendrecv_, mpi_sendrecv__, MPI_SENDRECV)

typedef void (*f_wait_t)(F *, F *, F *);
void mpi_wait_(F *req, F *status, F *ierr) {
    FREAL(mpi_wait_, f_wait_t);
    MPI_Request before = MPI_Request_f2c(*req);
    uint64_t id = 0;
    FBEGIN(real_(req, status, ierr));
    complete_reqs(&e_, &id, &before, 1, NULL, 0);
    FEND(OP_WAIT);
}
FALIAS(mpi_wait_, mpi_wait__, MPI_WAIT)

typedef void (*f_waitall_t)(F *, F *, F *, F *);
void mpi_waitall_(F *count, F *reqs, F *statuses, F *ierr) {
    FREAL(mpi_waitall_, f_waitall_t);
    if (!TRACED) {
        g_depth++;
        real_(count, reqs, statuses, ierr);
        g_depth--;
        return;
    }
    int n = *count > 0 ? *count : 0;
    MPI_Request *before = malloc(sizeof(MPI_Request) * (size_t)n + 1);
    uint64_t *ids = malloc(sizeof(uint64_t) * (size_t)n + 1);
    if (!before || !ids) abort();
    for (int i = 0; i < n; i++) {
        before[i] = MPI_Request_f2c(reqs[i]);
    }
    FBEGIN(real_(count, reqs, statuses, ierr));
    complete_reqs(&e_, ids, before, n, NULL, 0);
    FEND(OP_WAITALL);
    free(before);
    free(ids);
}
FALIAS(mpi_waitall_, mpi_waitall__, MPI_WAITALL)

typedef void (*f_barrier_t)(F *, F *);
void mpi_barrier_(F *comm, F *ierr) {
    FREAL(mpi_barrier_, f_barrier_t);
    FBEGIN(real_(comm, ierr));
    ev_coll(&e_, CCOMM(comm), 0, 0);
    FEND(OP_BARRIER);
}
FALIAS(mpi_barrier_, mpi_barrier__, MPI_BARRIER)

typedef void (*f_bcast_t)(void *, F *, F *, F *, F *, F *);
void mpi_bcast_(void *buf, F *count, F *dt, F *root, F *comm, F *ierr) {
    FREAL(mpi_bcast_, f_bcast_t);
    FBEGIN(real_(buf, count, dt, root, comm, ierr));
    MPI_Comm c = CCOMM(comm);
    uint64_t b = type_bytes(CTYPE(dt), *count);
    int is_root = comm_rank(c) == *root;
    ev_coll(&e_, c, is_root ? b : 0, is_root ? 0 : b);
    ev_root(&e_, c, *root);
    FEND(OP_BCAST);
}
FALIAS(mpi_bcast_, mpi_bcast__, MPI_BCAST)

typedef void (*f_reduce_t)(void *, void *, F *, F *, F *, F *, F *, F *);
void mpi_reduce_(void *sbuf, void *rbuf, F *count, F *dt, F *op, F *root, F *comm, F *ierr) {
    FREAL(mpi_reduce_, f_reduce_t);
    FBEGIN(real_(sbuf, rbuf, count, dt, op, root, comm, ierr));
    MPI_Comm c = CCOMM(comm);
    uint64_t b = type_bytes(CTYPE(dt), *count);
    ev_coll(&e_, c, b, comm_rank(c) == *root ? b : 0);
    ev_root(&e_, c, *root);
    FEND(OP_REDUCE);
}
FALIAS(mpi_reduce_, mpi_reduce__, MPI_REDUCE)

typedef void (*f_allreduce_t)(void *, void *, F *, F *, F *, F *, F *);
void mpi_allreduce_(void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *ierr) {
    FREAL(mpi_allreduce_, f_allreduce_t);
    FBEGIN(real_(sbuf, rbuf, count, dt, op, comm, ierr));
    uint64_t b = type_bytes(CTYPE(dt), *count);
    ev_coll(&e_, CCOMM(comm), b, b);
    FEND(OP_ALLREDUCE);
}
FALIAS(mpi_allreduce_, mpi_allreduce__, MPI_ALLREDUCE)

typedef void (*f_a2a_t)(void *, F *, F *, void *, F *, F *, F *, F *);
#define F_ALL_LIKE(lname, a, b, OPC, MUL)                                            \
    void lname(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm, \
               F *ierr) {                                                            \
        FREAL(lname, f_a2a_t);                                                       \
        FBEGIN(real_(sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr));         \
        MPI_Comm c = CCOMM(comm);                                                    \
        int n = comm_size(c);                                                        \
        ev_coll(&e_, c, type_bytes(CTYPE(stype), (int64_t)*scount * (MUL ? n : 1)),   \
                type_bytes(CTYPE(rtype), (int64_t)*rcount * n));                     \
        FEND(OPC);                                                                   \
    }                                                                                \
    FALIAS(lname, a, b)
F_ALL_LIKE(mpi_alltoall_, mpi_alltoall__, MPI_ALLTOALL, OP_ALLTOALL, 1)
F_ALL_LIKE(mpi_allgather_, mpi_allgather__, MPI_ALLGATHER, OP_ALLGATHER, 0)

typedef void (*f_split_t)(F *, F *, F *, F *, F *);
void mpi_comm_split_(F *comm, F *color, F *key, F *newcomm, F *ierr) {
    FREAL(mpi_comm_split_, f_split_t);
    FBEGIN(real_(comm, color, key, newcomm, ierr));
    ev_newcomm(&e_, CCOMM(comm), CCOMM(newcomm));
    FEND(OP_COMM_SPLIT);
}
FALIAS(mpi_comm_split_, mpi_comm_split__, MPI_COMM_SPLIT)

typedef void (*f_dup_t)(F *, F *, F *);
void mpi_comm_dup_(F *comm, F *newcomm, F *ierr) {
    FREAL(mpi_comm_dup_, f_dup_t);
    FBEGIN(real_(comm, newcomm, ierr));
    ev_newcomm(&e_, CCOMM(comm), CCOMM(newcomm));
    FEND(OP_COMM_DUP);
}
FALIAS(mpi_comm_dup_, mpi_comm_dup__, MPI_COMM_DUP)

typedef void (*f_cart_create_t)(F *, F *, F *, F *, F *, F *, F *);
void mpi_cart_create_(F *comm, F *ndims, F *dims, F *periods, F *reorder, F *newcomm,
                      F *ierr) {
    FREAL(mpi_cart_create_, f_cart_create_t);
    FBEGIN(real_(comm, ndims, dims, periods, reorder, newcomm, ierr));
    ev_newcomm(&e_, CCOMM(comm), CCOMM(newcomm));
    FEND(OP_CART_CREATE);
}
FALIAS(mpi_cart_create_, mpi_cart_create__, MPI_CART_CREATE)

typedef void (*f_comm_free_t)(F *, F *);
void mpi_comm_free_(F *comm, F *ierr) {
    FREAL(mpi_comm_free_, f_comm_free_t);
    MPI_Comm before = CCOMM(comm);
    uint64_t id = TRACED ? comm_get(before)->id : 0;
    FBEGIN(real_(comm, ierr));
    e_.mask |= F_COMM;
    e_.comm = id;
    comm_forget(HANDLE_KEY(before));
    FEND(OP_COMM_FREE);
}
FALIAS(mpi_comm_free_, mpi_comm_free__, MPI_COMM_FREE)
