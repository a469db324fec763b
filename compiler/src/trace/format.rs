//! The perfskel trace format, version 11 (reads versions 1 to 10 too): takes nothing, gives the constants shared with
//! the C tracer (`runtime/tracer/core.inc`) — magic, version, record tags, field bits and
//! operation codes. `runtime/tracer/FORMAT.md` describes the layout in prose.

/// First 8 bytes of every rank file.
pub const MAGIC: &[u8; 8] = b"PSKTRACE";
/// The format version the tracer writes.
pub const VERSION: u16 = 11;
/// The oldest version this reader reads. Version 1 lacks operation codes 72–75
/// (`MPI_Ireduce_scatter`, `MPI_Ireduce_scatter_block`, `MPI_Iscan`, `MPI_Iexscan`) and
/// is otherwise the same, so a version-1 file reads as it always did. Version 3 added
/// the memory record ([`R_MEMORY`]); older files have none. Version 4 added the
/// one-sided and intercommunicator operations (codes 90–116). Version 5 added the
/// Cartesian grid of a communicator to its record ([`GRID_SINCE`]) and `MPI_Cancel`
/// (code 117). Version 6 added the clock record ([`R_CLOCK`]) and the off-CPU field
/// ([`field::OFF_CPU`]). Version 7 added the polls field ([`field::POLLS`]): one
/// record for a run of failed tests or probes. Version 8 added the checksum record
/// ([`R_CHECKSUM`]) at the end of every block the tracer wrote. Version 9 added the
/// any-source bit ([`field::ANY_SOURCE`]): a receive posted with `MPI_ANY_SOURCE` whose
/// peer is the source it matched. Version 10 added the poll record ([`R_POLL`]): what a
/// failed `MPI_Test` costs on the rank, measured in a loop of such calls when MPI started.
/// Version 11 added the callers record ([`R_CALLERS`]): a call site's callers, where the
/// trace was taken with a stack depth above 1.
pub const MIN_VERSION: u16 = 1;
/// File name of rank `r` inside a trace directory.
pub fn rank_file_name(rank: u32) -> String {
    format!("rank-{rank:05}.pst")
}
/// File name of the manifest inside a trace directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The most ranks a trace may have (a header or manifest above it is corrupt): every
/// command keeps state per rank.
pub const MAX_RANKS: u32 = 1 << 20;
/// The most bytes one event may move in one direction (1 PiB): more than any machine's
/// memory; a larger count is a corrupt field.
pub const MAX_EVENT_BYTES: u64 = 1 << 50;
/// The latest time an event may start or end, ns after the start of `MPI_Init`
/// (10^18 ns, about 31.7 years: the `app_time` bound `perfskel check` enforces); a later
/// one is a corrupt gap or duration.
pub const MAX_TIME_NS: u64 = 1_000_000_000_000_000_000;
/// The largest manifest read (a few hundred bytes per rank at [`MAX_RANKS`]).
pub const MAX_MANIFEST_BYTES: u64 = 512 << 20;

/// Record tags that are not events (events start with their operation code, < 0x80).
pub const R_OBJECT: u8 = 0xF0;
pub const R_SITE: u8 = 0xF1;
pub const R_COMM: u8 = 0xF2;
/// Version 3: the rank's working set and the memory probe's rate over it.
pub const R_MEMORY: u8 = 0xF3;
/// Version 6: how the tracer told compute from waiting for a core (see [`Clock`]).
pub const R_CLOCK: u8 = 0xF4;
/// Version 8: the CRC-32 of the block before it (see [`CHECKSUM_SINCE`]).
pub const R_CHECKSUM: u8 = 0xF5;
/// Version 10: what one failed `MPI_Test` costs on the rank (see [`POLL_SINCE`]).
pub const R_POLL: u8 = 0xF6;
/// Version 11: the return addresses of a call site's callers (see [`CALLERS_SINCE`]).
pub const R_CALLERS: u8 = 0xF7;
pub const R_END: u8 = 0xFF;
/// The first version with [`R_CHECKSUM`]: each write of the tracer's buffer ends with
/// one, `u32` little-endian CRC-32 (IEEE, zlib's) of every byte from the end of the
/// previous checksum record (or the file's start) up to and including its own tag; the
/// end record is followed by one, the file's last bytes.
pub const CHECKSUM_SINCE: u16 = 8;
/// The first version with [`R_CLOCK`] and [`field::OFF_CPU`].
pub const CLOCK_SINCE: u16 = 6;
/// The first version with [`field::POLLS`].
pub const POLLS_SINCE: u16 = 7;
/// The first version with [`R_POLL`]: `varint picoseconds`, the time of one failed
/// `MPI_Test` of a receive posted on `MPI_COMM_SELF` (the poll a skeleton makes), in a
/// loop of such calls timed as a whole once `MPI_Init` returned (0: not measured). It
/// follows the clock record, before any event, at most once. The runs of failed polls
/// time one call in 64, and that call also waits for the work before it (the cache
/// misses of a loop like HPCC's RandomAccess): 32 ns where the calls cost 12 to 16 ns
/// between two reads of the clock. Skeletonize keeps this cost per poll and counts the
/// rest of the run's duration as the application's compute, for polls that stay in user
/// space (`skeletonize::source::split_poll`).
pub const POLL_SINCE: u16 = 10;
/// The first version with [`R_CALLERS`]: `varint site id` (the site defined just before
/// it), `varint n` (1 to [`MAX_CALLERS`]), `n` × (`varint object id`, `varint return
/// address`), innermost caller first: a trace taken with `PERFSKEL_STACK_DEPTH` above 1
/// (`perfskel record --stack-depth`, mpiP's call-site stack depth) names a call site by
/// its return address and those of its callers.
pub const CALLERS_SINCE: u16 = 11;
/// The most callers a site may have (stack depth 8).
pub const MAX_CALLERS: u64 = 7;
/// The most a failed poll may cost in a poll record (1 s, in ps); more is corrupt.
pub const MAX_POLL_PS: u64 = 1_000_000_000_000;
/// The first version with [`field::ANY_SOURCE`].
pub const ANY_SOURCE_SINCE: u16 = 9;
/// The first version with [`R_MEMORY`].
pub const MEMORY_SINCE: u16 = 3;
/// The first version whose communicator records end with the communicator's Cartesian
/// grid (`varint ndims`, then per dimension `varint (size << 1 | periodic)`).
pub const GRID_SINCE: u16 = 5;
/// The most dimensions a recorded grid may have.
pub const MAX_GRID_DIMS: u64 = 64;

/// Field bits of an event's mask; present fields follow the fixed part in this order.
pub mod field {
    pub const PEER: u64 = 1 << 0;
    pub const TAG: u64 = 1 << 1;
    pub const BYTES: u64 = 1 << 2;
    pub const COMM: u64 = 1 << 3;
    pub const REQ: u64 = 1 << 4;
    pub const REQS: u64 = 1 << 5;
    pub const ROOT: u64 = 1 << 6;
    pub const SRC: u64 = 1 << 7;
    pub const RTAG: u64 = 1 << 8;
    pub const RBYTES: u64 = 1 << 9;
    pub const NEWCOMM: u64 = 1 << 10;
    pub const FLAG: u64 = 1 << 11;
    /// Version 6: ns of the gap before the event the rank spent off its core.
    pub const OFF_CPU: u64 = 1 << 12;
    /// Version 7: the event stands for this many (at least 2) failed polls in a row.
    pub const POLLS: u64 = 1 << 13;
    /// Version 9, the bit alone (no payload): a receive (`MPI_Recv`, `MPI_Probe`, a
    /// successful `MPI_Iprobe`, the receive half of a sendrecv) posted with
    /// `MPI_ANY_SOURCE`; its peer (`src` for a sendrecv) is the source it matched.
    pub const ANY_SOURCE: u64 = 1 << 14;
    /// Every bit this version defines.
    pub const ALL: u64 = (1 << 15) - 1;
    /// Every bit versions 7 and 8 define.
    pub const ALL_V8: u64 = (1 << 14) - 1;
    /// Every bit version 6 defines.
    pub const ALL_V6: u64 = (1 << 13) - 1;
    /// Every bit versions 1 to 5 define.
    pub const ALL_V5: u64 = (1 << 12) - 1;
}

/// Peer value of `MPI_PROC_NULL` (peers are world ranks otherwise).
pub const PEER_PROC_NULL: i64 = -1;
/// Peer value of `MPI_ANY_SOURCE`.
pub const PEER_ANY_SOURCE: i64 = -2;
/// Tag value of `MPI_ANY_TAG`.
pub const TAG_ANY: i64 = -1;

/// What kind of MPI operation an event is, for grouping in statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpClass {
    Lifecycle,
    PointToPoint,
    Completion,
    Collective,
    Communicator,
    /// One-sided communication (windows, their synchronization, put/get & co.):
    /// recorded, not modelled.
    OneSided,
}

macro_rules! ops {
    ($($name:ident = $code:literal, $mpi:literal, $class:ident;)*) => {
        /// An MPI operation recorded by the tracer (`Default` is `Init`, for placeholders).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Op {
            #[default]
            $($name,)*
        }

        impl Op {
            /// The operation with wire code `code`, if this version defines it.
            #[inline]
            pub fn from_code(code: u8) -> Option<Op> {
                match code { $($code => Some(Op::$name),)* _ => None }
            }
            /// The wire code.
            pub fn code(self) -> u8 {
                match self { $(Op::$name => $code,)* }
            }
            /// The MPI routine's name, e.g. `MPI_Send`.
            pub fn mpi_name(self) -> &'static str {
                match self { $(Op::$name => $mpi,)* }
            }
            /// The operation's kind.
            pub fn class(self) -> OpClass {
                match self { $(Op::$name => OpClass::$class,)* }
            }
            /// Every operation, in code order.
            pub const ALL: &'static [Op] = &[$(Op::$name,)*];
        }
    };
}

ops! {
    Init = 1, "MPI_Init", Lifecycle;
    InitThread = 2, "MPI_Init_thread", Lifecycle;
    Finalize = 3, "MPI_Finalize", Lifecycle;
    Abort = 4, "MPI_Abort", Lifecycle;
    Send = 10, "MPI_Send", PointToPoint;
    Bsend = 11, "MPI_Bsend", PointToPoint;
    Ssend = 12, "MPI_Ssend", PointToPoint;
    Rsend = 13, "MPI_Rsend", PointToPoint;
    Isend = 14, "MPI_Isend", PointToPoint;
    Ibsend = 15, "MPI_Ibsend", PointToPoint;
    Issend = 16, "MPI_Issend", PointToPoint;
    Irsend = 17, "MPI_Irsend", PointToPoint;
    Recv = 18, "MPI_Recv", PointToPoint;
    Irecv = 19, "MPI_Irecv", PointToPoint;
    Sendrecv = 20, "MPI_Sendrecv", PointToPoint;
    SendrecvReplace = 21, "MPI_Sendrecv_replace", PointToPoint;
    Probe = 22, "MPI_Probe", PointToPoint;
    Iprobe = 23, "MPI_Iprobe", PointToPoint;
    Wait = 30, "MPI_Wait", Completion;
    Waitall = 31, "MPI_Waitall", Completion;
    Waitany = 32, "MPI_Waitany", Completion;
    Waitsome = 33, "MPI_Waitsome", Completion;
    Test = 34, "MPI_Test", Completion;
    Testall = 35, "MPI_Testall", Completion;
    Testany = 36, "MPI_Testany", Completion;
    Testsome = 37, "MPI_Testsome", Completion;
    Barrier = 40, "MPI_Barrier", Collective;
    Bcast = 41, "MPI_Bcast", Collective;
    Reduce = 42, "MPI_Reduce", Collective;
    Allreduce = 43, "MPI_Allreduce", Collective;
    Gather = 44, "MPI_Gather", Collective;
    Gatherv = 45, "MPI_Gatherv", Collective;
    Scatter = 46, "MPI_Scatter", Collective;
    Scatterv = 47, "MPI_Scatterv", Collective;
    Allgather = 48, "MPI_Allgather", Collective;
    Allgatherv = 49, "MPI_Allgatherv", Collective;
    Alltoall = 50, "MPI_Alltoall", Collective;
    Alltoallv = 51, "MPI_Alltoallv", Collective;
    ReduceScatter = 52, "MPI_Reduce_scatter", Collective;
    ReduceScatterBlock = 53, "MPI_Reduce_scatter_block", Collective;
    Scan = 54, "MPI_Scan", Collective;
    Exscan = 55, "MPI_Exscan", Collective;
    Ibarrier = 60, "MPI_Ibarrier", Collective;
    Ibcast = 61, "MPI_Ibcast", Collective;
    Ireduce = 62, "MPI_Ireduce", Collective;
    Iallreduce = 63, "MPI_Iallreduce", Collective;
    Igather = 64, "MPI_Igather", Collective;
    Igatherv = 65, "MPI_Igatherv", Collective;
    Iscatter = 66, "MPI_Iscatter", Collective;
    Iscatterv = 67, "MPI_Iscatterv", Collective;
    Iallgather = 68, "MPI_Iallgather", Collective;
    Iallgatherv = 69, "MPI_Iallgatherv", Collective;
    Ialltoall = 70, "MPI_Ialltoall", Collective;
    Ialltoallv = 71, "MPI_Ialltoallv", Collective;
    IreduceScatter = 72, "MPI_Ireduce_scatter", Collective;
    IreduceScatterBlock = 73, "MPI_Ireduce_scatter_block", Collective;
    Iscan = 74, "MPI_Iscan", Collective;
    Iexscan = 75, "MPI_Iexscan", Collective;
    CommDup = 80, "MPI_Comm_dup", Communicator;
    CommSplit = 81, "MPI_Comm_split", Communicator;
    CommCreate = 82, "MPI_Comm_create", Communicator;
    CartCreate = 83, "MPI_Cart_create", Communicator;
    CartSub = 84, "MPI_Cart_sub", Communicator;
    CommFree = 85, "MPI_Comm_free", Communicator;
    WinCreate = 90, "MPI_Win_create", OneSided;
    WinAllocate = 91, "MPI_Win_allocate", OneSided;
    WinAllocateShared = 92, "MPI_Win_allocate_shared", OneSided;
    WinCreateDynamic = 93, "MPI_Win_create_dynamic", OneSided;
    WinFree = 94, "MPI_Win_free", OneSided;
    WinFence = 95, "MPI_Win_fence", OneSided;
    WinLock = 96, "MPI_Win_lock", OneSided;
    WinUnlock = 97, "MPI_Win_unlock", OneSided;
    WinLockAll = 98, "MPI_Win_lock_all", OneSided;
    WinUnlockAll = 99, "MPI_Win_unlock_all", OneSided;
    WinFlush = 100, "MPI_Win_flush", OneSided;
    WinFlushAll = 101, "MPI_Win_flush_all", OneSided;
    WinPost = 102, "MPI_Win_post", OneSided;
    WinStart = 103, "MPI_Win_start", OneSided;
    WinComplete = 104, "MPI_Win_complete", OneSided;
    WinWait = 105, "MPI_Win_wait", OneSided;
    Put = 106, "MPI_Put", OneSided;
    Get = 107, "MPI_Get", OneSided;
    Accumulate = 108, "MPI_Accumulate", OneSided;
    GetAccumulate = 109, "MPI_Get_accumulate", OneSided;
    FetchAndOp = 110, "MPI_Fetch_and_op", OneSided;
    CompareAndSwap = 111, "MPI_Compare_and_swap", OneSided;
    Rput = 112, "MPI_Rput", OneSided;
    Rget = 113, "MPI_Rget", OneSided;
    IntercommCreate = 114, "MPI_Intercomm_create", Communicator;
    IntercommMerge = 115, "MPI_Intercomm_merge", Communicator;
    CommSpawn = 116, "MPI_Comm_spawn", Communicator;
    Cancel = 117, "MPI_Cancel", Completion;
}

impl Op {
    /// The format version that introduced the operation: a file of an older version
    /// holding its code is corrupt.
    pub fn since_version(self) -> u16 {
        match self {
            Op::IreduceScatter | Op::IreduceScatterBlock | Op::Iscan | Op::Iexscan => 2,
            Op::Cancel => 5,
            op if op.code() >= 90 => 4,
            _ => 1,
        }
    }
}

impl Op {
    /// Whether the operation makes an intercommunicator (its new communicator, and
    /// what is made from that, hold the remote group).
    pub fn makes_intercomm(self) -> bool {
        matches!(self, Op::IntercommCreate | Op::CommSpawn)
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.mpi_name())
    }
}

/// The tracer (`runtime/tracer/core.inc`), this reader and the format's documentation
/// (`runtime/tracer/FORMAT.md`) must give every operation code the same routine.
#[cfg(test)]
mod codes_agree {
    use std::collections::BTreeMap;

    use super::Op;

    fn read(path: &str) -> String {
        let full = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
    }

    /// `OP_REDUCE_SCATTER_BLOCK` → `MPI_Reduce_scatter_block`.
    fn mpi_name(constant: &str) -> String {
        let rest = constant.trim_start_matches("OP_").to_lowercase();
        let mut chars = rest.chars();
        let first = chars.next().map(|c| c.to_ascii_uppercase());
        format!(
            "MPI_{}{}",
            first.map(String::from).unwrap_or_default(),
            chars.as_str()
        )
    }

    /// The tracer's `enum` of operation codes: explicit values, and one more than the
    /// previous constant where none is given.
    fn tracer_codes() -> BTreeMap<u8, String> {
        let header = read("runtime/tracer/core.inc");
        let start = header
            .find("OP_INIT = 1")
            .expect("core.inc names OP_INIT = 1");
        let end = start + header[start..].find("};").expect("the enum ends");
        let mut body = header[start..end].to_string();
        // Comments out.
        while let Some(a) = body.find("/*") {
            let b = a + body[a..].find("*/").expect("comment ends") + 2;
            body.replace_range(a..b, " ");
        }
        let mut codes = BTreeMap::new();
        let mut next = 0u8;
        for item in body.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, code) = match item.split_once('=') {
                Some((name, value)) => (name.trim(), value.trim().parse().expect("a number")),
                None => (item, next),
            };
            assert!(
                codes.insert(code, mpi_name(name)).is_none(),
                "code {code} twice in core.inc"
            );
            next = code + 1;
        }
        codes
    }

    /// The tables of FORMAT.md's "Operation codes" section: `| code | MPI_Name |` pairs.
    fn documented_codes() -> BTreeMap<u8, String> {
        let doc = read("runtime/tracer/FORMAT.md");
        let start = doc
            .find("### Operation codes")
            .expect("FORMAT.md has the section");
        let section = &doc[start..];
        let end = section[4..].find("\n## ").map_or(section.len(), |e| e + 4);
        let mut codes = BTreeMap::new();
        for line in section[..end].lines().filter(|l| l.starts_with('|')) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            for pair in cells.windows(2) {
                if let (Ok(code), name) = (pair[0].parse::<u8>(), pair[1]) {
                    let name = name.split_whitespace().next().unwrap_or_default();
                    if name.starts_with("MPI_") {
                        let old = codes.insert(code, name.to_string());
                        assert!(old.is_none(), "code {code} twice in FORMAT.md");
                    }
                }
            }
        }
        codes
    }

    #[test]
    fn the_tracer_the_reader_and_the_format_document_agree_on_every_code() {
        let reader: BTreeMap<u8, String> = Op::ALL
            .iter()
            .map(|op| (op.code(), op.mpi_name().to_string()))
            .collect();
        let tracer = tracer_codes();
        let documented = documented_codes();
        assert!(reader.len() > 90, "{} codes", reader.len());
        assert_eq!(
            tracer, reader,
            "core.inc (left) and trace/format.rs (right)"
        );
        assert_eq!(
            documented, reader,
            "FORMAT.md (left) and trace/format.rs (right)"
        );
    }
}
