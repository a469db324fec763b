//! `perfskel trace export --otf2 OUT TRACE`: a perfskel trace as an OTF2 archive (what
//! Vampir, Scalasca and `otf2-print` read), through `perfskel-otf2`.
//!
//! The mapping: rank r is location r, in a process location group of its own under a
//! system tree node per host; every call is an `Enter`/`Leave` of a region named after
//! the MPI routine (paradigm MPI), nested in a region for its call site (canonical name
//! `OBJECT+0xOFFSET`, the call site's key, so that the archive names the same call sites
//! the trace does); inside it OTF2's MPI records: `MpiSend`/`MpiIsend` at the start,
//! `MpiRecv` at the end, `MpiIrecvRequest` where a receive is posted and `MpiIrecv`
//! (with its source, tag and size) in the call that completes it, `MpiIsendComplete`
//! there for sends, `MpiCollectiveBegin`/`End` around collectives and communicator
//! constructors, `CommCreate` for the communicator made. What OTF2 has no record field
//! for travels in `perfskel::` uint64 attributes ([`perfskel_otf2::Attr`]): time off the
//! core, runs of failed polls, `MPI_ANY_SOURCE`, flags.
//!
//! Communicators: the tracer numbers them per rank; the archive's are global, one per
//! (members, how many earlier communicators of this rank have the same members), which
//! MPI's collective creation makes the same on every member rank.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use perfskel_compiler::trace::collect;
use perfskel_compiler::trace::format::{PEER_ANY_SOURCE, PEER_PROC_NULL};
use perfskel_compiler::trace::stats::SiteKey;
use perfskel_compiler::trace::{Event, Op, OpClass};
use perfskel_otf2::{collective_op, Attr, Def, Ev, EvKind, GroupKind, Writer, UNDEFINED_U64};

use crate::cmd_trace;

/// Location properties: a rank's memory record (working set, probe bytes, probe rate)
/// and poll record, as the trace has them.
pub const PROP_WORKING_SET: &str = "perfskel::working_set";
pub const PROP_PROBE_BYTES: &str = "perfskel::probe_bytes";
pub const PROP_PROBE_RATE: &str = "perfskel::probe_rate";
pub const PROP_POLL_PS: &str = "perfskel::poll_ps";
/// 1: the tracer measured each gap's time off the core (format 6's clock record).
pub const PROP_OFF_CPU_CLOCK: &str = "perfskel::off_cpu_clock";

/// What an export wrote.
pub struct Exported {
    pub ranks: u32,
    pub events: u64,
}

#[derive(Default)]
struct Strings(BTreeMap<String, u64>);

impl Strings {
    fn id(&mut self, s: &str) -> u64 {
        let next = self.0.len() as u64;
        *self.0.entry(s.to_string()).or_insert(next)
    }
}

#[derive(Default)]
struct Tables {
    strings: Strings,
    /// Region name → (id, MPI?).
    regions: BTreeMap<String, (u64, bool)>,
    /// (members, ordinal) → global communicator id.
    comms: BTreeMap<(Vec<i64>, usize), u64>,
}

impl Tables {
    fn region(&mut self, name: &str, mpi: bool) -> u64 {
        let next = self.regions.len() as u64;
        self.regions
            .entry(name.to_string())
            .or_insert((next, mpi))
            .0
    }
}

/// One rank's communicators: local id → (global id, members).
struct RankComms {
    local: BTreeMap<u64, (u64, Vec<i64>)>,
}

impl RankComms {
    fn global(
        &mut self,
        tables: &mut Tables,
        local: u64,
        members: Option<&Vec<i64>>,
    ) -> Option<(u64, &Vec<i64>)> {
        if !self.local.contains_key(&local) {
            let members = members?.clone();
            let ordinal = self.local.values().filter(|(_, m)| *m == members).count();
            let next = tables.comms.len() as u64;
            let id = *tables
                .comms
                .entry((members.clone(), ordinal))
                .or_insert(next);
            self.local.insert(local, (id, members));
        }
        self.local.get(&local).map(|(g, m)| (*g, m))
    }
}

/// The world ranks of communicator `id` of the rank `reader` reads.
fn members_of(reader: &cmd_trace::FileReader, id: u64) -> Option<Vec<i64>> {
    reader.comm(id).map(|c| c.world_ranks.clone())
}

fn comm_rank(members: &[i64], world: i64) -> Option<u32> {
    members
        .iter()
        .position(|&m| m == world)
        .and_then(|p| u32::try_from(p).ok())
}

/// Exports the trace in `trace` into a new archive `out/traces.otf2`.
pub fn export(trace: &Path, out: &Path) -> Result<Exported, String> {
    let manifest = cmd_trace::read_manifest(trace)?;
    let n_ranks = match &manifest {
        Some(m) => m.n_ranks,
        None => {
            let first = cmd_trace::open_rank(trace, 0)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("{}: no rank files and no manifest", trace.display()))?;
            first.header().n_ranks
        }
    };
    let mut tables = Tables::default();
    // Ids of the perfskel attributes: their index.
    let attr_ids: [u64; perfskel_otf2::N_ATTRS] = std::array::from_fn(|i| i as u64);
    let mut writer =
        Writer::create(out, "traces", &attr_ids).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut hosts: Vec<(u32, String)> = Vec::new();
    // Per rank: (property, value); per global communicator: its grid.
    let mut properties: Vec<(u32, &'static str, u64)> = Vec::new();
    let mut grids: BTreeMap<u64, Vec<(u64, bool)>> = BTreeMap::new();
    let mut first_ns = u64::MAX;
    let mut last_ns = 0u64;
    let mut events = 0u64;
    for rank in 0..n_ranks {
        let Some(mut reader) = cmd_trace::open_rank(trace, rank).map_err(|e| e.to_string())? else {
            continue;
        };
        let base = reader.header().start_unix_ns;
        hosts.push((rank, reader.header().host.clone()));
        let mut comms = RankComms {
            local: BTreeMap::new(),
        };
        let mut irecvs: BTreeMap<u64, (u32, u64, u32, u64, bool)> = BTreeMap::new();
        let mut isends: BTreeSet<u64> = BTreeSet::new();
        let mut ncolls: BTreeMap<u64, EvKind> = BTreeMap::new();
        let mut ev = Event::default();
        let loc = rank as u64;
        while reader.next_event(&mut ev).map_err(|e| e.to_string())? {
            events += 1;
            let start = base + ev.start_ns;
            let end = base + ev.end_ns.max(ev.start_ns);
            first_ns = first_ns.min(start);
            last_ns = last_ns.max(end);
            let site = collect::site_key(&reader, ev.site);
            let mut records: Vec<Ev> = Vec::new();
            let mut at_end: Vec<Ev> = Vec::new();
            let comm = ev.comm.unwrap_or(0);
            let global = comms
                .global(&mut tables, comm, members_of(&reader, comm).as_ref())
                .map(|(g, m)| (g, m.clone()));
            // A peer as a rank of the call's communicator: ANY_SOURCE and PROC_NULL are
            // OTF2's undefined, PROC_NULL marked by its attribute (see `mark`).
            let peer_in = |world: Option<i64>| -> Option<u32> {
                let (_, members) = global.as_ref()?;
                let w = world?;
                if w == PEER_PROC_NULL || w == PEER_ANY_SOURCE {
                    return Some(perfskel_otf2::UNDEFINED_U32);
                }
                comm_rank(members, w)
            };
            let mark = |record: Ev, world: Option<i64>| {
                if world == Some(PEER_PROC_NULL) {
                    record.with(Attr::ProcNull, 1)
                } else {
                    record
                }
            };
            let gcomm = global.as_ref().map(|(g, _)| *g);
            // MPI_ANY_TAG (and any tag that is no u32) as OTF2's undefined.
            let tag = |t: Option<i64>| {
                t.and_then(|t| u32::try_from(t).ok())
                    .unwrap_or(perfskel_otf2::UNDEFINED_U32)
            };
            // A send or receive record of `world` (a world rank, PROC_NULL or
            // ANY_SOURCE), none where the peer or the communicator is unknown.
            let message = |time: u64,
                           world: Option<i64>,
                           t: Option<i64>,
                           bytes: Option<u64>,
                           make: &dyn Fn(u32, u64, u32, u64) -> EvKind|
             -> Option<Ev> {
                let record = make(peer_in(world)?, gcomm?, tag(t), bytes.unwrap_or(0));
                Some(mark(Ev::new(time, record), world))
            };
            let send = |peer, comm, tag, bytes| EvKind::Send {
                peer,
                comm,
                tag,
                bytes,
            };
            let recv = |peer, comm, tag, bytes| EvKind::Recv {
                peer,
                comm,
                tag,
                bytes,
            };
            match ev.op {
                Op::Send | Op::Bsend | Op::Ssend | Op::Rsend => {
                    records.extend(message(start, ev.peer, ev.tag, ev.bytes, &send));
                }
                Op::Isend | Op::Ibsend | Op::Issend | Op::Irsend => {
                    if let Some(r) = ev.req {
                        let isend = |peer, comm, tag, bytes| EvKind::Isend {
                            peer,
                            comm,
                            tag,
                            bytes,
                            request: r,
                        };
                        if let Some(m) = message(start, ev.peer, ev.tag, ev.bytes, &isend) {
                            records.push(m);
                            isends.insert(r);
                        }
                    }
                }
                Op::Recv => at_end.extend(message(end, ev.peer, ev.tag, ev.bytes, &recv)),
                Op::Irecv => {
                    if let Some(r) = ev.req {
                        records.push(Ev::new(start, EvKind::IrecvRequest { request: r }));
                        if let (Some(p), Some(c)) = (peer_in(ev.peer), gcomm) {
                            let proc_null = ev.peer == Some(PEER_PROC_NULL);
                            irecvs.insert(r, (p, c, tag(ev.tag), ev.bytes.unwrap_or(0), proc_null));
                        }
                    }
                }
                Op::Sendrecv | Op::SendrecvReplace => {
                    records.extend(message(start, ev.peer, ev.tag, ev.bytes, &send));
                    at_end.extend(message(end, ev.src, ev.rtag, ev.rbytes, &recv));
                }
                _ if ev.op.class() == OpClass::Completion => {
                    for r in &ev.reqs {
                        if let Some((p, c, t, b, proc_null)) = irecvs.remove(r) {
                            let record = Ev::new(
                                end,
                                EvKind::Irecv {
                                    peer: p,
                                    comm: c,
                                    tag: t,
                                    bytes: b,
                                    request: *r,
                                },
                            );
                            at_end.push(if proc_null {
                                record.with(Attr::ProcNull, 1)
                            } else {
                                record
                            });
                        } else if isends.remove(r) {
                            at_end.push(Ev::new(end, EvKind::IsendComplete { request: *r }));
                        } else if let Some(done) = ncolls.remove(r) {
                            at_end.push(Ev::new(end, done));
                        }
                    }
                }
                _ => {
                    // A nonblocking collective (MPI_Ibcast) as its blocking counterpart's
                    // operation, inside its own region.
                    let name = ev.op.mpi_name();
                    let blocking = name
                        .strip_prefix("MPI_I")
                        .map(|rest| format!("MPI_{}{}", &rest[..1].to_uppercase(), &rest[1..]));
                    let op = collective_op(name).or_else(|| {
                        blocking
                            .filter(|_| ev.op.class() == OpClass::Collective)
                            .and_then(|b| collective_op(&b))
                    });
                    let root = ev
                        .root
                        .and_then(|r| peer_in(Some(r)))
                        .unwrap_or(perfskel_otf2::UNDEFINED_U32);
                    let nonblocking = collective_op(name).is_none();
                    if let (Some(op), Some(c), Some(r), true) = (op, gcomm, ev.req, nonblocking) {
                        // Started here, its sizes where it completes (as Score-P has it).
                        records.push(Ev::new(start, EvKind::NbCollRequest { request: r }));
                        ncolls.insert(
                            r,
                            EvKind::NbCollComplete {
                                op,
                                comm: c,
                                root,
                                sent: ev.bytes.unwrap_or(0),
                                received: ev.rbytes.unwrap_or(0),
                                request: r,
                            },
                        );
                    } else if let (Some(op), Some(c)) = (op, gcomm) {
                        records.push(Ev::new(start, EvKind::CollectiveBegin));
                        at_end.push(Ev::new(
                            end,
                            EvKind::CollectiveEnd {
                                op,
                                comm: c,
                                root,
                                sent: ev.bytes.unwrap_or(0),
                                received: ev.rbytes.unwrap_or(0),
                            },
                        ));
                    }
                    if let Some(n) = ev.newcomm {
                        let members = members_of(&reader, n);
                        if let Some((g, _)) = comms.global(&mut tables, n, members.as_ref()) {
                            at_end.push(Ev::new(end, EvKind::CommCreate { comm: g }));
                        }
                    }
                }
            }
            // The site's region, inside its callers' (outermost first) where the trace
            // was taken with a stack depth above 1.
            let site_regions: Vec<_> = site
                .map(|s: SiteKey| {
                    let frames: Vec<SiteKey> = s.caller_keys().collect();
                    frames
                        .iter()
                        .rev()
                        .chain(std::iter::once(&s))
                        .map(|f| tables.region(&format!("{}+{:#x}", f.object, f.offset), false))
                        .collect()
                })
                .unwrap_or_default();
            let op_region = tables.region(ev.op.mpi_name(), true);
            let mut enter = Ev::new(start, EvKind::Enter { region: op_region });
            if ev.off_cpu_ns > 0 {
                enter = enter.with(Attr::OffCpu, ev.off_cpu_ns);
            }
            if ev.polls > 0 {
                enter = enter.with(Attr::Polls, ev.polls);
            }
            if ev.any_source {
                enter = enter.with(Attr::AnySource, 1);
            }
            if let Some(f) = ev.flag {
                enter = enter.with(Attr::Flag, f);
            }
            if let Some(r) = ev.req {
                enter = enter.with(Attr::Request, r);
            }
            let mut write = |e: &Ev| writer.event(loc, e).map_err(|e| e.to_string());
            for &r in &site_regions {
                write(&Ev::new(start, EvKind::Enter { region: r }))?;
            }
            write(&enter)?;
            for r in records.iter().chain(&at_end) {
                write(r)?;
            }
            write(&Ev::new(end, EvKind::Leave { region: op_region }))?;
            for &r in site_regions.iter().rev() {
                write(&Ev::new(end, EvKind::Leave { region: r }))?;
            }
        }
        // What the rank file says beside its events, as location properties.
        if let Some(m) = reader.memory() {
            properties.push((rank, PROP_WORKING_SET, m.working_set));
            properties.push((rank, PROP_PROBE_BYTES, m.probe_bytes));
            properties.push((rank, PROP_PROBE_RATE, m.probe_rate));
        }
        if let Some(p) = reader.poll_ps() {
            properties.push((rank, PROP_POLL_PS, p));
        }
        if let Some(clock) = reader.clock() {
            let off_cpu = matches!(clock, perfskel_compiler::trace::Clock::OffCpu);
            properties.push((rank, PROP_OFF_CPU_CLOCK, u64::from(off_cpu)));
        }
        for (local, c) in reader.comms() {
            if c.grid.is_empty() {
                continue;
            }
            if let Some((g, _)) = comms.global(&mut tables, *local, Some(&c.world_ranks)) {
                grids.entry(g).or_insert_with(|| c.grid.clone());
            }
        }
    }
    if first_ns == u64::MAX {
        first_ns = 0;
    }
    // Definitions: clock, strings, attributes, regions, system tree, locations, groups,
    // communicators.
    let mut defs = vec![Def::Clock {
        resolution: 1_000_000_000,
        offset: first_ns,
        length: last_ns.saturating_sub(first_ns),
        realtime: first_ns,
    }];
    let empty = tables.strings.id("");
    for a in Attr::ALL {
        let name = tables.strings.id(a.name());
        defs.push(Def::Attribute {
            id: a as u64,
            name,
            uint64: true,
        });
    }
    // Definitions of a kind in id order (readers warn otherwise).
    let mut regions: Vec<(u64, String, bool)> = tables
        .regions
        .iter()
        .map(|(n, (id, mpi))| (*id, n.clone(), *mpi))
        .collect();
    regions.sort();
    for (id, name, mpi) in regions {
        let s = tables.strings.id(&name);
        defs.push(Def::Region {
            id,
            name: s,
            canonical: s,
            mpi,
            file: empty,
            line: 0,
        });
    }
    let mut nodes: BTreeMap<String, u64> = BTreeMap::new();
    for (_, host) in &hosts {
        let next = nodes.len() as u64;
        nodes.entry(host.clone()).or_insert(next);
    }
    let node_class = tables.strings.id("node");
    let mut by_id: Vec<(u64, &String)> = nodes.iter().map(|(h, id)| (*id, h)).collect();
    by_id.sort();
    for (id, host) in by_id {
        let id = &id;
        let name = tables.strings.id(host);
        defs.push(Def::SystemTreeNode {
            id: *id,
            name,
            class: node_class,
            parent: UNDEFINED_U64,
        });
    }
    for (rank, host) in &hosts {
        let name = tables.strings.id(&format!("MPI rank {rank}"));
        defs.push(Def::LocationGroup {
            id: *rank as u64,
            name,
            process: true,
            parent: nodes[host],
        });
        let thread = tables.strings.id(&format!("rank {rank} main thread"));
        defs.push(Def::Location {
            id: *rank as u64,
            name: thread,
            cpu_thread: true,
            events: 0,
            group: *rank as u64,
        });
    }
    // Group 0: every rank's location; then one group per communicator.
    defs.push(Def::Group {
        id: 0,
        name: empty,
        kind: GroupKind::CommLocations,
        mpi: true,
        members: (0..n_ranks as u64).collect(),
    });
    let mut comms: Vec<(u64, Vec<i64>, usize)> = tables
        .comms
        .iter()
        .map(|((m, ordinal), id)| (*id, m.clone(), *ordinal))
        .collect();
    comms.sort();
    let mut groups = Vec::new();
    let mut comm_defs = Vec::new();
    for (id, members, ordinal) in comms {
        let world = ordinal == 0
            && members.len() as u64 == n_ranks as u64
            && members.iter().enumerate().all(|(i, &m)| m == i as i64);
        let name = tables.strings.id(&if world {
            "MPI_COMM_WORLD".to_string()
        } else {
            format!("communicator {id}")
        });
        groups.push(Def::Group {
            id: id + 1,
            name: empty,
            kind: GroupKind::CommGroup,
            mpi: true,
            members: members.iter().map(|&m| m.max(0) as u64).collect(),
        });
        comm_defs.push(Def::Comm {
            id,
            name,
            group: id + 1,
            parent: UNDEFINED_U64,
        });
    }
    defs.extend(groups);
    defs.extend(comm_defs);
    for (rank, name, value) in properties {
        let name = tables.strings.id(name);
        defs.push(Def::LocationProperty {
            location: rank as u64,
            name,
            value,
        });
    }
    let mut dims = Vec::new();
    let mut topologies = Vec::new();
    for (comm, grid) in &grids {
        let mut ids = Vec::new();
        for (d, (size, periodic)) in grid.iter().enumerate() {
            let id = dims.len() as u64;
            let name = tables
                .strings
                .id(&format!("communicator {comm} dimension {d}"));
            dims.push(Def::CartDimension {
                id,
                name,
                size: u32::try_from(*size).unwrap_or(u32::MAX),
                periodic: *periodic,
            });
            ids.push(id);
        }
        let name = tables.strings.id(&format!("communicator {comm} grid"));
        topologies.push(Def::CartTopology {
            id: topologies.len() as u64,
            name,
            comm: *comm,
            dims: ids,
        });
    }
    defs.extend(dims);
    defs.extend(topologies);
    // Strings first, in id order.
    let mut strings: Vec<(u64, String)> = tables
        .strings
        .0
        .iter()
        .map(|(s, id)| (*id, s.clone()))
        .collect();
    strings.sort();
    let mut all: Vec<Def> = vec![defs.remove(0)];
    all.extend(
        strings
            .into_iter()
            .map(|(id, text)| Def::String { id, text }),
    );
    all.extend(defs);
    for d in &all {
        writer.definition(d).map_err(|e| e.to_string())?;
    }
    writer.finish().map_err(|e| e.to_string())?;
    Ok(Exported {
        ranks: hosts.len() as u32,
        events,
    })
}
