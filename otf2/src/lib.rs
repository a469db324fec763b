//! OTF2 traces (Score-P's format, read by Vampir, Scalasca, TraceR) through the reference
//! library: Debian's `libopen-trace-format2` 3.0, linked through a C shim
//! (`shim/psk_otf2.c`) that turns OTF2's callback-per-record-type reader and
//! handle-per-location writer into one flat record type. This crate knows OTF2, not MPI
//! semantics: [`read_definitions`] gives an archive's global definitions, [`Events`] one
//! location's events in bounded batches, [`Writer`] writes an archive. Strings are
//! copied out; nothing here outlives a call but owned Rust values.
//!
//! Why the reference library and not a native reader: OTF2's encoding (compressed
//! integers, chunked buffers, per-location id mappings, attribute lists, version
//! differences) is the library's own, and its reader is the one Score-P and Vampir agree
//! with; see ARCHITECTURE.md.

mod ffi;

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_void};
use std::path::Path;

pub use ffi::N_ATTRS;

/// Why an OTF2 call failed: what was being done and the library's own message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The perfskel attributes: values OTF2's MPI records do not carry, written as `uint64`
/// attributes named `perfskel::<name>` so that other tools ignore them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Attr {
    /// ns of the gap before the call the rank spent off its core.
    OffCpu = 0,
    /// The failed polls a record stands for.
    Polls = 1,
    /// 1: the receive was posted with `MPI_ANY_SOURCE`.
    AnySource = 2,
    /// The outcome flag of a test or probe, the error code of `MPI_Abort`.
    Flag = 3,
    /// The request a call made where OTF2 has no record for it.
    Request = 4,
    /// 1 on a send or receive record whose peer is `MPI_PROC_NULL` (the record's peer
    /// is then OTF2's undefined).
    ProcNull = 5,
}

impl Attr {
    pub const ALL: [Attr; N_ATTRS] = [
        Attr::OffCpu,
        Attr::Polls,
        Attr::AnySource,
        Attr::Flag,
        Attr::Request,
        Attr::ProcNull,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Attr::OffCpu => "perfskel::off_cpu_ns",
            Attr::Polls => "perfskel::polls",
            Attr::AnySource => "perfskel::any_source",
            Attr::Flag => "perfskel::flag",
            Attr::Request => "perfskel::request",
            Attr::ProcNull => "perfskel::proc_null",
        }
    }
}

/// Attribute values of one event, by [`Attr`].
pub type Attrs = [Option<u64>; N_ATTRS];

/// What a group lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupKind {
    /// The location of each rank of a paradigm (MPI: world rank i is location members[i]).
    CommLocations,
    /// Ranks, as indices into the paradigm's comm-locations group.
    CommGroup,
    CommSelf,
    Locations,
    Other,
}

/// A global definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Def {
    Clock {
        resolution: u64,
        offset: u64,
        length: u64,
        realtime: u64,
    },
    String {
        id: u64,
        text: String,
    },
    Attribute {
        id: u64,
        name: u64,
        uint64: bool,
    },
    Region {
        id: u64,
        name: u64,
        canonical: u64,
        mpi: bool,
        file: u64,
        line: u32,
    },
    SystemTreeNode {
        id: u64,
        name: u64,
        class: u64,
        parent: u64,
    },
    LocationGroup {
        id: u64,
        name: u64,
        process: bool,
        parent: u64,
    },
    Location {
        id: u64,
        name: u64,
        cpu_thread: bool,
        events: u64,
        group: u64,
    },
    Group {
        id: u64,
        name: u64,
        kind: GroupKind,
        mpi: bool,
        members: Vec<u64>,
    },
    Comm {
        id: u64,
        name: u64,
        group: u64,
        parent: u64,
    },
    /// A `uint64` property of a location (others are not read).
    LocationProperty {
        location: u64,
        name: u64,
        value: u64,
    },
    CartDimension {
        id: u64,
        name: u64,
        size: u32,
        periodic: bool,
    },
    CartTopology {
        id: u64,
        name: u64,
        comm: u64,
        dims: Vec<u64>,
    },
    /// A file and line (`file`: a string).
    SourceCodeLocation {
        id: u64,
        file: u64,
        line: u32,
    },
    /// A node of the calling-context tree: `region` at `source_code_location` (for a
    /// caller, where its call is), under `parent` ([`UNDEFINED_U64`] at the root).
    CallingContext {
        id: u64,
        region: u64,
        source_code_location: u64,
        parent: u64,
    },
}

/// An event record of one location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvKind {
    Enter {
        region: u64,
    },
    Leave {
        region: u64,
    },
    /// A region entered, given with its whole calling context (Score-P with unwinding):
    /// `context` is the entered region's node; the first `unwind_distance - 1` nodes up
    /// from it were entered since the previous calling-context event.
    CallingContextEnter {
        context: u64,
        unwind_distance: u32,
    },
    CallingContextLeave {
        context: u64,
    },
    /// `peer`: the receiver's rank in `comm`.
    Send {
        peer: u32,
        comm: u64,
        tag: u32,
        bytes: u64,
    },
    Isend {
        peer: u32,
        comm: u64,
        tag: u32,
        bytes: u64,
        request: u64,
    },
    /// `peer`: the sender's rank in `comm`.
    Recv {
        peer: u32,
        comm: u64,
        tag: u32,
        bytes: u64,
    },
    Irecv {
        peer: u32,
        comm: u64,
        tag: u32,
        bytes: u64,
        request: u64,
    },
    IsendComplete {
        request: u64,
    },
    IrecvRequest {
        request: u64,
    },
    RequestTest {
        request: u64,
    },
    RequestCancelled {
        request: u64,
    },
    CollectiveBegin,
    /// `op`: OTF2's collective operation (see [`collective_op`]); `root`: a rank of
    /// `comm`, or [`UNDEFINED_U32`].
    CollectiveEnd {
        op: u64,
        comm: u64,
        root: u32,
        sent: u64,
        received: u64,
    },
    CommCreate {
        comm: u64,
    },
    /// A nonblocking collective started (`MPI_Ibcast`).
    NbCollRequest {
        request: u64,
    },
    /// A nonblocking collective completed (in the wait or test that completes it).
    NbCollComplete {
        op: u64,
        comm: u64,
        root: u32,
        sent: u64,
        received: u64,
        request: u64,
    },
    /// A record perfskel does not use (metrics, threads, I/O, …).
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ev {
    /// In the archive's clock ticks (see [`Def::Clock`]).
    pub time: u64,
    pub kind: EvKind,
    pub attrs: Attrs,
}

impl Ev {
    pub fn new(time: u64, kind: EvKind) -> Self {
        Ev {
            time,
            kind,
            attrs: [None; N_ATTRS],
        }
    }

    pub fn with(mut self, attr: Attr, value: u64) -> Self {
        self.attrs[attr as usize] = Some(value);
        self
    }

    pub fn attr(&self, attr: Attr) -> Option<u64> {
        self.attrs[attr as usize]
    }
}

/// OTF2's "undefined" for 32-bit fields (a collective without a root).
pub const UNDEFINED_U32: u32 = u32::MAX;
/// OTF2's "undefined" reference (no parent, no string).
pub const UNDEFINED_U64: u64 = u64::MAX;

/// OTF2's collective operation of MPI routine `name` (`MPI_Allreduce`, `MPI_Comm_split`
/// …), if it is one.
pub fn collective_op(name: &str) -> Option<u64> {
    let c = CString::new(name).ok()?;
    // SAFETY: a NUL-terminated string the call only reads.
    let op = unsafe { ffi::psk_otf2_collective_op(c.as_ptr()) };
    (op != u64::MAX).then_some(op)
}

const ERR_LEN: usize = 600;

fn err_text(buf: &[c_char]) -> String {
    // SAFETY: the shim writes a NUL-terminated message into the buffer (snprintf), and
    // the buffer starts zeroed.
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) };
    text.to_string_lossy().into_owned()
}

fn path_c(path: &Path) -> Result<CString, Error> {
    let text = path.to_str().ok_or_else(|| Error {
        message: format!("{}: not a UTF-8 path", path.display()),
    })?;
    CString::new(text).map_err(|_| Error {
        message: format!("{text}: a path with a NUL byte"),
    })
}

fn string_of(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the shim gives NUL-terminated copies it owns until the call returns.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A 32-bit OTF2 reference (strings, regions, groups, communicators, system tree
/// nodes, location groups, attributes) widened: its "undefined" is [`UNDEFINED_U64`].
fn r32(x: u64) -> u64 {
    if x == u32::MAX as u64 {
        UNDEFINED_U64
    } else {
        x
    }
}

fn def_of(r: &ffi::RawRec) -> Option<Def> {
    let mut v = r.v;
    // Every field but the clock's values, a location's id and event count is a 32-bit
    // reference.
    if r.kind != ffi::DEF_CLOCK {
        for (i, x) in v.iter_mut().enumerate() {
            let wide = (r.kind == ffi::DEF_LOCATION && (i == 0 || i == 3))
                || (r.kind == ffi::DEF_LOCATION_PROPERTY && (i == 0 || i == 2))
                || (r.kind == ffi::DEF_CART_DIMENSION && i == 2);
            if !wide {
                *x = r32(*x);
            }
        }
    }
    let v = &v;
    Some(match r.kind {
        ffi::DEF_CLOCK => Def::Clock {
            resolution: v[0],
            offset: v[1],
            length: v[2],
            realtime: v[3],
        },
        ffi::DEF_STRING => Def::String {
            id: v[0],
            text: string_of(r.s),
        },
        ffi::DEF_ATTRIBUTE => Def::Attribute {
            id: v[0],
            name: v[1],
            uint64: v[2] != 0,
        },
        ffi::DEF_REGION => Def::Region {
            id: v[0],
            name: v[1],
            canonical: v[2],
            mpi: v[3] != 0,
            file: v[4],
            line: v[5] as u32,
        },
        ffi::DEF_SYSTEM_TREE_NODE => Def::SystemTreeNode {
            id: v[0],
            name: v[1],
            class: v[2],
            parent: v[3],
        },
        ffi::DEF_LOCATION_GROUP => Def::LocationGroup {
            id: v[0],
            name: v[1],
            process: v[2] != 0,
            parent: v[3],
        },
        ffi::DEF_LOCATION => Def::Location {
            id: v[0],
            name: v[1],
            cpu_thread: v[2] != 0,
            events: v[3],
            group: v[4],
        },
        ffi::DEF_GROUP => Def::Group {
            id: v[0],
            name: v[1],
            kind: match v[2] {
                ffi::GROUP_COMM_LOCATIONS => GroupKind::CommLocations,
                ffi::GROUP_COMM_GROUP => GroupKind::CommGroup,
                ffi::GROUP_COMM_SELF => GroupKind::CommSelf,
                ffi::GROUP_LOCATIONS => GroupKind::Locations,
                _ => GroupKind::Other,
            },
            mpi: v[3] != 0,
            members: members(r),
        },
        ffi::DEF_COMM => Def::Comm {
            id: v[0],
            name: v[1],
            group: v[2],
            parent: v[3],
        },
        ffi::DEF_LOCATION_PROPERTY => Def::LocationProperty {
            location: v[0],
            name: v[1],
            value: v[2],
        },
        ffi::DEF_CART_DIMENSION => Def::CartDimension {
            id: v[0],
            name: v[1],
            size: v[2] as u32,
            periodic: v[3] != 0,
        },
        ffi::DEF_CART_TOPOLOGY => Def::CartTopology {
            id: v[0],
            name: v[1],
            comm: v[2],
            dims: members(r),
        },
        ffi::DEF_SOURCE_CODE_LOCATION => Def::SourceCodeLocation {
            id: v[0],
            file: v[1],
            line: r.v[2] as u32,
        },
        ffi::DEF_CALLING_CONTEXT => Def::CallingContext {
            id: v[0],
            region: v[1],
            source_code_location: v[2],
            parent: v[3],
        },
        _ => return None,
    })
}

/// The member list of a record (a copy).
fn members(r: &ffi::RawRec) -> Vec<u64> {
    if r.members.is_null() || r.n_members == 0 {
        Vec::new()
    } else {
        // SAFETY: the shim's copy of `n_members` ids, alive during the callback.
        unsafe { std::slice::from_raw_parts(r.members, r.n_members as usize) }.to_vec()
    }
}

unsafe extern "C" fn collect_def(user: *mut c_void, rec: *const ffi::RawRec) {
    // SAFETY: `user` is the Vec passed by read_definitions, `rec` a record the shim
    // owns during this call.
    let defs = unsafe { &mut *(user as *mut Vec<Def>) };
    if let Some(d) = def_of(unsafe { &*rec }) {
        defs.push(d);
    }
}

/// The global definitions of the archive whose anchor file is `anchor` (`traces.otf2`),
/// in the order the archive has them.
pub fn read_definitions(anchor: &Path) -> Result<Vec<Def>, Error> {
    let c = path_c(anchor)?;
    let mut defs: Vec<Def> = Vec::new();
    let mut err = [0 as c_char; ERR_LEN];
    // SAFETY: the callback casts `user` back to this Vec, used only during the call.
    let rc = unsafe {
        ffi::psk_otf2_read_defs(
            c.as_ptr(),
            collect_def,
            &mut defs as *mut Vec<Def> as *mut c_void,
            err.as_mut_ptr(),
            ERR_LEN,
        )
    };
    if rc != 0 {
        return Err(Error {
            message: err_text(&err),
        });
    }
    Ok(defs)
}

/// The ids of the perfskel attributes among `defs` (by name; [`UNDEFINED_U64`] where the
/// archive has none).
pub fn attribute_ids(defs: &[Def]) -> [u64; N_ATTRS] {
    let mut strings = std::collections::BTreeMap::new();
    for d in defs {
        if let Def::String { id, text } = d {
            strings.insert(*id, text.as_str());
        }
    }
    let mut ids = [UNDEFINED_U64; N_ATTRS];
    for d in defs {
        if let Def::Attribute {
            id,
            name,
            uint64: true,
        } = d
        {
            if let Some(text) = strings.get(name) {
                if let Some(a) = Attr::ALL.iter().find(|a| a.name() == *text) {
                    ids[*a as usize] = *id;
                }
            }
        }
    }
    ids
}

fn ev_of(r: &ffi::RawRec) -> Ev {
    let mut v = r.v;
    // Regions and communicators are 32-bit references.
    match r.kind {
        ffi::EV_ENTER
        | ffi::EV_LEAVE
        | ffi::EV_COMM_CREATE
        | ffi::EV_CC_ENTER
        | ffi::EV_CC_LEAVE => v[0] = r32(v[0]),
        ffi::EV_SEND
        | ffi::EV_ISEND
        | ffi::EV_RECV
        | ffi::EV_IRECV
        | ffi::EV_COLLECTIVE_END
        | ffi::EV_NB_COLL_COMPLETE => v[1] = r32(v[1]),
        _ => {}
    }
    let v = &v;
    let kind = match r.kind {
        ffi::EV_ENTER => EvKind::Enter { region: v[0] },
        ffi::EV_LEAVE => EvKind::Leave { region: v[0] },
        ffi::EV_CC_ENTER => EvKind::CallingContextEnter {
            context: v[0],
            unwind_distance: v[1] as u32,
        },
        ffi::EV_CC_LEAVE => EvKind::CallingContextLeave { context: v[0] },
        ffi::EV_SEND => EvKind::Send {
            peer: v[0] as u32,
            comm: v[1],
            tag: v[2] as u32,
            bytes: v[3],
        },
        ffi::EV_ISEND => EvKind::Isend {
            peer: v[0] as u32,
            comm: v[1],
            tag: v[2] as u32,
            bytes: v[3],
            request: v[4],
        },
        ffi::EV_RECV => EvKind::Recv {
            peer: v[0] as u32,
            comm: v[1],
            tag: v[2] as u32,
            bytes: v[3],
        },
        ffi::EV_IRECV => EvKind::Irecv {
            peer: v[0] as u32,
            comm: v[1],
            tag: v[2] as u32,
            bytes: v[3],
            request: v[4],
        },
        ffi::EV_ISEND_COMPLETE => EvKind::IsendComplete { request: v[0] },
        ffi::EV_IRECV_REQUEST => EvKind::IrecvRequest { request: v[0] },
        ffi::EV_REQUEST_TEST => EvKind::RequestTest { request: v[0] },
        ffi::EV_REQUEST_CANCELLED => EvKind::RequestCancelled { request: v[0] },
        ffi::EV_COLLECTIVE_BEGIN => EvKind::CollectiveBegin,
        ffi::EV_COLLECTIVE_END => EvKind::CollectiveEnd {
            op: v[0],
            comm: v[1],
            root: v[2] as u32,
            sent: v[3],
            received: v[4],
        },
        ffi::EV_COMM_CREATE => EvKind::CommCreate { comm: v[0] },
        ffi::EV_NB_COLL_REQUEST => EvKind::NbCollRequest { request: v[0] },
        ffi::EV_NB_COLL_COMPLETE => EvKind::NbCollComplete {
            op: v[0],
            comm: v[1],
            root: v[2] as u32,
            sent: v[3],
            received: v[4],
            request: v[5],
        },
        _ => EvKind::Other,
    };
    let mut attrs = [None; N_ATTRS];
    for (a, slot) in attrs.iter_mut().enumerate() {
        if r.has_attrs & (1 << a) != 0 {
            *slot = Some(r.attrs[a]);
        }
    }
    Ev {
        time: r.time,
        kind,
        attrs,
    }
}

/// One location's events, read in batches of at most [`Events::BATCH`] records: memory
/// stays bounded whatever the trace's size.
pub struct Events {
    handle: *mut ffi::Evts,
    batch: std::collections::VecDeque<Ev>,
    done: bool,
    /// The error that ended the reading (a damaged event file), once reached.
    error: Option<Error>,
    /// Records OTF2 has read so far.
    read: u64,
    /// The records the location's definition counts, when it counts them.
    expected: Option<u64>,
}

impl Events {
    pub const BATCH: u64 = 65536;

    /// Opens `location` of the archive at `anchor`; `attr_ids` from [`attribute_ids`].
    pub fn open(anchor: &Path, location: u64, attr_ids: &[u64; N_ATTRS]) -> Result<Self, Error> {
        let c = path_c(anchor)?;
        let mut err = [0 as c_char; ERR_LEN];
        // SAFETY: valid strings and an array of N_ATTRS ids, read during the call.
        let handle = unsafe {
            ffi::psk_otf2_events_open(
                c.as_ptr(),
                location,
                attr_ids.as_ptr(),
                err.as_mut_ptr(),
                ERR_LEN,
            )
        };
        if handle.is_null() {
            return Err(Error {
                message: err_text(&err),
            });
        }
        Ok(Events {
            handle,
            batch: Default::default(),
            done: false,
            error: None,
            read: 0,
            expected: None,
        })
    }

    /// Checks the count of the location's definition (`Def::Location::events`): an event
    /// file that ends before that many records is an error. OTF2 itself may take a cut
    /// file's end for the end of its last chunk, depending on what the bytes past the cut
    /// read as; the count is what makes a truncation certain to be seen. 0 counts nothing.
    pub fn expecting(mut self, events: u64) -> Self {
        self.expected = (events > 0).then_some(events);
        self
    }

    fn fill(&mut self) {
        let mut recs: *const ffi::RawRec = std::ptr::null();
        let mut n: usize = 0;
        let mut read: u64 = 0;
        let mut err = [0 as c_char; ERR_LEN];
        // SAFETY: the handle is open; the shim's records stay valid until the next read.
        let rc = unsafe {
            ffi::psk_otf2_events_read(
                self.handle,
                Self::BATCH,
                &mut recs,
                &mut n,
                &mut read,
                err.as_mut_ptr(),
                ERR_LEN,
            )
        };
        if !recs.is_null() && n > 0 {
            // SAFETY: `n` records the shim owns until the next read.
            let slice = unsafe { std::slice::from_raw_parts(recs, n) };
            self.batch.extend(slice.iter().map(ev_of));
        }
        self.read += read;
        if rc != 0 {
            self.error = Some(Error {
                message: err_text(&err),
            });
            self.done = true;
        } else if read < Self::BATCH {
            // The last records: OTF2 refuses to read past them.
            self.done = true;
            if let Some(n) = self.expected.filter(|n| self.read < *n) {
                self.error = Some(Error {
                    message: format!(
                        "the event file ends after {} of the {n} records its location's \
                         definition counts (a truncated file?)",
                        self.read
                    ),
                });
            }
        }
    }

    /// The next event; `Ok(None)` at the end; an error once, after the events before a
    /// damaged part.
    pub fn next_event(&mut self) -> Result<Option<Ev>, Error> {
        loop {
            if let Some(ev) = self.batch.pop_front() {
                return Ok(Some(ev));
            }
            if self.done {
                return match self.error.take() {
                    Some(e) => Err(e),
                    None => Ok(None),
                };
            }
            self.fill();
        }
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        // SAFETY: opened by psk_otf2_events_open, closed once.
        unsafe { ffi::psk_otf2_events_close(self.handle) };
    }
}

/// Writes an archive: events first (per location, in time order), then the global
/// definitions (a location's definition counts the events written for it), then
/// [`Writer::finish`].
pub struct Writer {
    handle: *mut ffi::Writer,
}

fn check(rc: i32, err: &[c_char]) -> Result<(), Error> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error {
            message: err_text(err),
        })
    }
}

impl Writer {
    /// Creates archive `name` in directory `dir` (`dir/name.otf2` is the anchor file);
    /// `attr_ids`: the ids the perfskel attributes will be defined with.
    pub fn create(dir: &Path, name: &str, attr_ids: &[u64; N_ATTRS]) -> Result<Self, Error> {
        let d = path_c(dir)?;
        let n = CString::new(name).map_err(|_| Error {
            message: "an archive name with a NUL byte".into(),
        })?;
        let mut err = [0 as c_char; ERR_LEN];
        // SAFETY: valid strings and ids, read during the call.
        let handle = unsafe {
            ffi::psk_otf2_writer_open(
                d.as_ptr(),
                n.as_ptr(),
                attr_ids.as_ptr(),
                err.as_mut_ptr(),
                ERR_LEN,
            )
        };
        if handle.is_null() {
            return Err(Error {
                message: err_text(&err),
            });
        }
        Ok(Writer { handle })
    }

    pub fn event(&mut self, location: u64, ev: &Ev) -> Result<(), Error> {
        let mut r = ffi::RawRec::new(0, ev.time);
        let v = &mut r.v;
        r.kind = match ev.kind {
            EvKind::Enter { region } => {
                v[0] = region;
                ffi::EV_ENTER
            }
            EvKind::Leave { region } => {
                v[0] = region;
                ffi::EV_LEAVE
            }
            EvKind::CallingContextEnter {
                context,
                unwind_distance,
            } => {
                v[0] = context;
                v[1] = unwind_distance as u64;
                ffi::EV_CC_ENTER
            }
            EvKind::CallingContextLeave { context } => {
                v[0] = context;
                ffi::EV_CC_LEAVE
            }
            EvKind::Send {
                peer,
                comm,
                tag,
                bytes,
            } => {
                *v = [peer as u64, comm, tag as u64, bytes, 0, 0, 0, 0];
                ffi::EV_SEND
            }
            EvKind::Isend {
                peer,
                comm,
                tag,
                bytes,
                request,
            } => {
                *v = [peer as u64, comm, tag as u64, bytes, request, 0, 0, 0];
                ffi::EV_ISEND
            }
            EvKind::Recv {
                peer,
                comm,
                tag,
                bytes,
            } => {
                *v = [peer as u64, comm, tag as u64, bytes, 0, 0, 0, 0];
                ffi::EV_RECV
            }
            EvKind::Irecv {
                peer,
                comm,
                tag,
                bytes,
                request,
            } => {
                *v = [peer as u64, comm, tag as u64, bytes, request, 0, 0, 0];
                ffi::EV_IRECV
            }
            EvKind::IsendComplete { request } => {
                v[0] = request;
                ffi::EV_ISEND_COMPLETE
            }
            EvKind::IrecvRequest { request } => {
                v[0] = request;
                ffi::EV_IRECV_REQUEST
            }
            EvKind::RequestTest { request } => {
                v[0] = request;
                ffi::EV_REQUEST_TEST
            }
            EvKind::RequestCancelled { request } => {
                v[0] = request;
                ffi::EV_REQUEST_CANCELLED
            }
            EvKind::CollectiveBegin => ffi::EV_COLLECTIVE_BEGIN,
            EvKind::CollectiveEnd {
                op,
                comm,
                root,
                sent,
                received,
            } => {
                *v = [op, comm, root as u64, sent, received, 0, 0, 0];
                ffi::EV_COLLECTIVE_END
            }
            EvKind::CommCreate { comm } => {
                v[0] = comm;
                ffi::EV_COMM_CREATE
            }
            EvKind::NbCollRequest { request } => {
                v[0] = request;
                ffi::EV_NB_COLL_REQUEST
            }
            EvKind::NbCollComplete {
                op,
                comm,
                root,
                sent,
                received,
                request,
            } => {
                *v = [op, comm, root as u64, sent, received, request, 0, 0];
                ffi::EV_NB_COLL_COMPLETE
            }
            EvKind::Other => {
                return Err(Error {
                    message: "an unknown event cannot be written".into(),
                })
            }
        };
        for (a, value) in ev.attrs.iter().enumerate() {
            if let Some(x) = value {
                r.has_attrs |= 1 << a;
                r.attrs[a] = *x;
            }
        }
        let mut err = [0 as c_char; ERR_LEN];
        // SAFETY: an open writer and a record read during the call.
        let rc = unsafe {
            ffi::psk_otf2_write_event(self.handle, location, &r, err.as_mut_ptr(), ERR_LEN)
        };
        check(rc, &err)
    }

    pub fn definition(&mut self, def: &Def) -> Result<(), Error> {
        let mut r = ffi::RawRec::new(0, 0);
        let text;
        let members: Vec<u64>;
        match def {
            Def::Clock {
                resolution,
                offset,
                length,
                realtime,
            } => {
                r.kind = ffi::DEF_CLOCK;
                r.v[..4].copy_from_slice(&[*resolution, *offset, *length, *realtime]);
            }
            Def::String { id, text: t } => {
                r.kind = ffi::DEF_STRING;
                r.v[0] = *id;
                // A NUL inside a name ends it.
                text = CString::new(t.split('\0').next().unwrap_or("")).unwrap_or_default();
                r.s = text.as_ptr();
            }
            Def::Attribute { id, name, .. } => {
                r.kind = ffi::DEF_ATTRIBUTE;
                r.v[0] = *id;
                r.v[1] = *name;
            }
            Def::Region {
                id,
                name,
                canonical,
                mpi,
                file,
                line,
            } => {
                r.kind = ffi::DEF_REGION;
                r.v[..6].copy_from_slice(&[
                    *id,
                    *name,
                    *canonical,
                    *mpi as u64,
                    *file,
                    *line as u64,
                ]);
            }
            Def::SystemTreeNode {
                id,
                name,
                class,
                parent,
            } => {
                r.kind = ffi::DEF_SYSTEM_TREE_NODE;
                r.v[..4].copy_from_slice(&[*id, *name, *class, *parent]);
            }
            Def::LocationGroup {
                id, name, parent, ..
            } => {
                r.kind = ffi::DEF_LOCATION_GROUP;
                r.v[..4].copy_from_slice(&[*id, *name, 1, *parent]);
            }
            Def::Location {
                id, name, group, ..
            } => {
                r.kind = ffi::DEF_LOCATION;
                r.v[..5].copy_from_slice(&[*id, *name, 1, 0, *group]);
            }
            Def::Group {
                id,
                name,
                kind,
                members: m,
                ..
            } => {
                r.kind = ffi::DEF_GROUP;
                let k = match kind {
                    GroupKind::CommLocations => ffi::GROUP_COMM_LOCATIONS,
                    GroupKind::CommSelf => ffi::GROUP_COMM_SELF,
                    _ => ffi::GROUP_COMM_GROUP,
                };
                r.v[..3].copy_from_slice(&[*id, *name, k]);
                members = m.clone();
                r.n_members = u32::try_from(members.len()).map_err(|_| Error {
                    message: "a group of more than 2^32 members".into(),
                })?;
                r.members = members.as_ptr();
            }
            Def::Comm {
                id,
                name,
                group,
                parent,
            } => {
                r.kind = ffi::DEF_COMM;
                r.v[..4].copy_from_slice(&[*id, *name, *group, *parent]);
            }
            Def::LocationProperty {
                location,
                name,
                value,
            } => {
                r.kind = ffi::DEF_LOCATION_PROPERTY;
                r.v[..3].copy_from_slice(&[*location, *name, *value]);
            }
            Def::CartDimension {
                id,
                name,
                size,
                periodic,
            } => {
                r.kind = ffi::DEF_CART_DIMENSION;
                r.v[..4].copy_from_slice(&[*id, *name, *size as u64, *periodic as u64]);
            }
            Def::CartTopology {
                id,
                name,
                comm,
                dims,
            } => {
                r.kind = ffi::DEF_CART_TOPOLOGY;
                r.v[..3].copy_from_slice(&[*id, *name, *comm]);
                if dims.len() > 255 {
                    return Err(Error {
                        message: "a Cartesian topology of more than 255 dimensions".into(),
                    });
                }
                members = dims.clone();
                r.n_members = members.len() as u32;
                r.members = members.as_ptr();
            }
            Def::SourceCodeLocation { id, file, line } => {
                r.kind = ffi::DEF_SOURCE_CODE_LOCATION;
                r.v[..3].copy_from_slice(&[*id, *file, *line as u64]);
            }
            Def::CallingContext {
                id,
                region,
                source_code_location,
                parent,
            } => {
                r.kind = ffi::DEF_CALLING_CONTEXT;
                r.v[..4].copy_from_slice(&[*id, *region, *source_code_location, *parent]);
            }
        }
        let mut err = [0 as c_char; ERR_LEN];
        // SAFETY: an open writer; the record's string and members live until the call
        // returns (`text`, `members` above).
        let rc = unsafe { ffi::psk_otf2_write_def(self.handle, &r, err.as_mut_ptr(), ERR_LEN) };
        check(rc, &err)
    }

    /// Closes every file of the archive.
    pub fn finish(mut self) -> Result<(), Error> {
        let mut err = [0 as c_char; ERR_LEN];
        let handle = std::mem::replace(&mut self.handle, std::ptr::null_mut());
        // SAFETY: opened by psk_otf2_writer_open, closed once (Drop sees null).
        let rc = unsafe { ffi::psk_otf2_writer_close(handle, err.as_mut_ptr(), ERR_LEN) };
        check(rc, &err)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.handle.is_null() {
            let mut err = [0 as c_char; ERR_LEN];
            // SAFETY: as in finish; errors on this path have nobody to go to.
            unsafe { ffi::psk_otf2_writer_close(self.handle, err.as_mut_ptr(), ERR_LEN) };
        }
    }
}
