//! mpiP-style statistics: takes the events of each rank (streamed from a
//! [`RankReader`]), gives per operation and per call site the count, total/min/max time
//! and bytes, per rank and aggregated over ranks, plus each rank's split of application
//! time into MPI and compute time. Output order is deterministic (sorted maps).

use std::collections::BTreeMap;
use std::io::Read;

use serde::Serialize;

use super::format::Op;
use super::reader::{Clock, Completion, Event, Memory, RankReader, TraceError};
use super::symbolize::Location;

/// A call site independent of where the object was loaded: the object's path and the
/// return address relative to it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct SiteKey {
    pub object: String,
    pub offset: u64,
    /// The return addresses of the call's callers, innermost first, each as (object,
    /// offset): empty unless the trace was taken with a stack depth above 1 (`perfskel
    /// record --stack-depth`, mpiP's call-site stack depth), where one place called from
    /// two callers is two sites.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub callers: Vec<(String, u64)>,
}

impl SiteKey {
    /// The site of the return address at `offset` in `object`, with no callers.
    pub fn at(object: impl Into<String>, offset: u64) -> SiteKey {
        SiteKey {
            object: object.into(),
            offset,
            callers: Vec::new(),
        }
    }

    /// Each caller as a site of its own (to symbolize it).
    pub fn caller_keys(&self) -> impl Iterator<Item = SiteKey> + '_ {
        self.callers
            .iter()
            .map(|(o, a)| SiteKey::at(o.as_str(), *a))
    }
}

/// The name of call site `key` ([`Location::site_name`] of each frame found by `locate`):
/// `app.c:45`, or with callers `app.c:45 < app.c:90 < main.c:12`, innermost first.
pub fn stack_name(key: &SiteKey, locate: &dyn Fn(&SiteKey) -> Location) -> String {
    locate(key).site_name(&key.object, key.offset) + &callers_name(key, locate)
}

/// What follows a site's own name where it has callers: ` < app.c:90 < main.c:12`, each
/// caller's [`Location::site_name`]; empty without callers.
pub fn callers_name(key: &SiteKey, locate: &dyn Fn(&SiteKey) -> Location) -> String {
    key.caller_keys()
        .map(|c| format!(" < {}", locate(&c).site_name(&c.object, c.offset)))
        .collect()
}

/// Count, time and bytes of a group of calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub count: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Bytes the calls sent (what mpiP counts, and `perfskel analyze` reports): a send's
    /// message, a collective's contribution; 0 for receives and probes.
    pub sent_bytes: u64,
    /// Bytes the calls received: a receive's message, a collective's or sendrecv's
    /// received part; 0 for probes (what they matched is received by the receive).
    pub received_bytes: u64,
}

impl Totals {
    /// Adds `calls` calls that took `dur` ns in all: one call, or a run of failed polls
    /// (format 7), whose calls count one by one and whose mean time stands for each in
    /// the minimum and maximum.
    fn add(&mut self, dur: u64, calls: u64, sent_bytes: u64, received_bytes: u64) {
        let each = dur / calls.max(1);
        self.min_ns = if self.count == 0 {
            each
        } else {
            self.min_ns.min(each)
        };
        self.max_ns = self.max_ns.max(each);
        self.count += calls.max(1);
        self.total_ns += dur;
        self.sent_bytes += sent_bytes;
        self.received_bytes += received_bytes;
    }
    /// Adds the calls of `other`.
    pub fn merge(&mut self, other: &Totals) {
        if other.count == 0 {
            return;
        }
        self.min_ns = if self.count == 0 {
            other.min_ns
        } else {
            self.min_ns.min(other.min_ns)
        };
        self.max_ns = self.max_ns.max(other.max_ns);
        self.count += other.count;
        self.total_ns += other.total_ns;
        self.sent_bytes += other.sent_bytes;
        self.received_bytes += other.received_bytes;
    }
}

/// One rank's statistics.
#[derive(Clone, Debug, Default)]
pub struct RankStats {
    pub rank: u32,
    pub complete: bool,
    pub events: u64,
    /// From the end of `MPI_Init` to the start of `MPI_Finalize` (or the last event).
    pub app_ns: u64,
    /// Time inside MPI calls other than init and finalize.
    pub mpi_ns: u64,
    /// Time between MPI calls the rank spent off its core (format version 6; 0 before).
    pub off_cpu_ns: u64,
    /// The rest: the application's own work.
    pub compute_ns: u64,
    pub ops: BTreeMap<Op, Totals>,
    pub sites: BTreeMap<(Op, SiteKey), Totals>,
    /// The memory record (format version 3).
    pub memory: Option<Memory>,
    /// The clock record (format version 6).
    pub clock: Option<Clock>,
}

/// Collects statistics rank by rank.
#[derive(Clone, Debug, Default)]
pub struct StatsBuilder {
    ranks: BTreeMap<u32, RankStats>,
    missing: Vec<u32>,
    n_ranks: u32,
}

/// One row of the per-operation table.
#[derive(Clone, Debug, Serialize)]
pub struct OpRow {
    pub op: &'static str,
    #[serde(flatten)]
    pub totals: Totals,
    #[serde(flatten)]
    pub shares: Shares,
}

/// What a row's calls weigh, as mpiP gives it: the mean call, and the calls' time as a
/// share of the application's time (`app_pct`) and of its time in MPI (`mpi_pct`), both
/// summed over the same ranks, in percent to 0.001. `MPI_Init`, `MPI_Init_thread` and
/// `MPI_Finalize` lie outside the application's span (from the end of `MPI_Init` to the
/// start of `MPI_Finalize`): their shares are `null`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Shares {
    pub mean_ns: u64,
    pub app_pct: Option<f64>,
    pub mpi_pct: Option<f64>,
}

impl Shares {
    fn of(op: Op, t: &Totals, app_ns: u64, mpi_ns: u64) -> Shares {
        let pct = |part: u64, whole: u64| {
            (whole > 0).then(|| (part as f64 * 100.0 / whole as f64 * 1000.0).round() / 1000.0)
        };
        let inside = !outside_app(op);
        Shares {
            mean_ns: t.total_ns / t.count.max(1),
            app_pct: pct(t.total_ns, app_ns).filter(|_| inside),
            mpi_pct: pct(t.total_ns, mpi_ns).filter(|_| inside),
        }
    }
}

/// Whether `op`'s time lies outside the application's span (and its MPI time).
pub fn outside_app(op: Op) -> bool {
    matches!(op, Op::Init | Op::InitThread | Op::Finalize)
}

/// One row of the per-call-site table, aggregated over ranks.
#[derive(Clone, Debug, Serialize)]
pub struct SiteRow {
    pub op: &'static str,
    /// `file.c:42`, or `object+0xoffset` when the site could not be symbolized; with
    /// callers (a stack depth above 1) each after a `<`: `file.c:42 < file.c:90`.
    pub site: String,
    pub location: Location,
    pub object: String,
    pub offset: u64,
    /// The callers' locations, innermost first (empty, and left out, at depth 1).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub callers: Vec<Location>,
    pub n_ranks: u32,
    #[serde(flatten)]
    pub totals: Totals,
    #[serde(flatten)]
    pub shares: Shares,
}

#[derive(Clone, Debug, Serialize)]
pub struct RankRow {
    pub rank: u32,
    pub complete: bool,
    pub events: u64,
    pub app_ns: u64,
    pub mpi_ns: u64,
    /// Time between MPI calls spent off the core (waiting for it, or blocked).
    pub off_cpu_ns: u64,
    pub compute_ns: u64,
    /// Working set and memory probe (trace format version 3; `null` before).
    pub memory: Option<Memory>,
    /// Whether off-CPU time was measured (trace format version 6; `null` before).
    pub clock: Option<Clock>,
    pub ops: Vec<OpRow>,
    /// This rank's call sites (`n_ranks` is 1), most time first.
    pub sites: Vec<SiteRow>,
}

/// The whole report, ready to print or serialize.
#[derive(Clone, Debug, Serialize)]
pub struct StatsReport {
    pub n_ranks: u32,
    pub missing_ranks: Vec<u32>,
    pub incomplete_ranks: Vec<u32>,
    pub events: u64,
    pub app_ns: u64,
    pub mpi_ns: u64,
    pub off_cpu_ns: u64,
    pub compute_ns: u64,
    pub ops: Vec<OpRow>,
    pub sites: Vec<SiteRow>,
    pub ranks: Vec<RankRow>,
}

impl StatsBuilder {
    pub fn new(n_ranks: u32) -> StatsBuilder {
        StatsBuilder {
            n_ranks,
            ..StatsBuilder::default()
        }
    }

    /// Records that a rank's file is missing.
    pub fn missing_rank(&mut self, rank: u32) {
        self.missing.push(rank);
    }

    /// Number of ranks of the run, as given to [`StatsBuilder::new`].
    pub fn n_ranks(&self) -> u32 {
        self.n_ranks
    }

    /// The ranks recorded as missing, in the order given.
    pub fn missing_ranks(&self) -> &[u32] {
        &self.missing
    }

    /// Streams a whole rank file into the statistics.
    pub fn add_rank<R: Read>(&mut self, reader: &mut RankReader<R>) -> Result<(), TraceError> {
        let rank = reader.header().rank;
        self.add_events(rank, reader)?;
        // The clock record, read by now.
        let clock = reader.clock();
        if let Some(st) = self.ranks.get_mut(&rank) {
            st.clock = clock;
        }
        Ok(())
    }

    /// Adds rank `rank` from any reader of its events (a perfskel rank file, a location
    /// of an OTF2 archive).
    pub fn add_events(
        &mut self,
        rank: u32,
        events: &mut dyn crate::skeletonize::RankEvents,
    ) -> Result<(), TraceError> {
        let mut st = RankStats {
            rank,
            ..RankStats::default()
        };
        let mut ev = Event::default();
        // One map update per event, keyed by small integers; call-site ids become
        // object-relative keys once at the end (within a rank, ids and addresses are 1:1).
        let mut by_site: BTreeMap<(Op, u64), Totals> = BTreeMap::new();
        let (mut app_start, mut app_end, mut last_end) = (None, None, 0);
        while events.next_event(&mut ev)? {
            let op = ev.op();
            let dur = ev.duration_ns();
            last_end = ev.end_ns;
            st.events += ev.calls();
            match op {
                Op::Init | Op::InitThread => app_start = Some(ev.end_ns),
                Op::Finalize => app_end = Some(ev.start_ns),
                _ => st.mpi_ns += dur,
            }
            st.off_cpu_ns += ev.off_cpu_ns;
            // `bytes` is what a receive received (a probe, what it matched); for every
            // other operation it is sent, and `rbytes` received.
            let (sent, received) = match op {
                Op::Recv | Op::Irecv => (0, ev.bytes.unwrap_or(0)),
                Op::Probe | Op::Iprobe => (0, 0),
                _ => (ev.bytes.unwrap_or(0), ev.rbytes.unwrap_or(0)),
            };
            by_site
                .entry((op, ev.site))
                .or_default()
                .add(dur, ev.calls(), sent, received);
        }
        let sites = events.sites();
        for ((op, site), totals) in by_site {
            st.ops.entry(op).or_default().merge(&totals);
            if let Some(key) = sites.get(&site) {
                st.sites
                    .entry((op, key.clone()))
                    .or_default()
                    .merge(&totals);
            }
        }
        st.complete = matches!(events.completion(), Completion::Complete { .. });
        st.memory = events.memory();
        let start = app_start.unwrap_or(0);
        st.app_ns = app_end.unwrap_or(last_end).saturating_sub(start);
        st.off_cpu_ns = st.off_cpu_ns.min(st.app_ns.saturating_sub(st.mpi_ns));
        st.compute_ns = st
            .app_ns
            .saturating_sub(st.mpi_ns)
            .saturating_sub(st.off_cpu_ns);
        self.ranks.insert(rank, st);
        Ok(())
    }

    /// How every rank added so far timed its gaps (for readers without a clock record).
    pub fn set_clock(&mut self, clock: Clock) {
        for st in self.ranks.values_mut() {
            st.clock = Some(clock);
        }
    }

    pub fn rank(&self, rank: u32) -> Option<&RankStats> {
        self.ranks.get(&rank)
    }

    /// Every call site seen, for symbolization.
    pub fn site_keys(&self) -> Vec<SiteKey> {
        let mut keys: Vec<SiteKey> = self
            .ranks
            .values()
            .flat_map(|r| r.sites.keys().map(|(_, k)| k.clone()))
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// Builds the report; `locate` symbolizes call sites.
    pub fn report(&self, locate: &dyn Fn(&SiteKey) -> Location) -> StatsReport {
        let mut ops: BTreeMap<Op, Totals> = BTreeMap::new();
        let mut sites: BTreeMap<(Op, SiteKey), (Totals, u32)> = BTreeMap::new();
        let (mut events, mut app_ns, mut mpi_ns, mut compute_ns) = (0, 0, 0, 0);
        let mut off_cpu_ns = 0;
        for st in self.ranks.values() {
            events += st.events;
            app_ns += st.app_ns;
            mpi_ns += st.mpi_ns;
            off_cpu_ns += st.off_cpu_ns;
            compute_ns += st.compute_ns;
            for (op, t) in &st.ops {
                ops.entry(*op).or_default().merge(t);
            }
            for (key, t) in &st.sites {
                let e = sites.entry(key.clone()).or_default();
                e.0.merge(t);
                e.1 += 1;
            }
        }
        let op_rows = |m: &BTreeMap<Op, Totals>, app_ns: u64, mpi_ns: u64| {
            m.iter()
                .map(|(op, t)| OpRow {
                    op: op.mpi_name(),
                    totals: *t,
                    shares: Shares::of(*op, t, app_ns, mpi_ns),
                })
                .collect::<Vec<_>>()
        };
        let all_sites = site_rows(sites, locate, app_ns, mpi_ns);
        StatsReport {
            n_ranks: self.n_ranks,
            missing_ranks: self.missing.clone(),
            incomplete_ranks: self
                .ranks
                .values()
                .filter(|r| !r.complete)
                .map(|r| r.rank)
                .collect(),
            events,
            app_ns,
            mpi_ns,
            off_cpu_ns,
            compute_ns,
            ops: op_rows(&ops, app_ns, mpi_ns),
            sites: all_sites,
            ranks: self
                .ranks
                .values()
                .map(|r| RankRow {
                    rank: r.rank,
                    complete: r.complete,
                    events: r.events,
                    app_ns: r.app_ns,
                    mpi_ns: r.mpi_ns,
                    off_cpu_ns: r.off_cpu_ns,
                    compute_ns: r.compute_ns,
                    memory: r.memory,
                    clock: r.clock,
                    ops: op_rows(&r.ops, r.app_ns, r.mpi_ns),
                    sites: site_rows(
                        r.sites.iter().map(|(k, t)| (k.clone(), (*t, 1))).collect(),
                        locate,
                        r.app_ns,
                        r.mpi_ns,
                    ),
                })
                .collect(),
        }
    }
}

/// Symbolizes and orders call-site rows: most time first, ties broken by site and
/// operation name so the order is deterministic.
fn site_rows(
    sites: BTreeMap<(Op, SiteKey), (Totals, u32)>,
    locate: &dyn Fn(&SiteKey) -> Location,
    app_ns: u64,
    mpi_ns: u64,
) -> Vec<SiteRow> {
    let mut rows: Vec<SiteRow> = sites
        .into_iter()
        .map(|((op, key), (totals, n_ranks))| {
            let location = locate(&key);
            let site = stack_name(&key, locate);
            SiteRow {
                op: op.mpi_name(),
                site,
                location,
                callers: key.caller_keys().map(|c| locate(&c)).collect(),
                object: key.object,
                offset: key.offset,
                n_ranks,
                totals,
                shares: Shares::of(op, &totals, app_ns, mpi_ns),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.totals
            .total_ns
            .cmp(&a.totals.total_ns)
            .then_with(|| a.site.cmp(&b.site))
            .then_with(|| a.op.cmp(b.op))
    });
    rows
}
