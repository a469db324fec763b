/* psk_otf2.c: the few things perfskel needs from the OTF2 reference library (Debian's
 * libopen-trace-format2, 3.0), behind a flat interface Rust declares by hand
 * (otf2/src/ffi.rs): OTF2's reader works through callbacks of a different signature for
 * each record type, its writer through handles per location; here both become one record
 * struct, `psk_rec`, so the Rust side needs no OTF2 types. Records hold copies of their
 * strings and member lists, owned by the handle until the next read or close.
 *
 * Errors: every entry point returns 0 on success, else a negative value with a message
 * in the caller's buffer (OTF2's own error callback is replaced: the library prints
 * nothing and its last message goes into that buffer). */
#include <otf2/otf2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psk_otf2.h"

/* ---- errors ----------------------------------------------------------------------- */

static __thread char psk_last[512];

static OTF2_ErrorCode psk_error_cb(void *user, const char *file, uint64_t line,
                                   const char *function, OTF2_ErrorCode code,
                                   const char *fmt, va_list va) {
    (void)user;
    (void)file;
    (void)line;
    (void)function;
    char msg[400] = "";
    if (fmt) vsnprintf(msg, sizeof msg, fmt, va);
    snprintf(psk_last, sizeof psk_last, "%s%s%s", OTF2_Error_GetDescription(code),
             msg[0] ? ": " : "", msg);
    return code;
}

static void psk_quiet(void) {
    static int done;
    if (!done) {
        OTF2_Error_RegisterCallback(psk_error_cb, NULL);
        done = 1;
    }
    psk_last[0] = 0;
}

static int psk_fail(char *err, size_t len, const char *what, OTF2_ErrorCode code) {
    if (err && len) {
        if (psk_last[0])
            snprintf(err, len, "%s: %s", what, psk_last);
        else
            snprintf(err, len, "%s: %s", what, OTF2_Error_GetDescription(code));
    }
    return -1;
}

/* ---- records ---------------------------------------------------------------------- */

/* A growable list of records and the strings and members they point to. */
typedef struct {
    psk_rec *recs;
    size_t n, cap;
    char **strings;
    size_t n_strings, cap_strings;
    uint64_t **lists;
    size_t n_lists, cap_lists;
    int oom;
} psk_buf;

static void psk_buf_clear(psk_buf *b) {
    for (size_t i = 0; i < b->n_strings; i++) free(b->strings[i]);
    for (size_t i = 0; i < b->n_lists; i++) free(b->lists[i]);
    b->n = b->n_strings = b->n_lists = 0;
}

static void psk_buf_free(psk_buf *b) {
    psk_buf_clear(b);
    free(b->recs);
    free(b->strings);
    free(b->lists);
    memset(b, 0, sizeof *b);
}

static psk_rec *psk_push(psk_buf *b, uint32_t kind, uint64_t time) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        psk_rec *recs = realloc(b->recs, cap * sizeof *recs);
        if (!recs) {
            b->oom = 1;
            return NULL;
        }
        b->recs = recs;
        b->cap = cap;
    }
    psk_rec *r = &b->recs[b->n++];
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->time = time;
    return r;
}

static const char *psk_keep_string(psk_buf *b, const char *s) {
    if (!s) return NULL;
    if (b->n_strings == b->cap_strings) {
        size_t cap = b->cap_strings ? 2 * b->cap_strings : 64;
        char **v = realloc(b->strings, cap * sizeof *v);
        if (!v) {
            b->oom = 1;
            return NULL;
        }
        b->strings = v;
        b->cap_strings = cap;
    }
    char *copy = strdup(s);
    if (!copy) {
        b->oom = 1;
        return NULL;
    }
    b->strings[b->n_strings++] = copy;
    return copy;
}

static const uint64_t *psk_keep_list(psk_buf *b, const uint64_t *v, uint32_t n) {
    if (n == 0) return NULL;
    if (b->n_lists == b->cap_lists) {
        size_t cap = b->cap_lists ? 2 * b->cap_lists : 64;
        uint64_t **l = realloc(b->lists, cap * sizeof *l);
        if (!l) {
            b->oom = 1;
            return NULL;
        }
        b->lists = l;
        b->cap_lists = cap;
    }
    uint64_t *copy = malloc((size_t)n * sizeof *copy);
    if (!copy) {
        b->oom = 1;
        return NULL;
    }
    memcpy(copy, v, (size_t)n * sizeof *copy);
    b->lists[b->n_lists++] = copy;
    return copy;
}

/* The perfskel attributes of an event (see psk_otf2.h): each a uint64 attribute whose
 * definition names it; the ids are found by name when the definitions are read. */
typedef struct {
    OTF2_AttributeRef ids[PSK_N_ATTRS];
    int known[PSK_N_ATTRS];
} psk_attr_ids;

static void psk_read_attrs(const psk_attr_ids *ids, OTF2_AttributeList *list, psk_rec *r) {
    if (!list || !ids) return;
    /* By index: a lookup by id of an attribute the record does not have goes through
     * OTF2's error handler, per record. */
    uint32_t n = OTF2_AttributeList_GetNumberOfElements(list);
    for (uint32_t i = 0; i < n; i++) {
        OTF2_AttributeRef id;
        OTF2_Type type;
        OTF2_AttributeValue value;
        if (OTF2_AttributeList_GetAttributeByIndex(list, i, &id, &type, &value) != OTF2_SUCCESS)
            continue;
        if (type != OTF2_TYPE_UINT64) continue;
        for (int a = 0; a < PSK_N_ATTRS; a++) {
            if (ids->known[a] && ids->ids[a] == id) {
                r->attrs[a] = value.uint64;
                r->has_attrs |= 1u << a;
            }
        }
    }
}

/* ---- global definitions ----------------------------------------------------------- */

typedef struct {
    psk_buf buf;
} psk_defs_state;

static uint32_t psk_group_kind(OTF2_GroupType t) {
    switch (t) {
    case OTF2_GROUP_TYPE_COMM_LOCATIONS: return PSK_GROUP_COMM_LOCATIONS;
    case OTF2_GROUP_TYPE_COMM_GROUP: return PSK_GROUP_COMM_GROUP;
    case OTF2_GROUP_TYPE_COMM_SELF: return PSK_GROUP_COMM_SELF;
    case OTF2_GROUP_TYPE_LOCATIONS: return PSK_GROUP_LOCATIONS;
    default: return PSK_GROUP_OTHER;
    }
}

static OTF2_CallbackCode def_clock(void *u, uint64_t res, uint64_t offset, uint64_t length,
                                   uint64_t realtime) {
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_CLOCK, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = res;
    r->v[1] = offset;
    r->v[2] = length;
    r->v[3] = realtime;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_string(void *u, OTF2_StringRef self, const char *string) {
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_STRING, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = self;
    r->s = psk_keep_string(&s->buf, string ? string : "");
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_attribute(void *u, OTF2_AttributeRef self, OTF2_StringRef name,
                                       OTF2_StringRef description, OTF2_Type type) {
    (void)description;
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_ATTRIBUTE, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = self;
    r->v[1] = name;
    r->v[2] = type == OTF2_TYPE_UINT64;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_region(void *u, OTF2_RegionRef self, OTF2_StringRef name,
                                    OTF2_StringRef canonical, OTF2_StringRef description,
                                    OTF2_RegionRole role, OTF2_Paradigm paradigm,
                                    OTF2_RegionFlag flags, OTF2_StringRef file,
                                    uint32_t begin, uint32_t end) {
    (void)description;
    (void)flags;
    (void)end;
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_REGION, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = self;
    r->v[1] = name;
    r->v[2] = canonical;
    r->v[3] = paradigm == OTF2_PARADIGM_MPI;
    r->v[4] = file;
    r->v[5] = begin;
    r->v[6] = role;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_location_group(void *u, OTF2_LocationGroupRef self,
                                            OTF2_StringRef name, OTF2_LocationGroupType type,
                                            OTF2_SystemTreeNodeRef parent,
                                            OTF2_LocationGroupRef creating) {
    (void)creating;
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_LOCATION_GROUP, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = self;
    r->v[1] = name;
    r->v[2] = type == OTF2_LOCATION_GROUP_TYPE_PROCESS;
    r->v[3] = parent;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_system_tree_node(void *u, OTF2_SystemTreeNodeRef self,
                                              OTF2_StringRef name, OTF2_StringRef class_name,
                                              OTF2_SystemTreeNodeRef parent) {
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_SYSTEM_TREE_NODE, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = self;
    r->v[1] = name;
    r->v[2] = class_name;
    r->v[3] = parent;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_location(void *u, OTF2_LocationRef self, OTF2_StringRef name,
                                      OTF2_LocationType type, uint64_t n_events,
                                      OTF2_LocationGroupRef group) {
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_LOCATION, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = self;
    r->v[1] = name;
    r->v[2] = type == OTF2_LOCATION_TYPE_CPU_THREAD;
    r->v[3] = n_events;
    r->v[4] = group;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_group(void *u, OTF2_GroupRef self, OTF2_StringRef name,
                                   OTF2_GroupType type, OTF2_Paradigm paradigm,
                                   OTF2_GroupFlag flags, uint32_t n, const uint64_t *members) {
    (void)flags;
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_GROUP, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = self;
    r->v[1] = name;
    r->v[2] = psk_group_kind(type);
    r->v[3] = paradigm == OTF2_PARADIGM_MPI;
    r->n_members = n;
    r->members = psk_keep_list(&s->buf, members, n);
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_comm(void *u, OTF2_CommRef self, OTF2_StringRef name,
                                  OTF2_GroupRef group, OTF2_CommRef parent,
                                  OTF2_CommFlag flags) {
    (void)flags;
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_COMM, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = self;
    r->v[1] = name;
    r->v[2] = group;
    r->v[3] = parent;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_location_property(void *u, OTF2_LocationRef location,
                                               OTF2_StringRef name, OTF2_Type type,
                                               OTF2_AttributeValue value) {
    if (type != OTF2_TYPE_UINT64) return OTF2_CALLBACK_SUCCESS;
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_LOCATION_PROPERTY, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = location;
    r->v[1] = name;
    r->v[2] = value.uint64;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_cart_dimension(void *u, OTF2_CartDimensionRef self,
                                            OTF2_StringRef name, uint32_t size,
                                            OTF2_CartPeriodicity periodic) {
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_CART_DIMENSION, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = self;
    r->v[1] = name;
    r->v[2] = size;
    r->v[3] = periodic == OTF2_CART_PERIODIC_TRUE;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_cart_topology(void *u, OTF2_CartTopologyRef self,
                                           OTF2_StringRef name, OTF2_CommRef comm,
                                           uint8_t n_dims, const OTF2_CartDimensionRef *dims) {
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_CART_TOPOLOGY, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = self;
    r->v[1] = name;
    r->v[2] = comm;
    uint64_t wide[256];
    for (unsigned i = 0; i < n_dims; i++) wide[i] = dims[i];
    r->n_members = n_dims;
    r->members = psk_keep_list(&s->buf, wide, n_dims);
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_source_code_location(void *u, OTF2_SourceCodeLocationRef self,
                                                  OTF2_StringRef file, uint32_t line) {
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_SOURCE_CODE_LOCATION, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = self;
    r->v[1] = file;
    r->v[2] = line;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_calling_context(void *u, OTF2_CallingContextRef self,
                                             OTF2_RegionRef region,
                                             OTF2_SourceCodeLocationRef scl,
                                             OTF2_CallingContextRef parent) {
    psk_defs_state *s = u;
    psk_rec *r = psk_push(&s->buf, PSK_DEF_CALLING_CONTEXT, 0);
    if (!r) return OTF2_CALLBACK_INTERRUPT;
    r->v[0] = self;
    r->v[1] = region;
    r->v[2] = scl;
    r->v[3] = parent;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_Reader *psk_open_reader(const char *anchor, char *err, size_t len) {
    psk_quiet();
    OTF2_Reader *reader = OTF2_Reader_Open(anchor);
    if (!reader) {
        psk_fail(err, len, "cannot open the OTF2 archive", OTF2_ERROR_FILE_CAN_NOT_OPEN);
        return NULL;
    }
    OTF2_ErrorCode e = OTF2_Reader_SetSerialCollectiveCallbacks(reader);
    if (e != OTF2_SUCCESS) {
        psk_fail(err, len, "cannot set up the OTF2 reader", e);
        OTF2_Reader_Close(reader);
        return NULL;
    }
    return reader;
}

int psk_otf2_read_defs(const char *anchor, psk_rec_cb cb, void *user, char *err, size_t len) {
    OTF2_Reader *reader = psk_open_reader(anchor, err, len);
    if (!reader) return -1;
    psk_defs_state s;
    memset(&s, 0, sizeof s);
    int rc = 0;
    OTF2_GlobalDefReader *defs = OTF2_Reader_GetGlobalDefReader(reader);
    OTF2_GlobalDefReaderCallbacks *cbs = OTF2_GlobalDefReaderCallbacks_New();
    if (!defs || !cbs) {
        rc = psk_fail(err, len, "cannot read the global definitions", OTF2_ERROR_MEM_ALLOC_FAILED);
        goto out;
    }
    OTF2_GlobalDefReaderCallbacks_SetClockPropertiesCallback(cbs, def_clock);
    OTF2_GlobalDefReaderCallbacks_SetStringCallback(cbs, def_string);
    OTF2_GlobalDefReaderCallbacks_SetAttributeCallback(cbs, def_attribute);
    OTF2_GlobalDefReaderCallbacks_SetRegionCallback(cbs, def_region);
    OTF2_GlobalDefReaderCallbacks_SetSystemTreeNodeCallback(cbs, def_system_tree_node);
    OTF2_GlobalDefReaderCallbacks_SetLocationGroupCallback(cbs, def_location_group);
    OTF2_GlobalDefReaderCallbacks_SetLocationCallback(cbs, def_location);
    OTF2_GlobalDefReaderCallbacks_SetGroupCallback(cbs, def_group);
    OTF2_GlobalDefReaderCallbacks_SetCommCallback(cbs, def_comm);
    OTF2_GlobalDefReaderCallbacks_SetLocationPropertyCallback(cbs, def_location_property);
    OTF2_GlobalDefReaderCallbacks_SetCartDimensionCallback(cbs, def_cart_dimension);
    OTF2_GlobalDefReaderCallbacks_SetCartTopologyCallback(cbs, def_cart_topology);
    OTF2_GlobalDefReaderCallbacks_SetSourceCodeLocationCallback(cbs, def_source_code_location);
    OTF2_GlobalDefReaderCallbacks_SetCallingContextCallback(cbs, def_calling_context);
    OTF2_ErrorCode e = OTF2_Reader_RegisterGlobalDefCallbacks(reader, defs, cbs, &s);
    if (e == OTF2_SUCCESS) {
        uint64_t n = 0;
        e = OTF2_Reader_ReadAllGlobalDefinitions(reader, defs, &n);
    }
    if (s.buf.oom) {
        rc = psk_fail(err, len, "out of memory reading the global definitions",
                      OTF2_ERROR_MEM_ALLOC_FAILED);
    } else if (e != OTF2_SUCCESS) {
        rc = psk_fail(err, len, "cannot read the global definitions", e);
    } else {
        for (size_t i = 0; i < s.buf.n; i++) cb(user, &s.buf.recs[i]);
    }
out:
    if (cbs) OTF2_GlobalDefReaderCallbacks_Delete(cbs);
    psk_buf_free(&s.buf);
    OTF2_Reader_Close(reader);
    return rc;
}

/* ---- events ----------------------------------------------------------------------- */

struct psk_evts {
    OTF2_Reader *reader;
    OTF2_EvtReader *evt;
    psk_buf buf;
    psk_attr_ids attrs;
};

#define EVT_HEAD(kind)                                                                     \
    psk_evts *h = u;                                                                       \
    (void)loc;                                                                             \
    (void)pos;                                                                             \
    psk_rec *r = psk_push(&h->buf, kind, time);                                            \
    if (!r) return OTF2_CALLBACK_INTERRUPT;                                                \
    psk_read_attrs(&h->attrs, attrs, r)

static OTF2_CallbackCode ev_enter(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                  void *u, OTF2_AttributeList *attrs, OTF2_RegionRef region) {
    EVT_HEAD(PSK_EV_ENTER);
    r->v[0] = region;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_leave(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                  void *u, OTF2_AttributeList *attrs, OTF2_RegionRef region) {
    EVT_HEAD(PSK_EV_LEAVE);
    r->v[0] = region;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_send(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                 void *u, OTF2_AttributeList *attrs, uint32_t peer,
                                 OTF2_CommRef comm, uint32_t tag, uint64_t bytes) {
    EVT_HEAD(PSK_EV_SEND);
    r->v[0] = peer;
    r->v[1] = comm;
    r->v[2] = tag;
    r->v[3] = bytes;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_isend(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                  void *u, OTF2_AttributeList *attrs, uint32_t peer,
                                  OTF2_CommRef comm, uint32_t tag, uint64_t bytes,
                                  uint64_t req) {
    EVT_HEAD(PSK_EV_ISEND);
    r->v[0] = peer;
    r->v[1] = comm;
    r->v[2] = tag;
    r->v[3] = bytes;
    r->v[4] = req;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_recv(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                 void *u, OTF2_AttributeList *attrs, uint32_t peer,
                                 OTF2_CommRef comm, uint32_t tag, uint64_t bytes) {
    EVT_HEAD(PSK_EV_RECV);
    r->v[0] = peer;
    r->v[1] = comm;
    r->v[2] = tag;
    r->v[3] = bytes;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_irecv(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                  void *u, OTF2_AttributeList *attrs, uint32_t peer,
                                  OTF2_CommRef comm, uint32_t tag, uint64_t bytes,
                                  uint64_t req) {
    EVT_HEAD(PSK_EV_IRECV);
    r->v[0] = peer;
    r->v[1] = comm;
    r->v[2] = tag;
    r->v[3] = bytes;
    r->v[4] = req;
    return OTF2_CALLBACK_SUCCESS;
}

#define REQ_EVENT(fn, kind)                                                                \
    static OTF2_CallbackCode fn(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,   \
                                void *u, OTF2_AttributeList *attrs, uint64_t req) {        \
        EVT_HEAD(kind);                                                                    \
        r->v[0] = req;                                                                     \
        return OTF2_CALLBACK_SUCCESS;                                                      \
    }
REQ_EVENT(ev_isend_complete, PSK_EV_ISEND_COMPLETE)
REQ_EVENT(ev_irecv_request, PSK_EV_IRECV_REQUEST)
REQ_EVENT(ev_request_test, PSK_EV_REQUEST_TEST)
REQ_EVENT(ev_request_cancelled, PSK_EV_REQUEST_CANCELLED)

static OTF2_CallbackCode ev_coll_begin(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                       void *u, OTF2_AttributeList *attrs) {
    EVT_HEAD(PSK_EV_COLLECTIVE_BEGIN);
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_coll_end(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                     void *u, OTF2_AttributeList *attrs, OTF2_CollectiveOp op,
                                     OTF2_CommRef comm, uint32_t root, uint64_t sent,
                                     uint64_t received) {
    EVT_HEAD(PSK_EV_COLLECTIVE_END);
    r->v[0] = op;
    r->v[1] = comm;
    r->v[2] = root;
    r->v[3] = sent;
    r->v[4] = received;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_comm_create(OTF2_LocationRef loc, OTF2_TimeStamp time,
                                        uint64_t pos, void *u, OTF2_AttributeList *attrs,
                                        OTF2_CommRef comm) {
    EVT_HEAD(PSK_EV_COMM_CREATE);
    r->v[0] = comm;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_nb_request(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                       void *u, OTF2_AttributeList *attrs, uint64_t req) {
    EVT_HEAD(PSK_EV_NB_COLL_REQUEST);
    r->v[0] = req;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_nb_complete(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                        void *u, OTF2_AttributeList *attrs,
                                        OTF2_CollectiveOp op, OTF2_CommRef comm, uint32_t root,
                                        uint64_t sent, uint64_t received, uint64_t req) {
    EVT_HEAD(PSK_EV_NB_COLL_COMPLETE);
    r->v[0] = op;
    r->v[1] = comm;
    r->v[2] = root;
    r->v[3] = sent;
    r->v[4] = received;
    r->v[5] = req;
    return OTF2_CALLBACK_SUCCESS;
}

/* A region entered or left with its full calling context (Score-P's unwinding mode):
 * mutually exclusive with Enter/Leave in an archive. */
static OTF2_CallbackCode ev_cc_enter(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                     void *u, OTF2_AttributeList *attrs,
                                     OTF2_CallingContextRef cc, uint32_t unwind) {
    EVT_HEAD(PSK_EV_CC_ENTER);
    r->v[0] = cc;
    r->v[1] = unwind;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_cc_leave(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                     void *u, OTF2_AttributeList *attrs,
                                     OTF2_CallingContextRef cc) {
    EVT_HEAD(PSK_EV_CC_LEAVE);
    r->v[0] = cc;
    return OTF2_CALLBACK_SUCCESS;
}

/* Any other record: counted, so that the caller can say what it did not use. */
static OTF2_CallbackCode ev_unknown(OTF2_LocationRef loc, OTF2_TimeStamp time, uint64_t pos,
                                    void *u, OTF2_AttributeList *attrs) {
    EVT_HEAD(PSK_EV_OTHER);
    return OTF2_CALLBACK_SUCCESS;
}

psk_evts *psk_otf2_events_open(const char *anchor, uint64_t location,
                               const uint64_t *attr_ids, char *err, size_t len) {
    OTF2_Reader *reader = psk_open_reader(anchor, err, len);
    if (!reader) return NULL;
    psk_evts *h = calloc(1, sizeof *h);
    OTF2_EvtReaderCallbacks *cbs = NULL;
    OTF2_ErrorCode e = OTF2_ERROR_MEM_ALLOC_FAILED;
    const char *what = "out of memory";
    if (!h) goto fail;
    h->reader = reader;
    for (int a = 0; a < PSK_N_ATTRS; a++) {
        if (attr_ids && attr_ids[a] != UINT64_MAX) {
            h->attrs.ids[a] = (OTF2_AttributeRef)attr_ids[a];
            h->attrs.known[a] = 1;
        }
    }
    what = "cannot select the location";
    if ((e = OTF2_Reader_SelectLocation(reader, location)) != OTF2_SUCCESS) goto fail;
    what = "cannot open the definition files";
    int has_defs = OTF2_Reader_OpenDefFiles(reader) == OTF2_SUCCESS;
    what = "cannot open the event files";
    if ((e = OTF2_Reader_OpenEvtFiles(reader)) != OTF2_SUCCESS) goto fail;
    if (has_defs) {
        /* The location's own definitions hold the mappings of its local ids; a location
         * without them (written without local definitions) reads as it is. */
        OTF2_DefReader *d = OTF2_Reader_GetDefReader(reader, location);
        if (d) {
            uint64_t n = 0;
            what = "cannot read the location's definitions";
            if ((e = OTF2_Reader_ReadAllLocalDefinitions(reader, d, &n)) != OTF2_SUCCESS)
                goto fail;
            OTF2_Reader_CloseDefReader(reader, d);
        }
        OTF2_Reader_CloseDefFiles(reader);
    }
    what = "cannot read the location's events";
    e = OTF2_ERROR_INVALID_ARGUMENT;
    h->evt = OTF2_Reader_GetEvtReader(reader, location);
    if (!h->evt) goto fail;
    cbs = OTF2_EvtReaderCallbacks_New();
    if (!cbs) goto fail;
    OTF2_EvtReaderCallbacks_SetUnknownCallback(cbs, ev_unknown);
    OTF2_EvtReaderCallbacks_SetEnterCallback(cbs, ev_enter);
    OTF2_EvtReaderCallbacks_SetLeaveCallback(cbs, ev_leave);
    OTF2_EvtReaderCallbacks_SetCallingContextEnterCallback(cbs, ev_cc_enter);
    OTF2_EvtReaderCallbacks_SetCallingContextLeaveCallback(cbs, ev_cc_leave);
    OTF2_EvtReaderCallbacks_SetMpiSendCallback(cbs, ev_send);
    OTF2_EvtReaderCallbacks_SetMpiIsendCallback(cbs, ev_isend);
    OTF2_EvtReaderCallbacks_SetMpiIsendCompleteCallback(cbs, ev_isend_complete);
    OTF2_EvtReaderCallbacks_SetMpiIrecvRequestCallback(cbs, ev_irecv_request);
    OTF2_EvtReaderCallbacks_SetMpiRecvCallback(cbs, ev_recv);
    OTF2_EvtReaderCallbacks_SetMpiIrecvCallback(cbs, ev_irecv);
    OTF2_EvtReaderCallbacks_SetMpiRequestTestCallback(cbs, ev_request_test);
    OTF2_EvtReaderCallbacks_SetMpiRequestCancelledCallback(cbs, ev_request_cancelled);
    OTF2_EvtReaderCallbacks_SetMpiCollectiveBeginCallback(cbs, ev_coll_begin);
    OTF2_EvtReaderCallbacks_SetMpiCollectiveEndCallback(cbs, ev_coll_end);
    OTF2_EvtReaderCallbacks_SetCommCreateCallback(cbs, ev_comm_create);
    OTF2_EvtReaderCallbacks_SetNonBlockingCollectiveRequestCallback(cbs, ev_nb_request);
    OTF2_EvtReaderCallbacks_SetNonBlockingCollectiveCompleteCallback(cbs, ev_nb_complete);
    if ((e = OTF2_Reader_RegisterEvtCallbacks(reader, h->evt, cbs, h)) != OTF2_SUCCESS) goto fail;
    OTF2_EvtReaderCallbacks_Delete(cbs);
    return h;
fail:
    psk_fail(err, len, what, e);
    if (cbs) OTF2_EvtReaderCallbacks_Delete(cbs);
    free(h);
    OTF2_Reader_Close(reader);
    return NULL;
}

int psk_otf2_events_read(psk_evts *h, uint64_t max, const psk_rec **recs, size_t *n,
                         uint64_t *read_out, char *err, size_t len) {
    psk_buf_clear(&h->buf);
    *recs = NULL;
    *n = 0;
    uint64_t read = 0;
    psk_last[0] = 0;
    OTF2_ErrorCode e = OTF2_Reader_ReadLocalEvents(h->reader, h->evt, max, &read);
    *read_out = read;
    if (h->buf.oom) return psk_fail(err, len, "out of memory reading events", OTF2_ERROR_MEM_ALLOC_FAILED);
    /* A short or damaged event file: OTF2 reports it as an error after the events it
     * could decode. */
    if (e != OTF2_SUCCESS && e != OTF2_ERROR_INTERRUPTED_BY_CALLBACK) {
        *recs = h->buf.recs;
        *n = h->buf.n;
        return psk_fail(err, len, "cannot read events", e);
    }
    *recs = h->buf.recs;
    *n = h->buf.n;
    return 0;
}

void psk_otf2_events_close(psk_evts *h) {
    if (!h) return;
    if (h->evt) OTF2_Reader_CloseEvtReader(h->reader, h->evt);
    OTF2_Reader_CloseEvtFiles(h->reader);
    OTF2_Reader_Close(h->reader);
    psk_buf_free(&h->buf);
    free(h);
}

/* ---- writing ---------------------------------------------------------------------- */

typedef struct {
    uint64_t location;
    OTF2_EvtWriter *writer;
} psk_loc_writer;

struct psk_writer {
    OTF2_Archive *archive;
    OTF2_GlobalDefWriter *defs;
    psk_loc_writer *locs;
    size_t n_locs, cap_locs;
    OTF2_AttributeList *attrs;
    uint64_t attr_ids[PSK_N_ATTRS];
};

static OTF2_FlushType pre_flush(void *u, OTF2_FileType type, OTF2_LocationRef loc,
                                void *caller, bool final) {
    (void)u;
    (void)type;
    (void)loc;
    (void)caller;
    (void)final;
    return OTF2_FLUSH;
}

static OTF2_TimeStamp post_flush(void *u, OTF2_FileType type, OTF2_LocationRef loc) {
    (void)u;
    (void)type;
    (void)loc;
    return 0;
}

static const OTF2_FlushCallbacks psk_flush = {.otf2_pre_flush = pre_flush,
                                              .otf2_post_flush = post_flush};

psk_writer *psk_otf2_writer_open(const char *dir, const char *name, const uint64_t *attr_ids,
                                 char *err, size_t len) {
    psk_quiet();
    psk_writer *w = calloc(1, sizeof *w);
    if (!w) {
        psk_fail(err, len, "out of memory", OTF2_ERROR_MEM_ALLOC_FAILED);
        return NULL;
    }
    for (int a = 0; a < PSK_N_ATTRS; a++) w->attr_ids[a] = attr_ids ? attr_ids[a] : UINT64_MAX;
    w->archive = OTF2_Archive_Open(dir, name, OTF2_FILEMODE_WRITE, 1024 * 1024, 4 * 1024 * 1024,
                                   OTF2_SUBSTRATE_POSIX, OTF2_COMPRESSION_NONE);
    OTF2_ErrorCode e = OTF2_ERROR_FILE_CAN_NOT_OPEN;
    const char *what = "cannot create the OTF2 archive";
    if (!w->archive) goto fail;
    if ((e = OTF2_Archive_SetFlushCallbacks(w->archive, &psk_flush, NULL)) != OTF2_SUCCESS) goto fail;
    if ((e = OTF2_Archive_SetSerialCollectiveCallbacks(w->archive)) != OTF2_SUCCESS) goto fail;
    what = "cannot open the event files";
    if ((e = OTF2_Archive_OpenEvtFiles(w->archive)) != OTF2_SUCCESS) goto fail;
    w->attrs = OTF2_AttributeList_New();
    what = "out of memory";
    e = OTF2_ERROR_MEM_ALLOC_FAILED;
    if (!w->attrs) goto fail;
    return w;
fail:
    psk_fail(err, len, what, e);
    if (w->archive) OTF2_Archive_Close(w->archive);
    free(w);
    return NULL;
}

static OTF2_EvtWriter *psk_loc(psk_writer *w, uint64_t location) {
    for (size_t i = 0; i < w->n_locs; i++)
        if (w->locs[i].location == location) return w->locs[i].writer;
    if (w->n_locs == w->cap_locs) {
        size_t cap = w->cap_locs ? 2 * w->cap_locs : 16;
        psk_loc_writer *l = realloc(w->locs, cap * sizeof *l);
        if (!l) return NULL;
        w->locs = l;
        w->cap_locs = cap;
    }
    OTF2_EvtWriter *ew = OTF2_Archive_GetEvtWriter(w->archive, location);
    if (!ew) return NULL;
    w->locs[w->n_locs].location = location;
    w->locs[w->n_locs].writer = ew;
    w->n_locs++;
    return ew;
}

int psk_otf2_write_event(psk_writer *w, uint64_t location, const psk_rec *r, char *err,
                         size_t len) {
    psk_last[0] = 0;
    OTF2_EvtWriter *ew = psk_loc(w, location);
    if (!ew) return psk_fail(err, len, "cannot write the location's events", OTF2_ERROR_MEM_ALLOC_FAILED);
    OTF2_AttributeList *al = NULL;
    if (r->has_attrs) {
        OTF2_AttributeList_RemoveAllAttributes(w->attrs);
        for (int a = 0; a < PSK_N_ATTRS; a++) {
            if (!(r->has_attrs & (1u << a)) || w->attr_ids[a] == UINT64_MAX) continue;
            OTF2_AttributeValue v;
            v.uint64 = r->attrs[a];
            OTF2_AttributeList_AddAttribute(w->attrs, (OTF2_AttributeRef)w->attr_ids[a],
                                            OTF2_TYPE_UINT64, v);
        }
        al = w->attrs;
    }
    OTF2_ErrorCode e;
    const uint64_t *v = r->v;
    switch (r->kind) {
    case PSK_EV_ENTER: e = OTF2_EvtWriter_Enter(ew, al, r->time, (OTF2_RegionRef)v[0]); break;
    case PSK_EV_LEAVE: e = OTF2_EvtWriter_Leave(ew, al, r->time, (OTF2_RegionRef)v[0]); break;
    case PSK_EV_CC_ENTER:
        e = OTF2_EvtWriter_CallingContextEnter(ew, al, r->time, (OTF2_CallingContextRef)v[0],
                                               (uint32_t)v[1]);
        break;
    case PSK_EV_CC_LEAVE:
        e = OTF2_EvtWriter_CallingContextLeave(ew, al, r->time, (OTF2_CallingContextRef)v[0]);
        break;
    case PSK_EV_SEND:
        e = OTF2_EvtWriter_MpiSend(ew, al, r->time, (uint32_t)v[0], (OTF2_CommRef)v[1],
                                   (uint32_t)v[2], v[3]);
        break;
    case PSK_EV_ISEND:
        e = OTF2_EvtWriter_MpiIsend(ew, al, r->time, (uint32_t)v[0], (OTF2_CommRef)v[1],
                                    (uint32_t)v[2], v[3], v[4]);
        break;
    case PSK_EV_RECV:
        e = OTF2_EvtWriter_MpiRecv(ew, al, r->time, (uint32_t)v[0], (OTF2_CommRef)v[1],
                                   (uint32_t)v[2], v[3]);
        break;
    case PSK_EV_IRECV:
        e = OTF2_EvtWriter_MpiIrecv(ew, al, r->time, (uint32_t)v[0], (OTF2_CommRef)v[1],
                                    (uint32_t)v[2], v[3], v[4]);
        break;
    case PSK_EV_ISEND_COMPLETE: e = OTF2_EvtWriter_MpiIsendComplete(ew, al, r->time, v[0]); break;
    case PSK_EV_IRECV_REQUEST: e = OTF2_EvtWriter_MpiIrecvRequest(ew, al, r->time, v[0]); break;
    case PSK_EV_REQUEST_TEST: e = OTF2_EvtWriter_MpiRequestTest(ew, al, r->time, v[0]); break;
    case PSK_EV_REQUEST_CANCELLED:
        e = OTF2_EvtWriter_MpiRequestCancelled(ew, al, r->time, v[0]);
        break;
    case PSK_EV_COLLECTIVE_BEGIN: e = OTF2_EvtWriter_MpiCollectiveBegin(ew, al, r->time); break;
    case PSK_EV_COLLECTIVE_END:
        e = OTF2_EvtWriter_MpiCollectiveEnd(ew, al, r->time, (OTF2_CollectiveOp)v[0],
                                            (OTF2_CommRef)v[1], (uint32_t)v[2], v[3], v[4]);
        break;
    case PSK_EV_COMM_CREATE: e = OTF2_EvtWriter_CommCreate(ew, al, r->time, (OTF2_CommRef)v[0]); break;
    case PSK_EV_NB_COLL_REQUEST:
        e = OTF2_EvtWriter_NonBlockingCollectiveRequest(ew, al, r->time, v[0]);
        break;
    case PSK_EV_NB_COLL_COMPLETE:
        e = OTF2_EvtWriter_NonBlockingCollectiveComplete(ew, al, r->time, (OTF2_CollectiveOp)v[0],
                                                         (OTF2_CommRef)v[1], (uint32_t)v[2], v[3],
                                                         v[4], v[5]);
        break;
    default: return psk_fail(err, len, "no such event kind", OTF2_ERROR_INVALID_ARGUMENT);
    }
    return e == OTF2_SUCCESS ? 0 : psk_fail(err, len, "cannot write an event", e);
}

/* Definitions, after the events (a location's definition counts its events). */
int psk_otf2_write_def(psk_writer *w, const psk_rec *r, char *err, size_t len) {
    psk_last[0] = 0;
    if (!w->defs) {
        w->defs = OTF2_Archive_GetGlobalDefWriter(w->archive);
        if (!w->defs)
            return psk_fail(err, len, "cannot write the global definitions", OTF2_ERROR_MEM_ALLOC_FAILED);
    }
    const uint64_t *v = r->v;
    OTF2_ErrorCode e;
    switch (r->kind) {
    case PSK_DEF_CLOCK:
        e = OTF2_GlobalDefWriter_WriteClockProperties(w->defs, v[0], v[1], v[2], v[3]);
        break;
    case PSK_DEF_STRING:
        e = OTF2_GlobalDefWriter_WriteString(w->defs, (OTF2_StringRef)v[0], r->s ? r->s : "");
        break;
    case PSK_DEF_ATTRIBUTE:
        e = OTF2_GlobalDefWriter_WriteAttribute(w->defs, (OTF2_AttributeRef)v[0],
                                                (OTF2_StringRef)v[1], (OTF2_StringRef)v[1],
                                                OTF2_TYPE_UINT64);
        break;
    case PSK_DEF_REGION:
        e = OTF2_GlobalDefWriter_WriteRegion(
            w->defs, (OTF2_RegionRef)v[0], (OTF2_StringRef)v[1], (OTF2_StringRef)v[2],
            (OTF2_StringRef)v[2], v[3] ? OTF2_REGION_ROLE_POINT2POINT : OTF2_REGION_ROLE_FUNCTION,
            v[3] ? OTF2_PARADIGM_MPI : OTF2_PARADIGM_USER, OTF2_REGION_FLAG_NONE,
            (OTF2_StringRef)v[4], (uint32_t)v[5], (uint32_t)v[5]);
        break;
    case PSK_DEF_SYSTEM_TREE_NODE:
        e = OTF2_GlobalDefWriter_WriteSystemTreeNode(w->defs, (OTF2_SystemTreeNodeRef)v[0],
                                                     (OTF2_StringRef)v[1], (OTF2_StringRef)v[2],
                                                     (OTF2_SystemTreeNodeRef)v[3]);
        break;
    case PSK_DEF_LOCATION_GROUP:
        e = OTF2_GlobalDefWriter_WriteLocationGroup(
            w->defs, (OTF2_LocationGroupRef)v[0], (OTF2_StringRef)v[1],
            OTF2_LOCATION_GROUP_TYPE_PROCESS, (OTF2_SystemTreeNodeRef)v[3],
            OTF2_UNDEFINED_LOCATION_GROUP);
        break;
    case PSK_DEF_LOCATION: {
        /* The events this writer wrote for the location. */
        uint64_t n_events = 0;
        for (size_t i = 0; i < w->n_locs; i++)
            if (w->locs[i].location == v[0])
                OTF2_EvtWriter_GetNumberOfEvents(w->locs[i].writer, &n_events);
        e = OTF2_GlobalDefWriter_WriteLocation(w->defs, (OTF2_LocationRef)v[0],
                                               (OTF2_StringRef)v[1], OTF2_LOCATION_TYPE_CPU_THREAD,
                                               n_events, (OTF2_LocationGroupRef)v[4]);
        break;
    }
    case PSK_DEF_GROUP: {
        OTF2_GroupType type = v[2] == PSK_GROUP_COMM_LOCATIONS ? OTF2_GROUP_TYPE_COMM_LOCATIONS
                              : v[2] == PSK_GROUP_COMM_SELF    ? OTF2_GROUP_TYPE_COMM_SELF
                                                               : OTF2_GROUP_TYPE_COMM_GROUP;
        e = OTF2_GlobalDefWriter_WriteGroup(w->defs, (OTF2_GroupRef)v[0], (OTF2_StringRef)v[1],
                                            type, OTF2_PARADIGM_MPI, OTF2_GROUP_FLAG_NONE,
                                            r->n_members, r->members);
        break;
    }
    case PSK_DEF_COMM:
        e = OTF2_GlobalDefWriter_WriteComm(w->defs, (OTF2_CommRef)v[0], (OTF2_StringRef)v[1],
                                           (OTF2_GroupRef)v[2], (OTF2_CommRef)v[3],
                                           OTF2_COMM_FLAG_NONE);
        break;
    case PSK_DEF_LOCATION_PROPERTY: {
        OTF2_AttributeValue value;
        value.uint64 = v[2];
        e = OTF2_GlobalDefWriter_WriteLocationProperty(w->defs, (OTF2_LocationRef)v[0],
                                                       (OTF2_StringRef)v[1], OTF2_TYPE_UINT64,
                                                       value);
        break;
    }
    case PSK_DEF_CART_DIMENSION:
        e = OTF2_GlobalDefWriter_WriteCartDimension(
            w->defs, (OTF2_CartDimensionRef)v[0], (OTF2_StringRef)v[1], (uint32_t)v[2],
            v[3] ? OTF2_CART_PERIODIC_TRUE : OTF2_CART_PERIODIC_FALSE);
        break;
    case PSK_DEF_CART_TOPOLOGY: {
        OTF2_CartDimensionRef dims[256];
        uint32_t n = r->n_members > 255 ? 255 : r->n_members;
        for (uint32_t i = 0; i < n; i++) dims[i] = (OTF2_CartDimensionRef)r->members[i];
        e = OTF2_GlobalDefWriter_WriteCartTopology(w->defs, (OTF2_CartTopologyRef)v[0],
                                                   (OTF2_StringRef)v[1], (OTF2_CommRef)v[2],
                                                   (uint8_t)n, dims);
        break;
    }
    case PSK_DEF_SOURCE_CODE_LOCATION:
        e = OTF2_GlobalDefWriter_WriteSourceCodeLocation(
            w->defs, (OTF2_SourceCodeLocationRef)v[0], (OTF2_StringRef)v[1], (uint32_t)v[2]);
        break;
    case PSK_DEF_CALLING_CONTEXT:
        e = OTF2_GlobalDefWriter_WriteCallingContext(
            w->defs, (OTF2_CallingContextRef)v[0], (OTF2_RegionRef)v[1],
            (OTF2_SourceCodeLocationRef)v[2], (OTF2_CallingContextRef)v[3]);
        break;
    default: return psk_fail(err, len, "no such definition kind", OTF2_ERROR_INVALID_ARGUMENT);
    }
    return e == OTF2_SUCCESS ? 0 : psk_fail(err, len, "cannot write a definition", e);
}

int psk_otf2_writer_close(psk_writer *w, char *err, size_t len) {
    if (!w) return 0;
    psk_last[0] = 0;
    OTF2_ErrorCode first = OTF2_SUCCESS, e;
    for (size_t i = 0; i < w->n_locs; i++) {
        e = OTF2_Archive_CloseEvtWriter(w->archive, w->locs[i].writer);
        if (first == OTF2_SUCCESS) first = e;
    }
    e = OTF2_Archive_CloseEvtFiles(w->archive);
    if (first == OTF2_SUCCESS) first = e;
    /* Empty local definition files: readers look for one per location. */
    if (OTF2_Archive_OpenDefFiles(w->archive) == OTF2_SUCCESS) {
        for (size_t i = 0; i < w->n_locs; i++) {
            OTF2_DefWriter *d = OTF2_Archive_GetDefWriter(w->archive, w->locs[i].location);
            if (d) OTF2_Archive_CloseDefWriter(w->archive, d);
        }
        OTF2_Archive_CloseDefFiles(w->archive);
    }
    e = OTF2_Archive_Close(w->archive);
    if (first == OTF2_SUCCESS) first = e;
    OTF2_AttributeList_Delete(w->attrs);
    free(w->locs);
    free(w);
    return first == OTF2_SUCCESS ? 0 : psk_fail(err, len, "cannot finish the OTF2 archive", first);
}

/* The OTF2 collective operation of MPI routine `name` (e.g. "MPI_Allreduce"), or
 * UINT64_MAX; and the routine's name of an operation. */
static const struct {
    const char *name;
    OTF2_CollectiveOp op;
} psk_colls[] = {
    {"MPI_Barrier", OTF2_COLLECTIVE_OP_BARRIER},
    {"MPI_Bcast", OTF2_COLLECTIVE_OP_BCAST},
    {"MPI_Gather", OTF2_COLLECTIVE_OP_GATHER},
    {"MPI_Gatherv", OTF2_COLLECTIVE_OP_GATHERV},
    {"MPI_Scatter", OTF2_COLLECTIVE_OP_SCATTER},
    {"MPI_Scatterv", OTF2_COLLECTIVE_OP_SCATTERV},
    {"MPI_Allgather", OTF2_COLLECTIVE_OP_ALLGATHER},
    {"MPI_Allgatherv", OTF2_COLLECTIVE_OP_ALLGATHERV},
    {"MPI_Alltoall", OTF2_COLLECTIVE_OP_ALLTOALL},
    {"MPI_Alltoallv", OTF2_COLLECTIVE_OP_ALLTOALLV},
    {"MPI_Reduce", OTF2_COLLECTIVE_OP_REDUCE},
    {"MPI_Allreduce", OTF2_COLLECTIVE_OP_ALLREDUCE},
    {"MPI_Reduce_scatter", OTF2_COLLECTIVE_OP_REDUCE_SCATTER},
    {"MPI_Reduce_scatter_block", OTF2_COLLECTIVE_OP_REDUCE_SCATTER_BLOCK},
    {"MPI_Scan", OTF2_COLLECTIVE_OP_SCAN},
    {"MPI_Exscan", OTF2_COLLECTIVE_OP_EXSCAN},
    {"MPI_Comm_dup", OTF2_COLLECTIVE_OP_CREATE_HANDLE},
    {"MPI_Comm_split", OTF2_COLLECTIVE_OP_CREATE_HANDLE},
    {"MPI_Comm_create", OTF2_COLLECTIVE_OP_CREATE_HANDLE},
    {"MPI_Cart_create", OTF2_COLLECTIVE_OP_CREATE_HANDLE},
    {"MPI_Cart_sub", OTF2_COLLECTIVE_OP_CREATE_HANDLE},
    {"MPI_Comm_free", OTF2_COLLECTIVE_OP_DESTROY_HANDLE},
};

uint64_t psk_otf2_collective_op(const char *name) {
    for (size_t i = 0; i < sizeof psk_colls / sizeof psk_colls[0]; i++)
        if (strcmp(psk_colls[i].name, name) == 0) return psk_colls[i].op;
    return UINT64_MAX;
}

uint32_t psk_otf2_undefined_u32(void) { return OTF2_UNDEFINED_UINT32; }
uint64_t psk_otf2_undefined_u64(void) { return OTF2_UNDEFINED_UINT64; }

/* The record's size, for the Rust side to check its declaration against. */
size_t psk_otf2_rec_size(void) { return sizeof(psk_rec); }
