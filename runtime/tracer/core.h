/* perfskel tracer core: buffered binary event writer, handle tables, call sites.
 *
 * Takes events from the PMPI wrappers (wrap_c.c, wrap_f.c) and gives per-rank files
 * in the format described in FORMAT.md. Everything here is static and included into
 * one translation unit (tracer.c), so the compiler can inline the hot path.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "memprobe.h"

#define PST_VERSION 5u

/* Operation codes: keep in sync with compiler/src/trace/format.rs and FORMAT.md. */
enum {
    OP_INIT = 1, OP_INIT_THREAD = 2, OP_FINALIZE = 3, OP_ABORT = 4,
    OP_SEND = 10, OP_BSEND, OP_SSEND, OP_RSEND, OP_ISEND, OP_IBSEND, OP_ISSEND, OP_IRSEND,
    OP_RECV = 18, OP_IRECV, OP_SENDRECV, OP_SENDRECV_REPLACE, OP_PROBE, OP_IPROBE,
    OP_WAIT = 30, OP_WAITALL, OP_WAITANY, OP_WAITSOME, OP_TEST, OP_TESTALL, OP_TESTANY,
    OP_TESTSOME,
    OP_BARRIER = 40, OP_BCAST, OP_REDUCE, OP_ALLREDUCE, OP_GATHER, OP_GATHERV, OP_SCATTER,
    OP_SCATTERV, OP_ALLGATHER, OP_ALLGATHERV, OP_ALLTOALL, OP_ALLTOALLV, OP_REDUCE_SCATTER,
    OP_REDUCE_SCATTER_BLOCK, OP_SCAN, OP_EXSCAN,
    OP_IBARRIER = 60, OP_IBCAST, OP_IREDUCE, OP_IALLREDUCE, OP_IGATHER, OP_IGATHERV,
    OP_ISCATTER, OP_ISCATTERV, OP_IALLGATHER, OP_IALLGATHERV, OP_IALLTOALL, OP_IALLTOALLV,
    OP_IREDUCE_SCATTER, OP_IREDUCE_SCATTER_BLOCK, OP_ISCAN, OP_IEXSCAN, /* 72-75: version 2 */
    OP_COMM_DUP = 80, OP_COMM_SPLIT, OP_COMM_CREATE, OP_CART_CREATE, OP_CART_SUB, OP_COMM_FREE,
    /* 90-116: version 4. One-sided communication, then intercommunicators. */
    OP_WIN_CREATE = 90, OP_WIN_ALLOCATE, OP_WIN_ALLOCATE_SHARED, OP_WIN_CREATE_DYNAMIC,
    OP_WIN_FREE, OP_WIN_FENCE, OP_WIN_LOCK, OP_WIN_UNLOCK, OP_WIN_LOCK_ALL, OP_WIN_UNLOCK_ALL,
    OP_WIN_FLUSH, OP_WIN_FLUSH_ALL, OP_WIN_POST, OP_WIN_START, OP_WIN_COMPLETE, OP_WIN_WAIT,
    OP_PUT = 106, OP_GET, OP_ACCUMULATE, OP_GET_ACCUMULATE, OP_FETCH_AND_OP,
    OP_COMPARE_AND_SWAP, OP_RPUT, OP_RGET,
    OP_INTERCOMM_CREATE = 114, OP_INTERCOMM_MERGE, OP_COMM_SPAWN,
    OP_CANCEL = 117, /* version 5 */
};

/* Field bits of an event's mask; fields follow in this order. */
enum {
    F_PEER = 1 << 0, F_TAG = 1 << 1, F_BYTES = 1 << 2, F_COMM = 1 << 3, F_REQ = 1 << 4,
    F_REQS = 1 << 5, F_ROOT = 1 << 6, F_SRC = 1 << 7, F_RTAG = 1 << 8, F_RBYTES = 1 << 9,
    F_NEWCOMM = 1 << 10, F_FLAG = 1 << 11,
};

enum { R_OBJECT = 0xF0, R_SITE = 0xF1, R_COMM = 0xF2, R_MEMORY = 0xF3, R_END = 0xFF };

typedef struct {
    unsigned op, mask;
    int64_t peer, tag, root, src, rtag;
    uint64_t bytes, rbytes, comm, req, newcomm, flag;
    const uint64_t *reqs;
    int n_reqs;
} ev_t;

#define PEER_PROC_NULL (-1)
#define PEER_ANY_SOURCE (-2)

/* ---- state ---------------------------------------------------------------------- */

#define BUF_CAP (1u << 20)
static unsigned char g_buf[BUF_CAP];
static size_t g_len;
static int g_fd = -1;
static volatile sig_atomic_t g_flushing;
static int g_on;
static __thread int g_depth;
static uint64_t g_t0, g_prev_end, g_n_events, g_next_req, g_next_site, g_last_flush;

/* Buffered events are written at least this often, so a rank killed with SIGKILL (which
 * no handler sees) loses at most this much of its trace. */
#define FLUSH_INTERVAL_NS 1000000000ull
static int g_rank;

static inline uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Two clock reads per event dominate the tracer's cost: clock_gettime takes ~80 ns in
 * some virtual machines, the TSC ~15 ns. Where the TSC is invariant (constant_tsc and
 * nonstop_tsc), now_ns() scales it to CLOCK_MONOTONIC nanoseconds with a rate measured
 * over 10 ms at start-up; elsewhere it is clock_gettime. */
#if defined(__x86_64__)
#include <x86intrin.h>
static int g_use_tsc;
static uint64_t g_tsc_base, g_mono_base, g_tsc_mult; /* ns = ticks * mult >> 32 */

static void tsc_pair(uint64_t *tsc, uint64_t *mono) {
    for (int tries = 0;; tries++) {
        uint64_t a = mono_ns();
        uint64_t t = __rdtsc();
        uint64_t b = mono_ns();
        if (b - a < 2000 || tries > 100) {
            *tsc = t;
            *mono = a + (b - a) / 2;
            return;
        }
    }
}

static int cpu_has_invariant_tsc(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[4096];
    int ok = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) {
            ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
            break;
        }
    fclose(f);
    return ok;
}

static void clock_calibrate(void) {
    if (getenv("PERFSKEL_NO_TSC") || !cpu_has_invariant_tsc()) return;
    uint64_t t0, m0, t1, m1;
    tsc_pair(&t0, &m0);
    do tsc_pair(&t1, &m1); while (m1 - m0 < 10000000u);
    if (t1 <= t0) return;
    g_tsc_mult = (uint64_t)(((unsigned __int128)(m1 - m0) << 32) / (t1 - t0));
    g_tsc_base = t1;
    g_mono_base = m1;
    g_use_tsc = 1;
}

static inline uint64_t now_ns(void) {
    if (g_use_tsc) {
        uint64_t d = __rdtsc() - g_tsc_base;
        return g_mono_base + (uint64_t)(((unsigned __int128)d * g_tsc_mult) >> 32);
    }
    return mono_ns();
}
#else
static void clock_calibrate(void) {}
static inline uint64_t now_ns(void) { return mono_ns(); }
#endif

/* Writes the whole buffer; only whole records are ever in it (g_len is advanced after
 * a record is fully encoded), so a flush from a signal handler leaves a readable file. */
static void flush_buf(void) {
    if (g_fd < 0 || g_flushing) return;
    g_flushing = 1;
    size_t off = 0;
    while (off < g_len) {
        ssize_t n = write(g_fd, g_buf + off, g_len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        off += (size_t)n;
    }
    g_len = 0;
    g_flushing = 0;
}

/* Returns a pointer where at least `n` bytes may be written; commit with g_len = end. */
static inline unsigned char *reserve(size_t n) {
    if (g_len + n > BUF_CAP) flush_buf();
    return g_buf + g_len;
}

static inline unsigned char *put_varint(unsigned char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

static inline uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

/* ---- hash table: u64 handle -> u64 value (open addressing) ----------------------- */

typedef struct {
    uint64_t *keys, *vals;
    size_t cap, used;
} htab_t;

#define HT_EMPTY 0u
#define HT_TOMB 1u

static inline size_t ht_slot(const htab_t *h, uint64_t k) {
    return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (h->cap - 1);
}

static void ht_put(htab_t *h, uint64_t key, uint64_t val);

/* Rehashes into a table with room for twice the live keys (tombstones dropped): the
 * request table sees millions of short-lived keys, so it must not grow with them. */
static void ht_grow(htab_t *h) {
    htab_t old = *h;
    size_t live = 0;
    for (size_t i = 0; i < old.cap; i++) live += old.keys[i] > HT_TOMB;
    h->cap = 1024;
    while ((live + 1) * 2 > h->cap) h->cap *= 2;
    h->used = 0;
    h->keys = calloc(h->cap, sizeof *h->keys);
    h->vals = calloc(h->cap, sizeof *h->vals);
    if (!h->keys || !h->vals) abort();
    for (size_t i = 0; i < old.cap; i++)
        if (old.keys[i] > HT_TOMB) ht_put(h, old.keys[i] - 2, old.vals[i]);
    free(old.keys);
    free(old.vals);
}

/* Sets key's value; an existing key is found past tombstones (so it is never stored
 * twice), a new one takes the first free or dead slot of its probe sequence. */
static void ht_put(htab_t *h, uint64_t key, uint64_t val) {
    if ((h->used + 1) * 4 > h->cap * 3) ht_grow(h);
    uint64_t k = key + 2;
    size_t i = ht_slot(h, k), dead = SIZE_MAX;
    while (h->keys[i] != HT_EMPTY && h->keys[i] != k) {
        if (h->keys[i] == HT_TOMB && dead == SIZE_MAX) dead = i;
        i = (i + 1) & (h->cap - 1);
    }
    if (h->keys[i] == HT_EMPTY) {
        if (dead != SIZE_MAX) {
            i = dead;
        } else {
            h->used++;
        }
    }
    h->keys[i] = k;
    h->vals[i] = val;
}

static int ht_find(const htab_t *h, uint64_t key, size_t *slot) {
    if (!h->cap) return 0;
    uint64_t k = key + 2;
    size_t i = ht_slot(h, k);
    while (h->keys[i] != HT_EMPTY) {
        if (h->keys[i] == k) {
            *slot = i;
            return 1;
        }
        i = (i + 1) & (h->cap - 1);
    }
    return 0;
}

static uint64_t ht_get(const htab_t *h, uint64_t key) {
    size_t i;
    return ht_find(h, key, &i) ? h->vals[i] : 0;
}

#define HANDLE_KEY(h) handle_key(&(h), sizeof(h))
static inline uint64_t handle_key(const void *p, size_t n) {
    uint64_t k = 0;
    memcpy(&k, p, n < sizeof k ? n : sizeof k);
    return k;
}

/* ---- call sites and loaded objects ----------------------------------------------- */

static htab_t g_sites;
typedef struct {
    uint64_t bias;
    char path[512];
} object_t;
static object_t g_objects[256];
static unsigned g_n_objects;

typedef struct {
    uintptr_t addr;
    uint64_t bias;
    const char *name;
    int found;
} phdr_query_t;

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    phdr_query_t *q = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (q->addr >= lo && q->addr < lo + ph->p_memsz) {
            q->bias = info->dlpi_addr;
            q->name = info->dlpi_name;
            q->found = 1;
            return 1;
        }
    }
    return 0;
}

static unsigned object_id(uintptr_t addr) {
    phdr_query_t q = {addr, 0, NULL, 0};
    dl_iterate_phdr(phdr_cb, &q);
    char path[512] = "";
    if (!q.found) return 0;
    if (q.name && q.name[0]) {
        snprintf(path, sizeof path, "%s", q.name);
    } else {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        path[n > 0 ? n : 0] = 0;
    }
    for (unsigned i = 0; i < g_n_objects; i++)
        if (g_objects[i].bias == q.bias && !strcmp(g_objects[i].path, path)) return i + 1;
    if (g_n_objects == sizeof g_objects / sizeof g_objects[0]) return 0;
    object_t *o = &g_objects[g_n_objects++];
    o->bias = q.bias;
    memcpy(o->path, path, sizeof path);
    size_t len = strlen(path);
    unsigned char *p = reserve(32 + len), *start = p;
    *p++ = R_OBJECT;
    p = put_varint(p, g_n_objects);
    p = put_varint(p, q.bias);
    p = put_varint(p, len);
    memcpy(p, path, len);
    g_len += (size_t)(p + len - start);
    return g_n_objects;
}

static inline uint64_t site_id(void *ra) {
    uint64_t addr = (uint64_t)(uintptr_t)ra;
    uint64_t id = ht_get(&g_sites, addr);
    if (id) return id;
    id = ++g_next_site;
    ht_put(&g_sites, addr, id);
    unsigned obj = object_id((uintptr_t)addr);
    unsigned char *p = reserve(40), *start = p;
    *p++ = R_SITE;
    p = put_varint(p, id);
    p = put_varint(p, obj);
    p = put_varint(p, addr);
    g_len += (size_t)(p - start);
    return id;
}

/* ---- communicators ----------------------------------------------------------------- */

typedef struct {
    uint64_t key;
    uint64_t id;
    int size;
    int *world; /* local rank -> world rank */
} comm_t;
static comm_t *g_comms;
static size_t g_n_comms, g_cap_comms;
static uint64_t g_next_comm;

static comm_t *comm_register(MPI_Comm c) {
    if (g_n_comms == g_cap_comms) {
        g_cap_comms = g_cap_comms ? g_cap_comms * 2 : 16;
        g_comms = realloc(g_comms, g_cap_comms * sizeof *g_comms);
        if (!g_comms) abort();
    }
    comm_t *e = &g_comms[g_n_comms++];
    e->key = HANDLE_KEY(c);
    e->id = g_next_comm++;
    int inter = 0;
    MPI_Group g, wg;
    PMPI_Comm_test_inter(c, &inter);
    if (inter) PMPI_Comm_remote_group(c, &g); else PMPI_Comm_group(c, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    PMPI_Group_size(g, &e->size);
    int *local = malloc(sizeof(int) * (size_t)e->size + 1);
    e->world = malloc(sizeof(int) * (size_t)e->size + 1);
    if (!local || !e->world) abort();
    for (int i = 0; i < e->size; i++) local[i] = i;
    PMPI_Group_translate_ranks(g, e->size, local, wg, e->world);
    free(local);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    /* Version 5: the Cartesian grid the application gave it (MPI_Cart_create,
     * MPI_Cart_sub, or a dup of one), as dimensions and periods; 0 dimensions if none. */
    int topo = MPI_UNDEFINED, ndims = 0;
    if (!inter) PMPI_Topo_test(c, &topo);
    if (topo == MPI_CART) PMPI_Cartdim_get(c, &ndims);
    if (ndims < 0 || ndims > 64) ndims = 0;
    int dims[64], periods[64], coords[64];
    if (ndims > 0) PMPI_Cart_get(c, ndims, dims, periods, coords);
    unsigned char *p = reserve(32 + 10 * (size_t)e->size + 11 * (size_t)ndims), *start = p;
    *p++ = R_COMM;
    p = put_varint(p, e->id);
    p = put_varint(p, (uint64_t)e->size);
    for (int i = 0; i < e->size; i++) p = put_varint(p, zigzag(e->world[i]));
    p = put_varint(p, (uint64_t)ndims);
    for (int i = 0; i < ndims; i++)
        p = put_varint(p, ((uint64_t)(dims[i] > 0 ? dims[i] : 0) << 1) | (periods[i] ? 1u : 0u));
    g_len += (size_t)(p - start);
    return e;
}

static comm_t *comm_get(MPI_Comm c) {
    uint64_t key = HANDLE_KEY(c);
    for (size_t i = 0; i < g_n_comms; i++)
        if (g_comms[i].key == key) return &g_comms[i];
    return comm_register(c);
}

static void comm_forget(uint64_t key) {
    for (size_t i = 0; i < g_n_comms; i++)
        if (g_comms[i].key == key) {
            free(g_comms[i].world);
            g_comms[i] = g_comms[--g_n_comms];
            return;
        }
}

static inline int64_t to_world(const comm_t *c, int r) {
    if (r == MPI_PROC_NULL) return PEER_PROC_NULL;
    if (r == MPI_ANY_SOURCE) return PEER_ANY_SOURCE;
    if (r < 0 || r >= c->size) return r;
    return c->world[r];
}

/* ---- windows ------------------------------------------------------------------------
 * Window handle -> the communicator it was made over (its id, and its ranks as world
 * ranks, copied: the communicator may be freed while the window lives). One-sided
 * events name that communicator and give targets as world ranks. */

typedef struct {
    uint64_t key;
    uint64_t comm;
    int size;
    int *world;
} win_t;
static win_t *g_wins;
static size_t g_n_wins, g_cap_wins;

static void win_register(MPI_Win w, MPI_Comm comm) {
    comm_t *c = comm_get(comm);
    if (g_n_wins == g_cap_wins) {
        g_cap_wins = g_cap_wins ? g_cap_wins * 2 : 8;
        g_wins = realloc(g_wins, g_cap_wins * sizeof *g_wins);
        if (!g_wins) abort();
    }
    win_t *e = &g_wins[g_n_wins++];
    e->key = HANDLE_KEY(w);
    e->comm = c->id;
    e->size = c->size;
    e->world = malloc(sizeof(int) * (size_t)c->size + 1);
    if (!e->world) abort();
    memcpy(e->world, c->world, sizeof(int) * (size_t)c->size);
}

static win_t *win_get(MPI_Win w) {
    uint64_t key = HANDLE_KEY(w);
    for (size_t i = 0; i < g_n_wins; i++)
        if (g_wins[i].key == key) return &g_wins[i];
    return NULL;
}

static void win_forget(uint64_t key) {
    for (size_t i = 0; i < g_n_wins; i++)
        if (g_wins[i].key == key) {
            free(g_wins[i].world);
            g_wins[i] = g_wins[--g_n_wins];
            return;
        }
}

static inline int64_t norm_tag(int tag) { return tag == MPI_ANY_TAG ? -1 : tag; }

static inline uint64_t type_bytes(MPI_Datatype dt, int64_t count) {
    if (dt == MPI_DATATYPE_NULL || count <= 0) return 0;
    int sz = 0;
    PMPI_Type_size(dt, &sz);
    return sz > 0 ? (uint64_t)sz * (uint64_t)count : 0;
}

/* ---- requests ----------------------------------------------------------------------
 * Handle -> stack of live request ids. Both MPIs hand out one shared handle for requests
 * that complete at once (sends to MPI_PROC_NULL, eager sends), so several live ids may
 * sit under one handle; completing a handle pops one of them. */

typedef struct {
    uint64_t id;
    uint32_t next; /* node index + 1, 0 = end */
} rnode_t;
static htab_t g_reqs; /* handle -> top node index + 1 */
static rnode_t *g_rnodes;
static uint32_t g_rn_len, g_rn_cap, g_rn_free;

static uint32_t rnode_alloc(void) {
    if (g_rn_free) {
        uint32_t n = g_rn_free;
        g_rn_free = g_rnodes[n - 1].next;
        return n;
    }
    if (g_rn_len == g_rn_cap) {
        g_rn_cap = g_rn_cap ? g_rn_cap * 2 : 1024;
        g_rnodes = realloc(g_rnodes, sizeof *g_rnodes * g_rn_cap);
        if (!g_rnodes) abort();
    }
    return ++g_rn_len;
}

static inline uint64_t req_new(MPI_Request r) {
    uint64_t id = ++g_next_req;
    uint64_t key = HANDLE_KEY(r);
    uint32_t n = rnode_alloc();
    g_rnodes[n - 1].id = id;
    g_rnodes[n - 1].next = (uint32_t)ht_get(&g_reqs, key);
    ht_put(&g_reqs, key, n);
    return id;
}

/* Takes the id of the request that `r` (the handle before completion) stood for. */
static inline uint64_t req_pop(MPI_Request r) {
    if (r == MPI_REQUEST_NULL) return 0;
    size_t slot;
    if (!ht_find(&g_reqs, HANDLE_KEY(r), &slot)) return 0;
    uint32_t n = (uint32_t)g_reqs.vals[slot];
    rnode_t node = g_rnodes[n - 1];
    if (node.next)
        g_reqs.vals[slot] = node.next;
    else
        g_reqs.keys[slot] = HT_TOMB;
    g_rnodes[n - 1].next = g_rn_free;
    g_rn_free = n;
    return node.id;
}

/* The id of the request that `r` stands for, left live (MPI_Cancel: the wait or test
 * that follows completes it). */
static inline uint64_t req_peek(MPI_Request r) {
    if (r == MPI_REQUEST_NULL) return 0;
    size_t slot;
    if (!ht_find(&g_reqs, HANDLE_KEY(r), &slot)) return 0;
    return g_rnodes[(uint32_t)g_reqs.vals[slot] - 1].id;
}

/* ---- persistent requests -------------------------------------------------------------
 * MPI_Send_init & co. create a request that each MPI_Start(all) starts again. The init
 * call stores the event its starts will record (operation, peer, tag, bytes, comm, all
 * resolved at init time); each start records that event with a fresh request id, pushed
 * on the handle like a nonblocking call's, so the completion that follows links to it. */

typedef struct {
    ev_t ev;
    uint32_t next_free; /* index + 1 of the next free slot */
} persist_t;
static htab_t g_persist; /* handle -> slot index + 1 */
static persist_t *g_pslots;
static uint32_t g_ps_len, g_ps_cap, g_ps_free;

static void persist_forget(MPI_Request r) {
    size_t slot;
    uint64_t key = HANDLE_KEY(r);
    if (!ht_find(&g_persist, key, &slot)) return;
    uint32_t n = (uint32_t)g_persist.vals[slot];
    g_persist.keys[slot] = HT_TOMB;
    g_pslots[n - 1].next_free = g_ps_free;
    g_ps_free = n;
}

/* Remembers the event that starting `r` records (`e` with its op, mask and fields). */
static void persist_put(MPI_Request r, const ev_t *e) {
    persist_forget(r);
    uint32_t n;
    if (g_ps_free) {
        n = g_ps_free;
        g_ps_free = g_pslots[n - 1].next_free;
    } else {
        if (g_ps_len == g_ps_cap) {
            g_ps_cap = g_ps_cap ? g_ps_cap * 2 : 64;
            g_pslots = realloc(g_pslots, sizeof *g_pslots * g_ps_cap);
            if (!g_pslots) abort();
        }
        n = ++g_ps_len;
    }
    g_pslots[n - 1].ev = *e;
    g_pslots[n - 1].next_free = 0;
    ht_put(&g_persist, HANDLE_KEY(r), n);
}

static const ev_t *persist_get(MPI_Request r) {
    size_t slot;
    if (!ht_find(&g_persist, HANDLE_KEY(r), &slot)) return NULL;
    return &g_pslots[g_persist.vals[slot] - 1].ev;
}

/* ---- events ------------------------------------------------------------------------ */

static void emit(const ev_t *e, uint64_t t0, uint64_t t1, void *ra) {
    uint64_t site = site_id(ra);
    size_t n_reqs = e->mask & F_REQS ? (size_t)e->n_reqs : 0;
    if (n_reqs > (BUF_CAP / 10) - 64) n_reqs = (BUF_CAP / 10) - 64;
    unsigned char *p = reserve(160 + 10 * n_reqs), *start = p;
    uint64_t gap = t0 > g_prev_end ? t0 - g_prev_end : 0;
    *p++ = (unsigned char)e->op;
    p = put_varint(p, e->mask);
    p = put_varint(p, gap);
    p = put_varint(p, t1 - t0);
    p = put_varint(p, site);
    if (e->mask & F_PEER) p = put_varint(p, zigzag(e->peer));
    if (e->mask & F_TAG) p = put_varint(p, zigzag(e->tag));
    if (e->mask & F_BYTES) p = put_varint(p, e->bytes);
    if (e->mask & F_COMM) p = put_varint(p, e->comm);
    if (e->mask & F_REQ) p = put_varint(p, e->req);
    if (e->mask & F_REQS) {
        p = put_varint(p, n_reqs);
        for (size_t i = 0; i < n_reqs; i++) p = put_varint(p, e->reqs[i]);
    }
    if (e->mask & F_ROOT) p = put_varint(p, zigzag(e->root));
    if (e->mask & F_SRC) p = put_varint(p, zigzag(e->src));
    if (e->mask & F_RTAG) p = put_varint(p, zigzag(e->rtag));
    if (e->mask & F_RBYTES) p = put_varint(p, e->rbytes);
    if (e->mask & F_NEWCOMM) p = put_varint(p, e->newcomm);
    if (e->mask & F_FLAG) p = put_varint(p, e->flag);
    g_len += (size_t)(p - start);
    g_n_events++;
    if (t1 - g_last_flush > FLUSH_INTERVAL_NS) {
        flush_buf();
        g_last_flush = t1;
    }
    /* The next gap starts here, not at t1: the tracer's own work after the call
     * (filling and encoding the event, request bookkeeping, writing the buffer) is not
     * the application's compute, and a skeleton replaying it would run the tracer's
     * cost again (HPCC polls MPI_Testany 2 M times per rank: +0.2 s of 0.4 s). */
    g_prev_end = now_ns();
}

static inline void ev_p2p(ev_t *e, MPI_Comm comm, int peer, int tag, int count,
                          MPI_Datatype dt) {
    comm_t *c = comm_get(comm);
    e->mask |= F_PEER | F_TAG | F_BYTES | F_COMM;
    e->peer = to_world(c, peer);
    e->tag = norm_tag(tag);
    /* Nothing moves to or from MPI_PROC_NULL. */
    e->bytes = peer == MPI_PROC_NULL ? 0 : type_bytes(dt, count);
    e->comm = c->id;
}

/* Fills peer, tag and bytes of a receive from its status (the actual message). */
static inline void ev_recv_status(ev_t *e, MPI_Comm comm, const MPI_Status *st,
                                  MPI_Datatype dt) {
    comm_t *c = comm_get(comm);
    int n = 0;
    e->peer = to_world(c, st->MPI_SOURCE);
    e->tag = norm_tag(st->MPI_TAG);
    PMPI_Get_count(st, dt, &n);
    if (n != MPI_UNDEFINED) e->bytes = type_bytes(dt, n);
}

static inline void ev_coll(ev_t *e, MPI_Comm comm, uint64_t bytes, uint64_t rbytes) {
    e->mask |= F_COMM | F_BYTES | F_RBYTES;
    e->comm = comm_get(comm)->id;
    e->bytes = bytes;
    e->rbytes = rbytes;
}

static inline void ev_root(ev_t *e, MPI_Comm comm, int root) {
    e->mask |= F_ROOT;
    e->root = to_world(comm_get(comm), root);
}

/* Names a window's communicator (a window the tracer did not see made: none). */
static inline void ev_win(ev_t *e, const win_t *w) {
    if (!w) return;
    e->mask |= F_COMM;
    e->comm = w->comm;
}

/* A one-sided call's target (a rank of the window's group) as a world rank. */
static inline void ev_target(ev_t *e, const win_t *w, int rank) {
    ev_win(e, w);
    e->mask |= F_PEER;
    if (rank == MPI_PROC_NULL)
        e->peer = PEER_PROC_NULL;
    else
        e->peer = w && rank >= 0 && rank < w->size ? w->world[rank] : rank;
}

/* Records the starts of n requests made in one call (MPI_Start, MPI_Startall) that took
 * t0..t1: one event per known persistent request, the call's time split evenly among
 * them so events stay ordered. Unknown handles (persistent collectives, requests made
 * before the tracer started) are skipped. */
static void persist_starts(const MPI_Request *reqs, int n, uint64_t t0, uint64_t t1,
                           void *ra) {
    int known = 0;
    for (int i = 0; i < n; i++) known += persist_get(reqs[i]) != NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        const ev_t *tmpl = persist_get(reqs[i]);
        if (!tmpl) continue;
        ev_t e = *tmpl;
        e.mask |= F_REQ;
        e.req = req_new(reqs[i]);
        uint64_t a = t0 + (t1 - t0) * (uint64_t)k / (uint64_t)known;
        uint64_t b = t0 + (t1 - t0) * (uint64_t)(k + 1) / (uint64_t)known;
        emit(&e, a, b, ra);
        k++;
    }
}

/* ---- lifecycle --------------------------------------------------------------------- */

static const int g_signals[] = {SIGTERM, SIGINT, SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
static struct sigaction g_old_actions[sizeof g_signals / sizeof g_signals[0]];

static void on_signal(int sig) {
    flush_buf();
    for (size_t i = 0; i < sizeof g_signals / sizeof g_signals[0]; i++)
        if (g_signals[i] == sig) sigaction(sig, &g_old_actions[i], NULL);
    raise(sig);
}

static void on_exit_flush(void) { flush_buf(); }

static void put_u16(unsigned char **p, unsigned v) {
    (*p)[0] = (unsigned char)v;
    (*p)[1] = (unsigned char)(v >> 8);
    *p += 2;
}
static void put_u32(unsigned char **p, uint32_t v) {
    for (int i = 0; i < 4; i++) (*p)[i] = (unsigned char)(v >> (8 * i));
    *p += 4;
}
static void put_u64(unsigned char **p, uint64_t v) {
    for (int i = 0; i < 8; i++) (*p)[i] = (unsigned char)(v >> (8 * i));
    *p += 8;
}
static void put_str16(unsigned char **p, const char *s) {
    size_t n = strlen(s);
    if (n > 1000) n = 1000;
    put_u16(p, (unsigned)n);
    memcpy(*p, s, n);
    *p += n;
}

/* ---- memory: working set and probe (format version 3) ------------------------------ */

/* Peak resident memory of the process so far, bytes. */
static uint64_t peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss < 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}

/* The memory probe itself is shared with the C runtime of skeletons (memprobe.h). */

static uint64_t g_rss_at_init;

/* Writes the memory record: the working set (peak resident memory now less at the end of
 * MPI_Init: the application's data, not MPI's start-up) and the probe's rate over it.
 * Called after PMPI_Finalize. Only world rank 0 probes (the others record rate 0): the
 * ranks leave PMPI_Finalize at different times and no MPI call may synchronize them
 * here, and probes that overlap by chance would share the memory's bandwidth by chance.
 * The skeleton runtimes probe on rank 0 alone too. PERFSKEL_TRACE_PROBE=0 skips the
 * probe everywhere. */
static void write_memory_record(void) {
    uint64_t peak = peak_rss();
    uint64_t ws = peak > g_rss_at_init ? peak - g_rss_at_init : 0;
    size_t probe = ps_probe_bytes(ws);
    const char *env = getenv("PERFSKEL_TRACE_PROBE");
    double rate = 0.0;
    if (g_rank == 0 && !(env && strcmp(env, "0") == 0)) rate = ps_memory_probe(probe);
    unsigned char *p = reserve(40), *start = p;
    *p++ = R_MEMORY;
    p = put_varint(p, ws);
    p = put_varint(p, (uint64_t)probe);
    p = put_varint(p, (uint64_t)rate);
    g_len += (size_t)(p - start);
}

/* Called once MPI is initialised: opens the rank file and writes the header. */
static void tracer_start(uint64_t t_start) {
    const char *dir = getenv("PERFSKEL_TRACE_DIR");
    if (g_on || !dir || !dir[0]) return;
    /* Processes made by MPI_Comm_spawn are not traced: their world ranks would take the
     * rank files of the job that spawned them. */
    MPI_Comm parent = MPI_COMM_NULL;
    PMPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) return;
    clock_calibrate();
    int size = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%05d.pst", dir, g_rank);
    g_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (g_fd < 0) {
        fprintf(stderr, "perfskel tracer: cannot open %s: %s\n", path, strerror(errno));
        return;
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";
    int lib_len = 0;
    PMPI_Get_library_version(lib, &lib_len);
    lib[lib_len > 0 && lib_len <= MPI_MAX_LIBRARY_VERSION_STRING ? lib_len : 0] = 0;
    char *nl = strpbrk(lib, "\r\n");
    if (nl) *nl = 0;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t unix_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
    unix_ns -= now_ns() - t_start;

    unsigned char *p = g_buf, *len_at;
    memcpy(p, "PSKTRACE", 8);
    p += 8;
    put_u16(&p, PST_VERSION);
    len_at = p;
    put_u16(&p, 0);
    put_u32(&p, (uint32_t)g_rank);
    put_u32(&p, (uint32_t)size);
    put_u32(&p, (uint32_t)getpid());
    put_u64(&p, unix_ns);
    put_str16(&p, host);
    put_str16(&p, lib);
    put_u16(&len_at, (unsigned)(p - g_buf));
    g_len = (size_t)(p - g_buf);

    g_t0 = t_start;
    g_prev_end = t_start;
    g_next_comm = 0;
    comm_get(MPI_COMM_WORLD); /* id 0 */
    comm_get(MPI_COMM_SELF);  /* id 1 */
    for (size_t i = 0; i < sizeof g_signals / sizeof g_signals[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(g_signals[i], &sa, &g_old_actions[i]);
    }
    g_rss_at_init = peak_rss();
    atexit(on_exit_flush);
    /* The header goes out at once: even a rank killed before its first flush leaves a
     * file that reads as incomplete rather than as garbage. */
    flush_buf();
    g_last_flush = now_ns();
    g_on = 1;
}

/* Writes the memory and end records and closes the file; called when PMPI_Finalize
 * has returned. */
static void tracer_stop(void) {
    if (!g_on) return;
    g_on = 0;
    uint64_t end = now_ns() - g_t0;
    write_memory_record();
    unsigned char *p = reserve(32), *start = p;
    *p++ = R_END;
    p = put_varint(p, end);
    p = put_varint(p, g_n_events);
    g_len += (size_t)(p - start);
    flush_buf();
    close(g_fd);
    g_fd = -1;
}
