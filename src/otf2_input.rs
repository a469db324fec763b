//! OTF2 archives as trace input (issue 21): `skeletonize` and `trace stats|show` take the
//! anchor file (`traces.otf2`) or its directory. The archive's MPI ranks are its
//! locations listed by the MPI comm-locations group (Score-P writes one; so does
//! `trace export --otf2`); each rank's events are assembled into perfskel [`Event`]s
//! from the MPI routine's `Enter`/`Leave` (its region's name gives the operation) and the
//! MPI records inside: peers and roots are ranks of the call's communicator, resolved
//! through its group to world ranks; a nonblocking receive's source, tag and size come
//! from the `MpiIrecv` record of the call that completes it (the receive is held back
//! until then, at most [`MAX_HELD`] events); the call site is the innermost enclosing
//! region that is not MPI (`OBJECT+0xOFFSET` regions, as `trace export` writes them, are
//! the same call sites as the trace's; other regions are sites named after themselves);
//! where the routine was entered through a calling context (`CallingContextEnter`,
//! Score-P's unwinding mode), the site is the source code location of its nearest caller
//! that is no MPI routine, one site per file and line.
//! Times are the archive's clock (resolution and offset honoured), in ns from the rank's
//! first event. `perfskel::` attributes, where present, give what OTF2's records do not
//! say (time off the core, runs of failed polls, `MPI_ANY_SOURCE`, flags).
//!
//! Locations that are no MPI rank (OpenMP threads, GPU streams) are counted and left
//! out; an event file that ends early ends its rank there (reported), as a killed run's
//! rank file does.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use crate::otf2_export::{
    PROP_OFF_CPU_CLOCK, PROP_POLL_PS, PROP_PROBE_BYTES, PROP_PROBE_RATE, PROP_WORKING_SET,
};
use perfskel_compiler::skeletonize::{Opened, RankEvents, Ranks};
use perfskel_compiler::trace::format::{PEER_ANY_SOURCE, PEER_PROC_NULL, TAG_ANY};
use perfskel_compiler::trace::stats::{SiteKey, StatsBuilder};
use perfskel_compiler::trace::symbolize::Location;
use perfskel_compiler::trace::{Completion, Event, Memory, Op, OpClass, TraceError};
use perfskel_otf2::{
    attribute_ids, read_definitions, Attr, Def, EvKind, Events, GroupKind, UNDEFINED_U64,
};

/// Receives held back for their completion, at most: past this many events the oldest
/// is given with the source it was posted with unknown (`MPI_ANY_SOURCE`).
pub const MAX_HELD: usize = 1 << 16;

/// The anchor file of the OTF2 archive at `path`: `path` itself when it is a file named
/// `*.otf2`, else `path/traces.otf2`, else the one `*.otf2` file in directory `path`.
pub fn anchor_of(path: &Path) -> Option<PathBuf> {
    if path.is_file() {
        return (path.extension().is_some_and(|e| e == "otf2")).then(|| path.to_path_buf());
    }
    if !path.is_dir() {
        return None;
    }
    let traces = path.join("traces.otf2");
    if traces.is_file() {
        return Some(traces);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(path)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "otf2"))
        .collect();
    found.sort();
    (found.len() == 1).then(|| found.remove(0))
}

struct Region {
    name: String,
    op: Option<Op>,
    /// The call site a call inside this region has.
    site: SiteKey,
}

/// An archive's definitions, as the ranks' readers need them.
pub struct Otf2Trace {
    pub anchor: PathBuf,
    attr_ids: [u64; perfskel_otf2::N_ATTRS],
    resolution: u64,
    offset: u64,
    regions: BTreeMap<u64, Region>,
    /// Rank → location.
    locations: Vec<u64>,
    /// Calling context → its region.
    context_regions: BTreeMap<u64, u64>,
    /// Calling context of an MPI routine → the call's site.
    context_sites: BTreeMap<u64, SiteKey>,
    /// Location → the records its definition counts (a cut event file is seen by them).
    event_counts: BTreeMap<u64, u64>,
    /// OTF2 communicator → world ranks (empty: MPI_COMM_SELF, the rank itself).
    comms: BTreeMap<u64, Vec<i64>>,
    world: Option<u64>,
    /// Location → its perfskel properties by name.
    properties: BTreeMap<u64, BTreeMap<String, u64>>,
    /// OTF2 communicator → its grid: (size, periodic) per dimension.
    grids: BTreeMap<u64, Vec<(u64, bool)>>,
    /// Call site → how `skeletonize` names it, for sites that are regions.
    pub site_names: BTreeMap<SiteKey, String>,
    /// Call site → where it is, for sites that are regions (`trace stats`).
    pub site_locations: BTreeMap<SiteKey, Location>,
    /// Whether the ranks' off-core time was measured (`trace export`'s property).
    pub off_cpu_clock: bool,
    /// What was left out or guessed, for the user.
    pub notes: Vec<String>,
    reported: RefCell<BTreeSet<u32>>,
}

/// A tag as perfskel has it: OTF2's undefined is `MPI_ANY_TAG`.
fn tag_of(tag: u32) -> i64 {
    if tag == perfskel_otf2::UNDEFINED_U32 {
        TAG_ANY
    } else {
        tag as i64
    }
}

fn op_of(name: &str) -> Option<Op> {
    Op::ALL.iter().copied().find(|op| op.mpi_name() == name)
}

/// How a call site at `line` of `file` in `function` is named (`function (file:line)`,
/// the file without its directories) and located.
fn source_site(function: &str, file: &str, line: u32) -> (String, Location) {
    let label = if file.is_empty() || line == 0 {
        function.to_string()
    } else {
        let short = file.rsplit('/').next().unwrap_or(file);
        format!("{function} ({short}:{line})")
    };
    let location = Location {
        function: Some(function.to_string()),
        file: (!file.is_empty()).then(|| file.to_string()),
        line: (line > 0).then_some(line),
        ..Location::default()
    };
    (label, location)
}

/// `OBJECT+0xOFFSET`: a call site as `trace export --otf2` writes it.
fn parse_site(name: &str) -> Option<SiteKey> {
    let (object, hex) = name.rsplit_once("+0x")?;
    let offset = u64::from_str_radix(hex, 16).ok()?;
    Some(SiteKey::at(object, offset))
}

impl Otf2Trace {
    pub fn open(anchor: &Path) -> Result<Self, String> {
        let defs = read_definitions(anchor).map_err(|e| format!("{}: {e}", anchor.display()))?;
        let attr_ids = attribute_ids(&defs);
        let mut strings: BTreeMap<u64, String> = BTreeMap::new();
        let (mut resolution, mut offset) = (0u64, 0u64);
        let mut groups: BTreeMap<u64, (GroupKind, bool, Vec<u64>)> = BTreeMap::new();
        let mut comm_groups: Vec<(u64, u64)> = Vec::new();
        let mut all_locations: Vec<(u64, bool, u64)> = Vec::new();
        let mut event_counts = BTreeMap::new();
        let mut raw_regions = Vec::new();
        let mut raw_properties = Vec::new();
        let mut dims: BTreeMap<u64, (u64, bool)> = BTreeMap::new();
        let mut topologies = Vec::new();
        let mut scls: BTreeMap<u64, (u64, u32)> = BTreeMap::new();
        let mut contexts: BTreeMap<u64, (u64, u64, u64)> = BTreeMap::new();
        for d in defs {
            match d {
                Def::Clock {
                    resolution: r,
                    offset: o,
                    ..
                } => {
                    resolution = r;
                    offset = o;
                }
                Def::String { id, text } => {
                    strings.insert(id, text);
                }
                Def::Region {
                    id,
                    name,
                    canonical,
                    mpi,
                    file,
                    line,
                } => raw_regions.push((id, name, canonical, mpi, file, line)),
                Def::Group {
                    id,
                    kind,
                    mpi,
                    members,
                    ..
                } => {
                    groups.insert(id, (kind, mpi, members));
                }
                Def::Comm { id, group, .. } => comm_groups.push((id, group)),
                Def::SourceCodeLocation { id, file, line } => {
                    scls.insert(id, (file, line));
                }
                Def::CallingContext {
                    id,
                    region,
                    source_code_location,
                    parent,
                } => {
                    contexts.insert(id, (region, source_code_location, parent));
                }
                Def::Location {
                    id,
                    cpu_thread,
                    group,
                    events,
                    ..
                } => {
                    all_locations.push((id, cpu_thread, group));
                    event_counts.insert(id, events);
                }
                Def::LocationProperty {
                    location,
                    name,
                    value,
                } => raw_properties.push((location, name, value)),
                Def::CartDimension {
                    id, size, periodic, ..
                } => {
                    dims.insert(id, (size as u64, periodic));
                }
                Def::CartTopology { comm, dims: d, .. } => topologies.push((comm, d)),
                _ => {}
            }
        }
        if resolution == 0 {
            return Err(format!(
                "{}: the archive has no clock properties (timer resolution 0)",
                anchor.display()
            ));
        }
        let text = |id: u64| strings.get(&id).cloned().unwrap_or_default();
        let mut regions = BTreeMap::new();
        let mut site_names = BTreeMap::new();
        let mut site_locations = BTreeMap::new();
        for (id, name, canonical, _mpi, file, line) in raw_regions {
            let name_text = text(name);
            let canonical_text = text(canonical);
            let op = op_of(&name_text).or_else(|| op_of(&canonical_text));
            let site = parse_site(&canonical_text).unwrap_or_else(|| {
                let key = SiteKey::at(format!("otf2 region {name_text}"), id);
                let (label, location) = source_site(&name_text, &text(file), line);
                site_names.insert(key.clone(), label);
                site_locations.insert(key.clone(), location);
                key
            });
            regions.insert(
                id,
                Region {
                    name: name_text,
                    op,
                    site,
                },
            );
        }
        // Calling contexts (Score-P's unwinding mode): a call's site is where its caller
        // called it, the source code location of the nearest ancestor that is no MPI
        // routine (one site per file and line, as a return address is one site); a
        // caller without one is its region's site.
        let mut context_regions = BTreeMap::new();
        let mut context_sites = BTreeMap::new();
        for (&id, &(region, _, _)) in &contexts {
            context_regions.insert(id, region);
            if regions.get(&region).is_none_or(|r| r.op.is_none()) {
                continue;
            }
            let mut up = contexts.get(&id).map(|c| c.2);
            // A walk bounded by the tree's size: a cycle in a damaged archive ends it.
            for _ in 0..contexts.len() {
                let Some(&(caller_region, scl, parent)) = up.and_then(|c| contexts.get(&c)) else {
                    break;
                };
                let Some(caller) = regions.get(&caller_region) else {
                    break;
                };
                if caller.op.is_some() {
                    up = Some(parent);
                    continue;
                }
                let site = match scls.get(&scl) {
                    Some(&(file, line)) => {
                        let key = SiteKey::at("otf2 source code location", scl);
                        let (label, location) = source_site(&caller.name, &text(file), line);
                        site_names.insert(key.clone(), label);
                        site_locations.insert(key.clone(), location);
                        key
                    }
                    None => caller.site.clone(),
                };
                context_sites.insert(id, site);
                break;
            }
        }
        let mut notes = Vec::new();
        // The MPI ranks: the MPI comm-locations group, else every CPU thread.
        let locations: Vec<u64> = match groups
            .values()
            .find(|(k, mpi, _)| *k == GroupKind::CommLocations && *mpi)
        {
            Some((_, _, members)) => members.clone(),
            None => {
                notes.push(
                    "no MPI comm-locations group: every CPU thread taken as a rank, in location order"
                        .into(),
                );
                all_locations
                    .iter()
                    .filter(|(_, cpu, _)| *cpu)
                    .map(|(id, _, _)| *id)
                    .collect()
            }
        };
        let others = all_locations
            .iter()
            .filter(|(id, _, _)| !locations.contains(id))
            .count();
        if others > 0 {
            notes.push(format!(
                "{others} location(s) that are no MPI rank (threads, accelerator streams) left out"
            ));
        }
        let n = locations.len() as i64;
        let mut comms = BTreeMap::new();
        let mut world = None;
        for (id, group) in comm_groups {
            let Some((kind, _, members)) = groups.get(&group) else {
                notes.push(format!(
                    "communicator {id}: its group {group} is not defined"
                ));
                continue;
            };
            let ranks: Vec<i64> = match kind {
                GroupKind::CommSelf => Vec::new(),
                _ => members.iter().map(|&m| m as i64).collect(),
            };
            if ranks.iter().any(|&r| r < 0 || r >= n) {
                notes.push(format!("communicator {id}: a member that is no rank"));
                continue;
            }
            if world.is_none()
                && ranks.len() as i64 == n
                && ranks.iter().enumerate().all(|(i, &r)| r == i as i64)
            {
                world = Some(id);
            }
            comms.insert(id, ranks);
        }
        let mut properties: BTreeMap<u64, BTreeMap<String, u64>> = BTreeMap::new();
        for (location, name, value) in raw_properties {
            properties
                .entry(location)
                .or_default()
                .insert(text(name), value);
        }
        let mut grids = BTreeMap::new();
        for (comm, d) in topologies {
            let grid: Option<Vec<(u64, bool)>> = d.iter().map(|id| dims.get(id).copied()).collect();
            match grid {
                Some(g) => {
                    grids.insert(comm, g);
                }
                None => notes.push(format!(
                    "a Cartesian topology of communicator {comm} names a dimension that is not defined"
                )),
            }
        }
        let off_cpu_clock = !properties.is_empty()
            && properties
                .values()
                .all(|p| p.get(PROP_OFF_CPU_CLOCK) == Some(&1));
        Ok(Otf2Trace {
            anchor: anchor.to_path_buf(),
            site_locations,
            off_cpu_clock,
            properties,
            grids,
            attr_ids,
            resolution,
            offset,
            regions,
            locations,
            context_regions,
            context_sites,
            event_counts,
            comms,
            world,
            site_names,
            notes,
            reported: RefCell::new(BTreeSet::new()),
        })
    }

    pub fn n_ranks(&self) -> u32 {
        self.locations.len() as u32
    }

    /// The ranks a command reads: `only`, or all; a rank the archive lacks is an error.
    pub fn ranks(&self, only: Option<u32>) -> Result<Vec<u32>, String> {
        match only {
            Some(r) if r >= self.n_ranks() => Err(format!(
                "{}: no rank {r} ({} ranks)",
                self.anchor.display(),
                self.n_ranks()
            )),
            Some(r) => Ok(vec![r]),
            None => Ok((0..self.n_ranks()).collect()),
        }
    }

    /// Says on standard error what was left out or guessed, each line after `prefix`.
    pub fn print_notes(&self, prefix: &str) {
        for note in &self.notes {
            eprintln!("{prefix}{}: {note}", self.anchor.display());
        }
    }

    /// Feeds `ranks` into `builder` (the trace statistics); gives the errors.
    pub fn add_stats(&self, builder: &mut StatsBuilder, ranks: &[u32]) -> Vec<String> {
        let mut errors = Vec::new();
        for &rank in ranks {
            let added = self.rank(rank).and_then(|mut events| {
                builder
                    .add_events(rank, &mut events)
                    .map_err(|e| e.to_string())
            });
            if let Err(e) = added {
                errors.push(format!("{}: rank {rank}: {e}", self.anchor.display()));
            }
        }
        if self.off_cpu_clock {
            builder.set_clock(perfskel_compiler::trace::Clock::OffCpu);
        }
        errors
    }

    /// Where call site `key` is, for a site that is a region (else `None`: an object's).
    pub fn location(&self, key: &SiteKey) -> Option<Location> {
        self.site_locations.get(key).cloned()
    }

    fn ns(&self, ticks: u64) -> u64 {
        let t = ticks.saturating_sub(self.offset) as u128;
        (t * 1_000_000_000 / self.resolution as u128).min(u64::MAX as u128) as u64
    }

    /// perfskel's id of OTF2 communicator `c`: 0 MPI_COMM_WORLD, 1 MPI_COMM_SELF, else
    /// c + 2.
    fn comm_id(&self, c: u64) -> u64 {
        if Some(c) == self.world {
            0
        } else if self.comms.get(&c).is_some_and(|m| m.is_empty()) {
            1
        } else {
            c + 2
        }
    }

    /// World rank of rank `r` of OTF2 communicator `c`, as seen from `rank`.
    fn world_rank(&self, rank: u32, c: u64, r: u32) -> i64 {
        if r == perfskel_otf2::UNDEFINED_U32 {
            return PEER_ANY_SOURCE;
        }
        let world = match self.comms.get(&c) {
            Some(m) if m.is_empty() => Some(rank as i64),
            Some(m) => m.get(r as usize).copied(),
            None => Some(r as i64),
        };
        match world.filter(|&w| w < self.n_ranks() as i64) {
            Some(w) => w,
            None => {
                self.report(
                    rank,
                    &format!("rank {r} of communicator {c} is no rank of the archive: read as MPI_PROC_NULL"),
                );
                PEER_PROC_NULL
            }
        }
    }

    fn report(&self, rank: u32, message: &str) {
        if self.reported.borrow_mut().insert(rank) {
            eprintln!(
                "perfskel: {}: rank {rank}: {message}",
                self.anchor.display()
            );
        }
    }

    /// One rank's events.
    pub fn rank(&self, rank: u32) -> Result<Otf2Rank<'_>, String> {
        let location = *self
            .locations
            .get(rank as usize)
            .ok_or_else(|| format!("no rank {rank}"))?;
        let events = Events::open(&self.anchor, location, &self.attr_ids)
            .map_err(|e| e.to_string())?
            .expecting(self.event_counts.get(&location).copied().unwrap_or(0));
        Ok(Otf2Rank {
            trace: self,
            rank,
            events,
            t0: None,
            stack: Vec::new(),
            current: None,
            sites: BTreeMap::new(),
            held: VecDeque::new(),
            first_seq: 0,
            pending: BTreeMap::new(),
            completion: Completion::Incomplete {
                valid_bytes: 0,
                trailing_bytes: 0,
            },
            n_events: 0,
            last_end: 0,
            finished: false,
        })
    }
}

/// A call being assembled: the event, the stack depth of its region, whether an
/// unsuccessful-test record was seen.
struct Call {
    ev: Event,
    depth: usize,
    failed_test: bool,
    /// An `MpiIrecvRequest` record: a receive whose source its completion gives.
    posted: bool,
}

/// One rank of an [`Otf2Trace`], read in order.
pub struct Otf2Rank<'a> {
    trace: &'a Otf2Trace,
    rank: u32,
    events: Events,
    t0: Option<u64>,
    /// The regions entered and not left, each with its calling context
    /// ([`UNDEFINED_U64`] for an `Enter` record).
    stack: Vec<(u64, u64)>,
    current: Option<Call>,
    sites: BTreeMap<SiteKey, u64>,
    /// Assembled events not yet given (a receive waiting for its completion, and those
    /// after it), with the sequence number of the first.
    held: VecDeque<(Event, bool)>,
    first_seq: u64,
    /// Request → sequence number of the receive it posted.
    pending: BTreeMap<u64, u64>,
    completion: Completion,
    n_events: u64,
    last_end: u64,
    finished: bool,
}

impl Otf2Rank<'_> {
    /// The call site of id `id` (as events give it), once a call there was read.
    /// The archive's time, ns, of the rank's time 0 (its first record), once the first
    /// event is read; 0 before.
    pub fn origin_ns(&self) -> u64 {
        self.t0.unwrap_or(0)
    }

    pub fn site_key(&self, id: u64) -> Option<&SiteKey> {
        self.sites.iter().find(|(_, v)| **v == id).map(|(k, _)| k)
    }

    /// The rank's location properties (`trace export --otf2` writes its memory and poll
    /// records there).
    fn property_map(&self) -> Option<&BTreeMap<String, u64>> {
        let location = self.trace.locations.get(self.rank as usize)?;
        self.trace.properties.get(location)
    }

    fn site_id(&mut self) -> u64 {
        let t = self.trace;
        let from_context = self
            .stack
            .last()
            .and_then(|(_, context)| t.context_sites.get(context));
        let Some(key) = from_context.cloned().or_else(|| {
            self.stack
                .iter()
                .rev()
                .filter_map(|(r, _)| t.regions.get(r))
                .find(|r| r.op.is_none())
                .map(|r| r.site.clone())
        }) else {
            return 0;
        };
        let next = self.sites.len() as u64 + 1;
        *self.sites.entry(key).or_insert(next)
    }

    fn time(&mut self, ticks: u64) -> u64 {
        let ns = self.trace.ns(ticks);
        let t0 = *self.t0.get_or_insert(ns);
        ns.saturating_sub(t0)
    }

    /// The region an `Enter` or `CallingContextEnter` record enters, and its calling
    /// context ([`UNDEFINED_U64`] where there is none).
    fn entered(&self, kind: &EvKind) -> (u64, u64) {
        match *kind {
            EvKind::Enter { region } => (region, UNDEFINED_U64),
            EvKind::CallingContextEnter { context, .. } => {
                let region = self.trace.context_regions.get(&context).copied();
                if region.is_none() {
                    self.trace.report(
                        self.rank,
                        &format!("calling context {context} is not defined"),
                    );
                }
                (region.unwrap_or(UNDEFINED_U64), context)
            }
            _ => (UNDEFINED_U64, UNDEFINED_U64),
        }
    }

    /// Applies one OTF2 record; an assembled event goes to `held`.
    fn apply(&mut self, ev: perfskel_otf2::Ev) {
        let t = self.trace;
        let rank = self.rank;
        let time = self.time(ev.time);
        let proc_null = ev.attr(Attr::ProcNull) == Some(1);
        match ev.kind {
            EvKind::Enter { .. } | EvKind::CallingContextEnter { .. } => {
                let (region, context) = self.entered(&ev.kind);
                let op = t.regions.get(&region).and_then(|r| r.op);
                self.stack.push((region, context));
                if let (Some(op), None) = (op, &self.current) {
                    let site = self.site_id();
                    let mut e = Event {
                        op,
                        start_ns: time,
                        end_ns: time,
                        site,
                        ..Event::default()
                    };
                    e.off_cpu_ns = ev.attr(Attr::OffCpu).unwrap_or(0);
                    e.polls = ev.attr(Attr::Polls).unwrap_or(0);
                    e.any_source = ev.attr(Attr::AnySource) == Some(1);
                    e.flag = ev.attr(Attr::Flag);
                    e.req = ev.attr(Attr::Request);
                    self.current = Some(Call {
                        ev: e,
                        depth: self.stack.len(),
                        failed_test: false,
                        posted: false,
                    });
                }
            }
            EvKind::Leave { .. } | EvKind::CallingContextLeave { .. } => {
                let depth = self.stack.len();
                self.stack.pop();
                if self.current.as_ref().is_some_and(|c| c.depth == depth) {
                    if let Some(call) = self.current.take() {
                        self.finish_call(call, time);
                    }
                }
            }
            kind => {
                let Some(call) = self.current.as_mut() else {
                    return;
                };
                let world = |c: u64, r: u32| {
                    if proc_null {
                        PEER_PROC_NULL
                    } else {
                        t.world_rank(rank, c, r)
                    }
                };
                let e = &mut call.ev;
                match kind {
                    EvKind::Send {
                        peer,
                        comm,
                        tag,
                        bytes,
                    }
                    | EvKind::Isend {
                        peer,
                        comm,
                        tag,
                        bytes,
                        ..
                    } => {
                        e.peer = Some(world(comm, peer));
                        e.tag = Some(tag_of(tag));
                        e.bytes = Some(bytes);
                        e.comm = Some(t.comm_id(comm));
                        if let EvKind::Isend { request, .. } = kind {
                            e.req = Some(request);
                        }
                    }
                    EvKind::Recv {
                        peer,
                        comm,
                        tag,
                        bytes,
                    } => {
                        let source = world(comm, peer);
                        if matches!(e.op, Op::Sendrecv | Op::SendrecvReplace) {
                            e.src = Some(source);
                            e.rtag = Some(tag_of(tag));
                            e.rbytes = Some(bytes);
                        } else {
                            e.peer = Some(source);
                            e.tag = Some(tag_of(tag));
                            e.bytes = Some(bytes);
                        }
                        e.comm = Some(t.comm_id(comm));
                    }
                    EvKind::IrecvRequest { request } => {
                        e.req = Some(request);
                        call.posted = true;
                    }
                    EvKind::Irecv {
                        peer,
                        comm,
                        tag,
                        bytes,
                        request,
                    } => {
                        e.reqs.push(request);
                        let fill = (world(comm, peer), tag_of(tag), bytes, t.comm_id(comm));
                        self.fill(request, |held| {
                            held.peer = Some(fill.0);
                            held.tag = Some(fill.1);
                            held.bytes = Some(fill.2);
                            held.comm = Some(fill.3);
                        });
                    }
                    EvKind::IsendComplete { request } => e.reqs.push(request),
                    EvKind::RequestTest { .. } => call.failed_test = true,
                    EvKind::RequestCancelled { request } => e.reqs.push(request),
                    EvKind::CollectiveEnd {
                        comm,
                        root,
                        sent,
                        received,
                        ..
                    } => {
                        e.comm = Some(t.comm_id(comm));
                        if root != perfskel_otf2::UNDEFINED_U32 {
                            e.root = Some(t.world_rank(rank, comm, root));
                        }
                        if e.op.class() == OpClass::Collective
                            && !matches!(e.op, Op::Barrier | Op::Ibarrier)
                        {
                            e.bytes = Some(sent);
                            e.rbytes = Some(received);
                        }
                    }
                    EvKind::CommCreate { comm } => e.newcomm = Some(t.comm_id(comm)),
                    EvKind::NbCollRequest { request } => {
                        e.req = Some(request);
                        call.posted = true;
                    }
                    EvKind::NbCollComplete {
                        comm,
                        root,
                        sent,
                        received,
                        request,
                        ..
                    } => {
                        e.reqs.push(request);
                        let root = (root != perfskel_otf2::UNDEFINED_U32)
                            .then(|| t.world_rank(rank, comm, root));
                        let comm = t.comm_id(comm);
                        self.fill(request, |held| {
                            held.comm = Some(comm);
                            held.root = root;
                            if held.op != Op::Ibarrier {
                                held.bytes = Some(sent);
                                held.rbytes = Some(received);
                            }
                        });
                    }
                    _ => {}
                }
            }
        }
    }

    /// Completes the held call that posted `request` (a receive, a nonblocking
    /// collective) with what its completion says.
    fn fill(&mut self, request: u64, f: impl FnOnce(&mut Event)) {
        let Some(seq) = self.pending.remove(&request) else {
            return;
        };
        let Some(idx) = seq.checked_sub(self.first_seq) else {
            return;
        };
        if let Some((held, ready)) = self.held.get_mut(idx as usize) {
            f(held);
            *ready = true;
        }
    }

    fn finish_call(&mut self, call: Call, end: u64) {
        let mut ev = call.ev;
        ev.end_ns = end.max(ev.start_ns);
        self.last_end = self.last_end.max(ev.end_ns);
        if ev.flag.is_none() && matches!(ev.op, Op::Test | Op::Testall | Op::Testany | Op::Testsome)
        {
            ev.flag = Some(u64::from(!call.failed_test || !ev.reqs.is_empty()));
        }
        // A receive without an `MpiIrecvRequest` record is from MPI_PROC_NULL (MPI
        // does nothing: OTF2 writers record nothing).
        if ev.peer.is_none() && matches!(ev.op, Op::Irecv | Op::Recv) && !call.posted {
            ev.peer = Some(PEER_PROC_NULL);
        }
        let posted = call.posted
            && ((ev.op == Op::Irecv && ev.peer.is_none())
                || (ev.op.class() == OpClass::Collective && ev.comm.is_none()));
        let seq = self.first_seq + self.held.len() as u64;
        if posted {
            if let Some(r) = ev.req {
                self.pending.insert(r, seq);
            }
        }
        self.held.push_back((ev, !posted));
        self.n_events += 1;
    }

    /// The first held event, when it may be given: it is complete, or too many wait.
    fn pop_ready(&mut self, at_end: bool) -> Option<Event> {
        let (_, ready) = self.held.front()?;
        if !*ready && !at_end && self.held.len() < MAX_HELD {
            return None;
        }
        let (mut ev, ready) = self.held.pop_front()?;
        if !ready {
            // Never completed here (cancelled, or the run ended): a receive's source is
            // not in the archive, nor a nonblocking collective's sizes.
            if ev.op == Op::Irecv {
                ev.peer = Some(PEER_ANY_SOURCE);
            }
            if let Some(r) = ev.req {
                self.pending.remove(&r);
            }
        }
        self.first_seq += 1;
        Some(ev)
    }
}

impl RankEvents for Otf2Rank<'_> {
    fn next_event(&mut self, out: &mut Event) -> Result<bool, TraceError> {
        loop {
            if let Some(ev) = self.pop_ready(self.finished) {
                *out = ev;
                return Ok(true);
            }
            if self.finished {
                return Ok(false);
            }
            match self.events.next_event() {
                Ok(Some(ev)) => self.apply(ev),
                Ok(None) => {
                    self.finished = true;
                    self.completion = Completion::Complete {
                        end_ns: self.last_end,
                        n_events: self.n_events,
                    };
                }
                Err(e) => {
                    // A damaged or short event file: the rank ends at its last whole
                    // call, as a killed run's rank file does.
                    self.trace.report(
                        self.rank,
                        &format!("{e}; read up to its last whole call ({})", self.n_events),
                    );
                    self.finished = true;
                    self.current = None;
                }
            }
        }
    }
    fn sites(&self) -> BTreeMap<u64, SiteKey> {
        self.sites.iter().map(|(k, id)| (*id, k.clone())).collect()
    }
    fn comms(&self) -> BTreeMap<u64, Vec<i64>> {
        let t = self.trace;
        t.comms
            .iter()
            .filter(|(_, m)| m.is_empty() || m.contains(&(self.rank as i64)))
            .map(|(c, m)| {
                let members = if m.is_empty() {
                    vec![self.rank as i64]
                } else {
                    m.clone()
                };
                (t.comm_id(*c), members)
            })
            .collect()
    }
    fn grids(&self) -> BTreeMap<u64, Vec<(u64, bool)>> {
        let t = self.trace;
        t.grids
            .iter()
            .filter(|(c, _)| {
                t.comms
                    .get(c)
                    .is_some_and(|m| m.is_empty() || m.contains(&(self.rank as i64)))
            })
            .map(|(c, g)| (t.comm_id(*c), g.clone()))
            .collect()
    }
    fn completion(&self) -> Completion {
        self.completion
    }
    fn memory(&self) -> Option<Memory> {
        let p = self.property_map()?;
        Some(Memory {
            working_set: *p.get(PROP_WORKING_SET)?,
            probe_bytes: p.get(PROP_PROBE_BYTES).copied().unwrap_or(0),
            probe_rate: p.get(PROP_PROBE_RATE).copied().unwrap_or(0),
        })
    }
    fn poll_ps(&self) -> Option<u64> {
        self.property_map()?.get(PROP_POLL_PS).copied()
    }
}

/// The archive's ranks for `skeletonize`.
impl Ranks for Otf2Trace {
    fn n_ranks(&self) -> u32 {
        Otf2Trace::n_ranks(self)
    }
    fn open(&self, rank: u32) -> Opened<'_> {
        match self.rank(rank) {
            Ok(r) => Opened::Events(Box::new(r)),
            Err(e) => {
                self.report(rank, &e);
                Opened::Unreadable
            }
        }
    }
}

/// The region names of the archive's MPI calls that perfskel does not know (reported).
pub fn unknown_mpi_regions(t: &Otf2Trace) -> Vec<String> {
    t.regions
        .values()
        .filter(|r| r.op.is_none() && r.name.starts_with("MPI_"))
        .map(|r| r.name.clone())
        .collect()
}
