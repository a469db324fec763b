//! Streaming reader of one rank's event file: takes any `std::io::Read` (a file, a byte
//! slice), gives the header, then events one by one with the call-site, object and
//! communicator tables they refer to, and finally how the file ended (complete, or cut
//! off after the last whole record). Memory use is bounded by the buffer and the tables,
//! not by the number of events.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;

use super::format::{self, field, Op};

/// The fixed part at the start of a rank file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u16,
    pub rank: u32,
    pub n_ranks: u32,
    pub pid: u32,
    /// Wall-clock time of the rank's `MPI_Init` call, ns since the Unix epoch.
    pub start_unix_ns: u64,
    pub host: String,
    /// First line of `MPI_Get_library_version`.
    pub mpi_library: String,
}

/// One MPI call. Times are ns since the start of the rank's `MPI_Init` call.
/// (`Event::default()` is a placeholder for [`RankReader::next_event`] to fill.)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Event {
    pub op: Op,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Call-site id (see [`RankReader::site`]); 0 when unknown.
    pub site: u64,
    /// Partner world rank (destination of sends, source of receives), or
    /// [`format::PEER_PROC_NULL`] / [`format::PEER_ANY_SOURCE`].
    pub peer: Option<i64>,
    pub tag: Option<i64>,
    /// Bytes sent (received, for receives).
    pub bytes: Option<u64>,
    /// Communicator id (see [`RankReader::comm`]); 0 is `MPI_COMM_WORLD`, 1 `MPI_COMM_SELF`.
    pub comm: Option<u64>,
    /// Request created by a nonblocking operation.
    pub req: Option<u64>,
    /// Requests completed by a wait or test.
    pub reqs: Vec<u64>,
    /// Root of a rooted collective, as a world rank.
    pub root: Option<i64>,
    /// Source world rank of the receive half of a sendrecv.
    pub src: Option<i64>,
    pub rtag: Option<i64>,
    /// Bytes received (sendrecv, collectives).
    pub rbytes: Option<u64>,
    /// Communicator created by this call.
    pub newcomm: Option<u64>,
    /// Outcome flag of tests and probes; error code of `MPI_Abort`.
    pub flag: Option<u64>,
    /// Of the time between the previous event's end and this start, the ns the rank
    /// was off its core (waiting for it, or blocked); 0 where not measured (see
    /// [`Clock`]). The rest of the gap is the application's compute.
    pub off_cpu_ns: u64,
    /// Version 7: a run of failed polls (tests or probes that completed nothing, called
    /// one after another from one call site with the same arguments) is one event;
    /// this is how many calls it stands for (at least 2), 0 for a single call. It ends
    /// where the last call the tracer timed ended; its duration is the timed calls'
    /// mean time on the core times the calls up to then, and `off_cpu_ns` all the time
    /// the run spent off the core (runtime/tracer/FORMAT.md).
    pub polls: u64,
    /// Version 9: the receive was posted with `MPI_ANY_SOURCE`; `peer` (`src` for a
    /// sendrecv) is the source it matched. (A nonblocking receive posted so keeps
    /// [`format::PEER_ANY_SOURCE`] as its peer.)
    pub any_source: bool,
}

impl Event {
    pub fn op(&self) -> Op {
        self.op
    }
    /// The MPI calls the event stands for: 1, or the calls of a run of failed polls.
    pub fn calls(&self) -> u64 {
        self.polls.max(1)
    }
    /// A test or probe that found nothing (flag 0, no request completed): the skeleton
    /// makes no call for it.
    pub fn is_failed_poll(&self) -> bool {
        matches!(
            self.op,
            Op::Test | Op::Testall | Op::Testany | Op::Testsome | Op::Iprobe
        ) && self.flag == Some(0)
            && self.reqs.is_empty()
    }
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// A rank's application time as a skeleton's `app_time` measures it: from the end of
/// `MPI_Init` to the start of `MPI_Finalize` (or to the end of the last event, for a rank
/// that did not finalize). Fed with the rank's events in order; events after
/// `MPI_Finalize` do not count.
#[derive(Clone, Copy, Debug, Default)]
pub struct AppSpan {
    init_end: Option<u64>,
    finalize_start: Option<u64>,
    last_end: u64,
}

impl AppSpan {
    pub fn see(&mut self, ev: &Event) {
        if self.finalized() {
            return;
        }
        self.last_end = ev.end_ns;
        match ev.op {
            Op::Init | Op::InitThread => self.init_end = Some(ev.end_ns),
            Op::Finalize | Op::Abort => self.finalize_start = Some(ev.start_ns),
            _ => {}
        }
    }

    /// Whether `MPI_Finalize` (or `MPI_Abort`) has been seen.
    pub fn finalized(&self) -> bool {
        self.finalize_start.is_some()
    }

    pub fn ns(&self) -> u64 {
        self.finalize_start
            .unwrap_or(self.last_end)
            .saturating_sub(self.init_end.unwrap_or(0))
    }
}

/// A loaded object (executable or shared library) of the traced process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    pub path: String,
    /// Load bias: runtime address minus the address in the ELF file.
    pub bias: u64,
}

/// A call site: the return address of an MPI call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// Object id (see [`RankReader::object`]); 0 when the address was in no known object.
    pub object: u64,
    pub addr: u64,
}

/// A communicator: the world rank of each of its ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comm {
    pub world_ranks: Vec<i64>,
    /// The Cartesian grid the application gave the communicator (`MPI_Cart_create`,
    /// `MPI_Cart_sub`): per dimension its size and whether it is periodic, in the
    /// application's dimension order; empty without one (and before format 5).
    pub grid: Vec<(u64, bool)>,
}

/// What a rank's memory record says (format version 3): how much memory the
/// application used and how fast this machine swept that much when the trace was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Memory {
    /// Peak resident memory at `MPI_Finalize` less the resident memory after `MPI_Init`,
    /// bytes: the application's data.
    pub working_set: u64,
    /// Bytes the probe swept: the working set within 64 KiB … 256 MiB.
    pub probe_bytes: u64,
    /// The probe's best rate, bytes of working set per second; 0 when it did not run.
    pub probe_rate: u64,
}

/// What a rank's clock record says (format version 6): whether the tracer measured how
/// long the rank waited for a core in each gap between MPI calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum Clock {
    /// The tracer watched when the thread was switched out (its rseq area, or a
    /// task-clock perf event's page) and read its CPU time then: each event carries the
    /// ns of its gap the rank spent off its core ([`Event::off_cpu_ns`]).
    OffCpu,
    /// Wall time only: no rseq, and the kernel refused the task clock
    /// (`perf_event_open`'s errno: `perf_event_paranoid` above 2, a seccomp filter), or
    /// `PERFSKEL_TRACE_OFFCPU=0` (errno 0).
    Wall { errno: u64 },
}

/// How a rank file ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// The end record was found: the rank reached `MPI_Finalize`.
    Complete { end_ns: u64, n_events: u64 },
    /// The file stops without an end record (the rank crashed or was killed): everything
    /// up to `valid_bytes` was read; `trailing_bytes` of a partial record were ignored.
    Incomplete {
        valid_bytes: u64,
        trailing_bytes: u64,
    },
}

/// A rank file that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    pub rank: Option<u32>,
    /// Byte offset in the rank file of the record or field at fault.
    pub offset: u64,
    pub kind: TraceErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceErrorKind {
    Io(String),
    BadMagic,
    UnsupportedVersion {
        found: u16,
    },
    TruncatedHeader,
    BadHeader(&'static str),
    BadRecord(&'static str),
    UnknownRecord(u8),
    UnknownFields(u64),
    VarintOverflow,
    BadString,
    /// Version 8: the bytes from `from` to the checksum record do not have the CRC-32
    /// it holds (flipped bits, or blocks of two writers mixed).
    BadChecksum {
        from: u64,
        stored: u32,
        computed: u32,
    },
    /// Version 8: the end record is not followed by its block's checksum.
    MissingChecksum,
    DataAfterEnd,
    EventCountMismatch {
        recorded: u64,
        read: u64,
    },
    MissingRankFile,
    /// A field whose value cannot be what it claims (a peer that is no rank, an id never
    /// defined, a size or a time past any real run): the field's name, and why.
    BadValue {
        field: &'static str,
        problem: String,
    },
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rank {
            Some(r) => write!(
                f,
                "{} (rank {r}), byte offset {}: ",
                format::rank_file_name(r),
                self.offset
            )?,
            None => write!(f, "byte offset {}: ", self.offset)?,
        }
        match &self.kind {
            TraceErrorKind::Io(e) => write!(f, "read error: {e}"),
            TraceErrorKind::BadMagic => write!(f, "not a perfskel trace file (bad magic)"),
            TraceErrorKind::UnsupportedVersion { found } => write!(
                f,
                "trace format version {found} is not supported (this reader reads versions {} to {})",
                format::MIN_VERSION,
                format::VERSION
            ),
            TraceErrorKind::TruncatedHeader => write!(f, "file ends inside the header"),
            TraceErrorKind::BadHeader(what) => write!(f, "corrupt header: {what}"),
            TraceErrorKind::BadRecord(what) => write!(f, "corrupt record: {what}"),
            TraceErrorKind::UnknownRecord(tag) => {
                write!(f, "corrupt record: unknown record tag 0x{tag:02x}")
            }
            TraceErrorKind::UnknownFields(bits) => {
                write!(f, "corrupt event: unknown field bits 0x{bits:x}")
            }
            TraceErrorKind::VarintOverflow => write!(f, "corrupt record: integer too long"),
            TraceErrorKind::BadString => write!(f, "corrupt record: object path is not UTF-8"),
            TraceErrorKind::DataAfterEnd => write!(f, "corrupt file: data after the end record"),
            TraceErrorKind::BadChecksum {
                from,
                stored,
                computed,
            } => write!(
                f,
                "corrupt block: the bytes from offset {from} to here have CRC-32 {computed:08x}, the checksum record says {stored:08x} (flipped bits?)"
            ),
            TraceErrorKind::MissingChecksum => {
                write!(f, "corrupt file: the end record is not followed by its checksum")
            }
            TraceErrorKind::EventCountMismatch { recorded, read } => write!(
                f,
                "corrupt file: the end record counts {recorded} events but {read} were read"
            ),
            TraceErrorKind::MissingRankFile => write!(f, "rank file is missing"),
            TraceErrorKind::BadValue { field, problem } => {
                write!(f, "corrupt value: field {field}: {problem}")
            }
        }
    }
}

impl std::error::Error for TraceError {}

const CHUNK: usize = 1 << 16;

/// Reads one rank file record by record.
pub struct RankReader<R> {
    input: R,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    /// File offset of `buf[0]`.
    base: u64,
    eof: bool,
    header: Header,
    prev_end: u64,
    n_events: u64,
    completion: Option<Completion>,
    objects: Vec<Object>,
    sites: Vec<Site>,
    /// Each site's callers, innermost first (format version 11); empty at depth 1.
    callers: Vec<Vec<Site>>,
    comms: BTreeMap<u64, Comm>,
    memory: Option<Memory>,
    clock: Option<Clock>,
    poll_ps: Option<u64>,
    /// Version 8: the CRC-32 of the bytes since the last checksum record, up to
    /// `buf[hashed]` (bytes before are hashed when the buffer moves them out).
    crc: crc32fast::Hasher,
    hashed: usize,
    /// File offset where the current block started.
    block_from: u64,
    /// Version 8: the end record was read and its checksum must follow.
    end_seen: Option<Completion>,
}

/// Offsets of an event's fields in its record, for [`RankReader::value_fault`].
struct FieldsAt {
    peer: usize,
    bytes: usize,
    comm: usize,
    root: usize,
    src: usize,
    rbytes: usize,
    newcomm: usize,
}

enum Decode {
    NeedMore,
    Bad(TraceErrorKind, usize),
}

type DResult<T> = Result<T, Decode>;

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    #[inline]
    fn byte(&mut self) -> DResult<u8> {
        let b = *self.bytes.get(self.at).ok_or(Decode::NeedMore)?;
        self.at += 1;
        Ok(b)
    }
    /// Most fields fit in one byte: that case stays inline, longer ones take the loop.
    #[inline(always)]
    fn varint(&mut self) -> DResult<u64> {
        if let Some(&b) = self.bytes.get(self.at) {
            if b < 0x80 {
                self.at += 1;
                return Ok(u64::from(b));
            }
        }
        self.varint_long()
    }
    #[inline(never)]
    fn varint_long(&mut self) -> DResult<u64> {
        let start = self.at;
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            if shift == 63 && b > 1 || shift > 63 {
                return Err(Decode::Bad(TraceErrorKind::VarintOverflow, start));
            }
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(value);
            }
            shift += 7;
        }
    }
    #[inline(always)]
    fn zigzag(&mut self) -> DResult<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }
    fn take(&mut self, n: u64) -> DResult<&[u8]> {
        let n = usize::try_from(n).map_err(|_| Decode::NeedMore)?;
        let end = self.at.checked_add(n).ok_or(Decode::NeedMore)?;
        let s = self.bytes.get(self.at..end).ok_or(Decode::NeedMore)?;
        self.at = end;
        Ok(s)
    }
}

impl<R: Read> RankReader<R> {
    /// Reads the header. `rank` (when known from the file name) labels errors.
    pub fn new(input: R, rank: Option<u32>) -> Result<Self, TraceError> {
        let mut reader = RankReader {
            input,
            buf: vec![0; CHUNK],
            pos: 0,
            len: 0,
            base: 0,
            eof: false,
            header: Header {
                version: 0,
                rank: 0,
                n_ranks: 0,
                pid: 0,
                start_unix_ns: 0,
                host: String::new(),
                mpi_library: String::new(),
            },
            prev_end: 0,
            n_events: 0,
            completion: None,
            objects: Vec::new(),
            sites: Vec::new(),
            callers: Vec::new(),
            comms: BTreeMap::new(),
            memory: None,
            clock: None,
            poll_ps: None,
            crc: crc32fast::Hasher::new(),
            hashed: 0,
            block_from: 0,
            end_seen: None,
        };
        let err = |offset: u64, kind| TraceError { rank, offset, kind };
        // The magic and version come first so a newer format is told apart from garbage.
        reader.fill_at_least(12).map_err(|k| err(0, k))?;
        if reader.len < 8 || &reader.buf[..8] != format::MAGIC {
            return Err(err(0, TraceErrorKind::BadMagic));
        }
        if reader.len < 12 {
            return Err(err(reader.len as u64, TraceErrorKind::TruncatedHeader));
        }
        let version = u16::from_le_bytes([reader.buf[8], reader.buf[9]]);
        if !(format::MIN_VERSION..=format::VERSION).contains(&version) {
            return Err(err(
                8,
                TraceErrorKind::UnsupportedVersion { found: version },
            ));
        }
        let header_len = usize::from(u16::from_le_bytes([reader.buf[10], reader.buf[11]]));
        reader.fill_at_least(header_len).map_err(|k| err(0, k))?;
        if reader.len < header_len {
            return Err(err(reader.len as u64, TraceErrorKind::TruncatedHeader));
        }
        let h = &reader.buf[..header_len];
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(h.get(at..at + 4)?.try_into().ok()?))
        };
        let bad = |what| err(12, TraceErrorKind::BadHeader(what));
        let file_rank = u32_at(12).ok_or_else(|| bad("too short"))?;
        let n_ranks = u32_at(16).ok_or_else(|| bad("too short"))?;
        let pid = u32_at(20).ok_or_else(|| bad("too short"))?;
        let start_unix_ns = h
            .get(24..32)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| bad("too short"))?;
        let mut at = 32;
        let mut string = || -> Option<String> {
            let n = usize::from(u16::from_le_bytes(h.get(at..at + 2)?.try_into().ok()?));
            let s = String::from_utf8_lossy(h.get(at + 2..at + 2 + n)?).into_owned();
            at += 2 + n;
            Some(s)
        };
        let host = string().ok_or_else(|| bad("host name runs past the header"))?;
        let mpi_library = string().ok_or_else(|| bad("library name runs past the header"))?;
        if file_rank >= n_ranks {
            return Err(bad("rank is not below the number of ranks"));
        }
        if n_ranks > format::MAX_RANKS {
            return Err(bad("number of ranks above 1048576"));
        }
        if let Some(r) = rank {
            if r != file_rank {
                return Err(bad("rank in the header differs from the file name"));
            }
        }
        reader.header = Header {
            version,
            rank: file_rank,
            n_ranks,
            pid,
            start_unix_ns,
            host,
            mpi_library,
        };
        reader.pos = header_len;
        Ok(reader)
    }

    pub fn header(&self) -> &Header {
        &self.header
    }
    /// The call site with id `id`, when it was defined before the current event.
    pub fn site(&self, id: u64) -> Option<&Site> {
        self.sites.get(usize::try_from(id).ok()?.checked_sub(1)?)
    }
    pub fn object(&self, id: u64) -> Option<&Object> {
        self.objects.get(usize::try_from(id).ok()?.checked_sub(1)?)
    }
    pub fn objects(&self) -> &[Object] {
        &self.objects
    }
    pub fn sites(&self) -> &[Site] {
        &self.sites
    }
    /// The callers of call site `id`, innermost first: empty unless the trace was taken
    /// with a stack depth above 1 (format version 11).
    pub fn callers(&self, id: u64) -> &[Site] {
        usize::try_from(id)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| self.callers.get(i))
            .map_or(&[], Vec::as_slice)
    }
    pub fn comm(&self, id: u64) -> Option<&Comm> {
        self.comms.get(&id)
    }
    pub fn comms(&self) -> &BTreeMap<u64, Comm> {
        &self.comms
    }
    /// The memory record, once read (it comes just before the end record; version 3).
    pub fn memory(&self) -> Option<Memory> {
        self.memory
    }
    /// The clock record (version 6; it follows the header): `None` in older files, which
    /// measured wall time only.
    pub fn clock(&self) -> Option<Clock> {
        self.clock
    }
    /// The poll record (version 10; it follows the clock record): what one failed
    /// `MPI_Test` cost the rank, in picoseconds (see [`format::POLL_SINCE`]); `None` in
    /// older files and where the tracer did not measure it.
    pub fn poll_ps(&self) -> Option<u64> {
        self.poll_ps.filter(|&ps| ps > 0)
    }
    /// How the file ended; `None` until [`RankReader::next_event`] returned `Ok(false)`.
    pub fn completion(&self) -> Option<Completion> {
        self.completion
    }
    /// Events read so far.
    pub fn n_events(&self) -> u64 {
        self.n_events
    }

    fn error(&self, at: usize, kind: TraceErrorKind) -> TraceError {
        TraceError {
            rank: Some(self.header.rank),
            offset: self.base + at as u64,
            kind,
        }
    }

    /// Makes at least `n` unread bytes available unless the input ends first.
    fn fill_at_least(&mut self, n: usize) -> Result<(), TraceErrorKind> {
        if self.pos > 0 && self.pos + n > self.buf.len() {
            // Bytes read go into the block's checksum before they leave the buffer.
            if self.hashed < self.pos && self.header.version >= format::CHECKSUM_SINCE {
                self.crc.update(&self.buf[self.hashed..self.pos]);
            }
            self.hashed = self.hashed.saturating_sub(self.pos);
            self.buf.copy_within(self.pos..self.len, 0);
            self.base += self.pos as u64;
            self.len -= self.pos;
            self.pos = 0;
        }
        if n > self.buf.len() {
            self.buf.resize(n.next_power_of_two(), 0);
        }
        while self.len - self.pos < n && !self.eof {
            match self.input.read(&mut self.buf[self.len..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.len += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TraceErrorKind::Io(e.to_string())),
            }
        }
        Ok(())
    }

    /// Reads the next event into `ev` (definition records on the way update the tables).
    /// Returns `Ok(false)` at the end of the file; then [`RankReader::completion`] says
    /// whether the rank finished.
    pub fn next_event(&mut self, ev: &mut Event) -> Result<bool, TraceError> {
        loop {
            if self.completion.is_some() {
                return Ok(false);
            }
            let parsed = self.parse_record(ev);
            match parsed {
                Ok(Some(consumed)) => {
                    self.pos += consumed;
                    return Ok(true);
                }
                Ok(None) => continue,
                Err(Decode::Bad(kind, at)) => return Err(self.error(self.pos + at, kind)),
                Err(Decode::NeedMore) => {
                    let have = self.len - self.pos;
                    if self.eof {
                        if have == 0 {
                            self.completion = Some(Completion::Incomplete {
                                valid_bytes: self.base + self.pos as u64,
                                trailing_bytes: 0,
                            });
                        } else {
                            self.completion = Some(Completion::Incomplete {
                                valid_bytes: self.base + self.pos as u64,
                                trailing_bytes: have as u64,
                            });
                        }
                        return Ok(false);
                    }
                    self.fill_at_least(have + CHUNK)
                        .map_err(|k| self.error(self.pos, k))?;
                }
            }
        }
    }

    /// Which value of `ev` cannot be what it claims, with the offset of its field in the
    /// record: communicators and call sites never defined, ranks that are no rank of
    /// the run (nor listed by the event's communicator, an intercommunicator to spawned
    /// processes), sizes over 1 PiB. Off the common path: called only when a quick test
    /// of the event's values leaves one in doubt.
    #[cold]
    #[inline(never)]
    fn value_fault(&self, ev: &Event, at: &FieldsAt) -> Option<(TraceErrorKind, usize)> {
        let fault =
            |field, problem: String, at| Some((TraceErrorKind::BadValue { field, problem }, at));
        for (field, id, at) in [
            ("comm", ev.comm, at.comm),
            ("newcomm", ev.newcomm, at.newcomm),
        ] {
            if let Some(id) = id {
                if id > 1 && !self.comms.contains_key(&id) {
                    return fault(field, format!("communicator {id} is not defined"), at);
                }
            }
        }
        let n_ranks = i64::from(self.header.n_ranks);
        for (field, r, at) in [
            ("peer", ev.peer, at.peer),
            ("root", ev.root, at.root),
            ("src", ev.src, at.src),
        ] {
            if let Some(r) = r {
                let listed = ev
                    .comm
                    .and_then(|id| self.comms.get(&id))
                    .is_some_and(|c| c.world_ranks.contains(&r));
                if !(-2..n_ranks).contains(&r) && !listed {
                    return fault(
                        field,
                        format!("{r} is not a rank of this {}-rank run", self.header.n_ranks),
                        at,
                    );
                }
            }
        }
        for (field, b, at) in [
            ("bytes", ev.bytes, at.bytes),
            ("rbytes", ev.rbytes, at.rbytes),
        ] {
            if let Some(b) = b {
                if b > format::MAX_EVENT_BYTES {
                    return fault(
                        field,
                        format!("{b} bytes is more than 1 PiB in one call"),
                        at,
                    );
                }
            }
        }
        None
    }

    /// The file ends at `pos + at` (nothing may follow the end record and, from version
    /// 8, its checksum): completes it, or refuses the data after it.
    fn finish_after_end(&mut self, done: Completion, at: usize) -> DResult<()> {
        let mut probe = [0u8; 1];
        let more = self.len > self.pos + at
            || (!self.eof && matches!(self.input.read(&mut probe), Ok(k) if k > 0));
        if more {
            return Err(Decode::Bad(TraceErrorKind::DataAfterEnd, at));
        }
        self.pos += at;
        self.completion = Some(done);
        Ok(())
    }

    /// Parses one record at `pos`. An event fills `ev` and returns the bytes it used; a
    /// definition record is applied, consumed and gives `Ok(None)`.
    #[inline]
    /// A record that comes at most once, before the first event (the clock and poll
    /// records): corrupt when `seen` already or after an event.
    fn once_before_events(&self, seen: bool, what: &'static str) -> DResult<()> {
        if seen || self.n_events > 0 {
            return Err(Decode::Bad(TraceErrorKind::BadRecord(what), 0));
        }
        Ok(())
    }

    fn parse_record(&mut self, ev: &mut Event) -> DResult<Option<usize>> {
        let mut c = Cursor {
            bytes: &self.buf[self.pos..self.len],
            at: 0,
        };
        let tag = c.byte()?;
        match tag {
            format::R_OBJECT => {
                let id = c.varint()?;
                let bias = c.varint()?;
                let n = c.varint()?;
                let path = std::str::from_utf8(c.take(n)?)
                    .map_err(|_| Decode::Bad(TraceErrorKind::BadString, 0))?
                    .to_owned();
                if id != self.objects.len() as u64 + 1 {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadRecord("object ids out of order"),
                        0,
                    ));
                }
                self.objects.push(Object { path, bias });
                self.pos += c.at;
                Ok(None)
            }
            format::R_SITE => {
                let id = c.varint()?;
                let object = c.varint()?;
                let addr = c.varint()?;
                if id != self.sites.len() as u64 + 1 {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadRecord("call-site ids out of order"),
                        0,
                    ));
                }
                if object > self.objects.len() as u64 {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadValue {
                            field: "object",
                            problem: format!("object {object} is not defined"),
                        },
                        0,
                    ));
                }
                self.sites.push(Site { object, addr });
                self.callers.push(Vec::new());
                self.pos += c.at;
                Ok(None)
            }
            format::R_COMM => {
                let id = c.varint()?;
                let n = c.varint()?;
                let mut world_ranks = Vec::new();
                for _ in 0..n {
                    world_ranks.push(c.zigzag()?);
                }
                let mut grid = Vec::new();
                if self.header.version >= format::GRID_SINCE {
                    let ndims = c.varint()?;
                    if ndims > format::MAX_GRID_DIMS {
                        return Err(Decode::Bad(
                            TraceErrorKind::BadRecord("a grid of more than 64 dimensions"),
                            0,
                        ));
                    }
                    for _ in 0..ndims {
                        let d = c.varint()?;
                        grid.push((d >> 1, d & 1 == 1));
                    }
                    let product = grid
                        .iter()
                        .try_fold(1u64, |acc, (d, _)| acc.checked_mul(*d));
                    if ndims > 0 && product != Some(n) {
                        return Err(Decode::Bad(
                            TraceErrorKind::BadRecord(
                                "a communicator's grid does not have its number of ranks",
                            ),
                            0,
                        ));
                    }
                }
                self.comms.insert(id, Comm { world_ranks, grid });
                self.pos += c.at;
                Ok(None)
            }
            format::R_MEMORY if self.header.version >= format::MEMORY_SINCE => {
                let memory = Memory {
                    working_set: c.varint()?,
                    probe_bytes: c.varint()?,
                    probe_rate: c.varint()?,
                };
                if self.memory.is_some() {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadRecord("a second memory record"),
                        0,
                    ));
                }
                self.memory = Some(memory);
                self.pos += c.at;
                Ok(None)
            }
            format::R_CLOCK if self.header.version >= format::CLOCK_SINCE => {
                let source = c.varint()?;
                let errno = c.varint()?;
                let clock = match source {
                    0 => Clock::Wall { errno },
                    1 => Clock::OffCpu,
                    _ => {
                        return Err(Decode::Bad(
                            TraceErrorKind::BadRecord("a clock record of an unknown source"),
                            0,
                        ));
                    }
                };
                self.once_before_events(
                    self.clock.is_some(),
                    "a clock record after the first event",
                )?;
                self.clock = Some(clock);
                self.pos += c.at;
                Ok(None)
            }
            format::R_POLL if self.header.version >= format::POLL_SINCE => {
                let ps = c.varint()?;
                if ps > format::MAX_POLL_PS {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadRecord("a poll record of more than a second"),
                        0,
                    ));
                }
                self.once_before_events(
                    self.poll_ps.is_some(),
                    "a poll record after the first event",
                )?;
                self.poll_ps = Some(ps);
                self.pos += c.at;
                Ok(None)
            }
            format::R_CALLERS if self.header.version >= format::CALLERS_SINCE => {
                let id = c.varint()?;
                let n = c.varint()?;
                if id == 0 || id != self.sites.len() as u64 {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadRecord(
                            "a callers record that does not follow its call site",
                        ),
                        0,
                    ));
                }
                if n == 0 || n > format::MAX_CALLERS {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadValue {
                            field: "callers",
                            problem: format!("{n} callers (1 to {})", format::MAX_CALLERS),
                        },
                        0,
                    ));
                }
                let mut frames = Vec::new();
                for _ in 0..n {
                    let object = c.varint()?;
                    let addr = c.varint()?;
                    if object > self.objects.len() as u64 {
                        return Err(Decode::Bad(
                            TraceErrorKind::BadValue {
                                field: "object",
                                problem: format!("object {object} is not defined"),
                            },
                            0,
                        ));
                    }
                    frames.push(Site { object, addr });
                }
                let slot = &mut self.callers[id as usize - 1];
                if !slot.is_empty() {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadRecord("a second callers record of one call site"),
                        0,
                    ));
                }
                *slot = frames;
                self.pos += c.at;
                Ok(None)
            }
            format::R_CHECKSUM if self.header.version >= format::CHECKSUM_SINCE => {
                let stored = u32::from_le_bytes(
                    c.take(4)?
                        .try_into()
                        .map_err(|_| Decode::Bad(TraceErrorKind::BadRecord("checksum"), 0))?,
                );
                // The block runs to the tag, which it includes.
                let tag_end = self.pos + 1;
                if self.hashed < tag_end {
                    self.crc.update(&self.buf[self.hashed..tag_end]);
                }
                let computed = std::mem::take(&mut self.crc).finalize();
                if computed != stored {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadChecksum {
                            from: self.block_from,
                            stored,
                            computed,
                        },
                        0,
                    ));
                }
                self.pos += c.at;
                self.hashed = self.pos;
                self.block_from = self.base + self.pos as u64;
                if let Some(done) = self.end_seen.take() {
                    self.finish_after_end(done, 0)?;
                }
                Ok(None)
            }
            _ if self.end_seen.is_some() => Err(Decode::Bad(TraceErrorKind::MissingChecksum, 0)),
            format::R_END => {
                let end_ns = c.varint()?;
                let n_events = c.varint()?;
                let at = c.at;
                if end_ns > format::MAX_TIME_NS {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadValue {
                            field: "end time",
                            problem: format!("{end_ns} ns is past 10^18 ns (31.7 years)"),
                        },
                        1,
                    ));
                }
                if n_events != self.n_events {
                    return Err(Decode::Bad(
                        TraceErrorKind::EventCountMismatch {
                            recorded: n_events,
                            read: self.n_events,
                        },
                        0,
                    ));
                }
                let done = Completion::Complete { end_ns, n_events };
                if self.header.version >= format::CHECKSUM_SINCE {
                    // Its block's checksum follows, then nothing.
                    self.pos += at;
                    self.end_seen = Some(done);
                    return Ok(None);
                }
                self.finish_after_end(done, at)?;
                Ok(None)
            }
            code => {
                let op = Op::from_code(code)
                    .filter(|op| op.since_version() <= self.header.version)
                    .ok_or(Decode::Bad(TraceErrorKind::UnknownRecord(code), 0))?;
                let mask = c.varint()?;
                let all = if self.header.version >= format::ANY_SOURCE_SINCE {
                    field::ALL
                } else if self.header.version >= format::POLLS_SINCE {
                    field::ALL_V8
                } else if self.header.version >= format::CLOCK_SINCE {
                    field::ALL_V6
                } else {
                    field::ALL_V5
                };
                if mask & !all != 0 {
                    return Err(Decode::Bad(TraceErrorKind::UnknownFields(mask & !all), 1));
                }
                let gap_at = c.at;
                let gap = c.varint()?;
                let dur_at = c.at;
                let dur = c.varint()?;
                let bad = |field, problem: String, at| {
                    Err(Decode::Bad(TraceErrorKind::BadValue { field, problem }, at))
                };
                ev.op = op;
                let site_at = c.at;
                ev.site = c.varint()?;
                if ev.site > self.sites.len() as u64 {
                    return bad(
                        "site",
                        format!("call site {} is not defined", ev.site),
                        site_at,
                    );
                }
                let peer_at = c.at;
                ev.peer = if mask & field::PEER != 0 {
                    Some(c.zigzag()?)
                } else {
                    None
                };
                ev.tag = if mask & field::TAG != 0 {
                    Some(c.zigzag()?)
                } else {
                    None
                };
                let bytes_at = c.at;
                ev.bytes = if mask & field::BYTES != 0 {
                    Some(c.varint()?)
                } else {
                    None
                };
                let comm_at = c.at;
                ev.comm = if mask & field::COMM != 0 {
                    Some(c.varint()?)
                } else {
                    None
                };
                ev.req = if mask & field::REQ != 0 {
                    Some(c.varint()?)
                } else {
                    None
                };
                ev.reqs.clear();
                if mask & field::REQS != 0 {
                    let n = c.varint()?;
                    for _ in 0..n {
                        let id = c.varint()?;
                        ev.reqs.push(id);
                    }
                }
                let root_at = c.at;
                ev.root = if mask & field::ROOT != 0 {
                    Some(c.zigzag()?)
                } else {
                    None
                };
                let src_at = c.at;
                ev.src = if mask & field::SRC != 0 {
                    Some(c.zigzag()?)
                } else {
                    None
                };
                ev.rtag = if mask & field::RTAG != 0 {
                    Some(c.zigzag()?)
                } else {
                    None
                };
                let rbytes_at = c.at;
                ev.rbytes = if mask & field::RBYTES != 0 {
                    Some(c.varint()?)
                } else {
                    None
                };
                let newcomm_at = c.at;
                ev.newcomm = if mask & field::NEWCOMM != 0 {
                    Some(c.varint()?)
                } else {
                    None
                };
                ev.flag = if mask & field::FLAG != 0 {
                    Some(c.varint()?)
                } else {
                    None
                };
                ev.off_cpu_ns = if mask & field::OFF_CPU != 0 {
                    c.varint()?
                } else {
                    0
                };
                if ev.off_cpu_ns > gap {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadRecord("an event off the CPU longer than its gap"),
                        0,
                    ));
                }
                ev.polls = if mask & field::POLLS != 0 {
                    c.varint()?
                } else {
                    0
                };
                ev.any_source = mask & field::ANY_SOURCE != 0;
                if ev.any_source
                    && !(matches!(
                        ev.op,
                        Op::Recv | Op::Probe | Op::Sendrecv | Op::SendrecvReplace
                    ) || (ev.op == Op::Iprobe && ev.flag == Some(1)))
                {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadRecord(
                            "field any_source: only a receive or probe that matched a message was posted with MPI_ANY_SOURCE",
                        ),
                        0,
                    ));
                }
                if mask & field::POLLS != 0 && (ev.polls < 2 || !ev.is_failed_poll()) {
                    return Err(Decode::Bad(
                        TraceErrorKind::BadRecord(
                            "field polls: a run of polls is at least 2 failed tests or probes",
                        ),
                        0,
                    ));
                }
                // Values, now that the record is whole (a record cut off is not corrupt):
                // integer compares on the common path, the tables only for what they
                // leave in doubt.
                let n_ranks = i64::from(self.header.n_ranks);
                let rank = |r: Option<i64>| r.is_none_or(|r| (-2..n_ranks).contains(&r));
                let size = |b: Option<u64>| b.is_none_or(|b| b <= format::MAX_EVENT_BYTES);
                let comm = |c: Option<u64>| c.is_none_or(|c| c <= 1);
                if !(comm(ev.comm)
                    && comm(ev.newcomm)
                    && rank(ev.peer)
                    && rank(ev.root)
                    && rank(ev.src)
                    && size(ev.bytes)
                    && size(ev.rbytes))
                {
                    let at = FieldsAt {
                        peer: peer_at,
                        bytes: bytes_at,
                        comm: comm_at,
                        root: root_at,
                        src: src_at,
                        rbytes: rbytes_at,
                        newcomm: newcomm_at,
                    };
                    if let Some((kind, at)) = self.value_fault(ev, &at) {
                        return Err(Decode::Bad(kind, at));
                    }
                }
                let start = self
                    .prev_end
                    .checked_add(gap)
                    .filter(|t| *t <= format::MAX_TIME_NS);
                let Some(start_ns) = start else {
                    return bad(
                        "gap",
                        format!(
                            "{gap} ns after {} ns puts the event past 10^18 ns (31.7 years)",
                            self.prev_end
                        ),
                        gap_at,
                    );
                };
                let Some(end_ns) = start_ns
                    .checked_add(dur)
                    .filter(|t| *t <= format::MAX_TIME_NS)
                else {
                    return bad(
                        "duration",
                        format!("{dur} ns from {start_ns} ns ends past 10^18 ns (31.7 years)"),
                        dur_at,
                    );
                };
                ev.start_ns = start_ns;
                ev.end_ns = end_ns;
                self.prev_end = ev.end_ns;
                self.n_events += 1;
                Ok(Some(c.at))
            }
        }
    }
}

impl<R: Read> Iterator for RankReader<R> {
    type Item = Result<Event, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        let mut ev = Event::default();
        match self.next_event(&mut ev) {
            Ok(true) => Some(Ok(ev)),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}
