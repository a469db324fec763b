/* psk_otf2.h: the flat interface of psk_otf2.c (see there); mirrored in otf2/src/ffi.rs. */
#ifndef PSK_OTF2_H
#define PSK_OTF2_H
#include <stddef.h>
#include <stdint.h>

/* The uint64 attributes perfskel adds to events it exports (what OTF2's MPI records do
 * not say): see otf2/src/lib.rs, `Attr`. */
#define PSK_N_ATTRS 6

/* Record kinds: definitions, then events. */
enum {
    PSK_DEF_CLOCK = 1,            /* v: resolution, global offset, trace length, realtime */
    PSK_DEF_STRING,               /* v: id; s */
    PSK_DEF_ATTRIBUTE,            /* v: id, name, is uint64 */
    PSK_DEF_REGION,               /* v: id, name, canonical name, is MPI, source file, line, role */
    PSK_DEF_SYSTEM_TREE_NODE,     /* v: id, name, class name, parent */
    PSK_DEF_LOCATION_GROUP,       /* v: id, name, is a process, system tree parent */
    PSK_DEF_LOCATION,             /* v: id, name, is a CPU thread, events, location group */
    PSK_DEF_GROUP,                /* v: id, name, PSK_GROUP_*, is MPI; members */
    PSK_DEF_COMM,                 /* v: id, name, group, parent */
    PSK_DEF_LOCATION_PROPERTY,    /* v: location, name, value (uint64 properties only) */
    PSK_DEF_CART_DIMENSION,       /* v: id, name, size, periodic */
    PSK_DEF_CART_TOPOLOGY,        /* v: id, name, comm; members: its dimensions */
    PSK_DEF_SOURCE_CODE_LOCATION, /* v: id, file, line */
    PSK_DEF_CALLING_CONTEXT,      /* v: id, region, source code location, parent */
    PSK_EV_ENTER = 32,            /* v: region */
    PSK_EV_LEAVE,                 /* v: region */
    PSK_EV_SEND,                  /* v: receiver (rank in comm), comm, tag, bytes */
    PSK_EV_ISEND,                 /* v: receiver, comm, tag, bytes, request */
    PSK_EV_RECV,                  /* v: sender, comm, tag, bytes */
    PSK_EV_IRECV,                 /* v: sender, comm, tag, bytes, request */
    PSK_EV_ISEND_COMPLETE,        /* v: request */
    PSK_EV_IRECV_REQUEST,         /* v: request */
    PSK_EV_REQUEST_TEST,          /* v: request */
    PSK_EV_REQUEST_CANCELLED,     /* v: request */
    PSK_EV_COLLECTIVE_BEGIN,      /* (none) */
    PSK_EV_COLLECTIVE_END,        /* v: OTF2 collective op, comm, root, sent, received */
    PSK_EV_COMM_CREATE,           /* v: comm */
    PSK_EV_NB_COLL_REQUEST,       /* v: request */
    PSK_EV_NB_COLL_COMPLETE,      /* v: OTF2 collective op, comm, root, sent, received, request */
    PSK_EV_CC_ENTER,              /* v: calling context, unwind distance */
    PSK_EV_CC_LEAVE,              /* v: calling context */
    PSK_EV_OTHER                  /* any other event record */
};

enum {
    PSK_GROUP_OTHER = 0,
    PSK_GROUP_COMM_LOCATIONS = 1, /* members: the location of each rank of the paradigm */
    PSK_GROUP_COMM_GROUP = 2,     /* members: ranks (indices into the comm-locations group) */
    PSK_GROUP_COMM_SELF = 3,
    PSK_GROUP_LOCATIONS = 4
};

typedef struct {
    uint32_t kind;
    uint32_t n_members;
    uint64_t time;
    uint64_t v[8];
    const char *s;
    const uint64_t *members;
    uint32_t has_attrs;           /* bit a: attrs[a] is set */
    uint32_t pad;
    uint64_t attrs[PSK_N_ATTRS];
} psk_rec;

typedef void (*psk_rec_cb)(void *user, const psk_rec *rec);
typedef struct psk_evts psk_evts;
typedef struct psk_writer psk_writer;

int psk_otf2_read_defs(const char *anchor, psk_rec_cb cb, void *user, char *err, size_t len);
/* attr_ids: PSK_N_ATTRS attribute ids of this archive (UINT64_MAX: not defined). */
psk_evts *psk_otf2_events_open(const char *anchor, uint64_t location, const uint64_t *attr_ids,
                               char *err, size_t len);
/* Reads up to `max` records (`*read_out`: how many; fewer than `max` at the end), of
 * which `*n` are given (records perfskel has no use for and registers no callback for
 * are read and skipped). */
int psk_otf2_events_read(psk_evts *h, uint64_t max, const psk_rec **recs, size_t *n,
                         uint64_t *read_out, char *err, size_t len);
void psk_otf2_events_close(psk_evts *h);

psk_writer *psk_otf2_writer_open(const char *dir, const char *name, const uint64_t *attr_ids,
                                 char *err, size_t len);
int psk_otf2_write_event(psk_writer *w, uint64_t location, const psk_rec *r, char *err,
                         size_t len);
int psk_otf2_write_def(psk_writer *w, const psk_rec *r, char *err, size_t len);
int psk_otf2_writer_close(psk_writer *w, char *err, size_t len);

uint64_t psk_otf2_collective_op(const char *name);
size_t psk_otf2_rec_size(void);
uint32_t psk_otf2_undefined_u32(void);
uint64_t psk_otf2_undefined_u64(void);
#endif
