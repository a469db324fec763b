//! Where the pass gets its events: takes the caller's [`Ranks`] (a trace directory, ranks
//! already in memory), gives one rank's events as a stream, from start to end, as many
//! times as the pass reads it. Nothing here holds a rank's events: a rank file is read
//! record by record by [`RankReader`], so memory does not grow with the trace's length.

use std::collections::BTreeMap;
use std::io::Read;

use crate::trace::collect;
use crate::trace::stats::SiteKey;
use crate::trace::{Completion, Event, Memory, RankReader, RankTrace, TraceError};

/// Gives one rank's events at a time. The pass reads every rank three times, each time
/// from the start: a survey, then the two halves of the compression (loop discovery,
/// then the compute statistics of the loop bodies); per rank it keeps only aggregates
/// and the loop nest.
pub trait Ranks {
    fn n_ranks(&self) -> u32;
    /// Opens one rank for one read from its start.
    fn open(&self, rank: u32) -> Opened<'_>;
}

/// One rank opened by [`Ranks::open`].
pub enum Opened<'a> {
    Events(Box<dyn RankEvents + 'a>),
    Missing,
    Unreadable,
}

/// One rank's events read in order, with the tables they refer to.
pub trait RankEvents {
    /// Reads the next event into `ev`: `Ok(false)` at the end. An error makes the whole
    /// rank unreadable (the implementation reports it; the pass only lists the rank).
    fn next_event(&mut self, ev: &mut Event) -> Result<bool, TraceError>;
    /// The call sites read so far (all of them once the end is reached), by id.
    fn sites(&self) -> BTreeMap<u64, SiteKey>;
    /// The communicators read so far: id → world rank of each member.
    fn comms(&self) -> BTreeMap<u64, Vec<i64>>;
    /// The Cartesian grids of the communicators read so far (format 5): id → (size,
    /// periodic) per dimension.
    fn grids(&self) -> BTreeMap<u64, Vec<(u64, bool)>>;
    /// How the rank ended (once [`RankEvents::next_event`] gave `Ok(false)`).
    fn completion(&self) -> Completion;
    /// The rank's memory record (format 3), once the end is reached.
    fn memory(&self) -> Option<Memory>;
    /// What a failed `MPI_Test` cost the rank, ps (the poll record of format 10, which
    /// comes before the first event).
    fn poll_ps(&self) -> Option<u64>;
}

impl<R: Read> RankEvents for RankReader<R> {
    fn next_event(&mut self, ev: &mut Event) -> Result<bool, TraceError> {
        RankReader::next_event(self, ev)
    }
    fn sites(&self) -> BTreeMap<u64, SiteKey> {
        collect::site_keys(self)
    }
    fn comms(&self) -> BTreeMap<u64, Vec<i64>> {
        collect::comm_members(self)
    }
    fn grids(&self) -> BTreeMap<u64, Vec<(u64, bool)>> {
        collect::comm_grids(self)
    }
    fn completion(&self) -> Completion {
        collect::completion(self)
    }
    fn memory(&self) -> Option<Memory> {
        RankReader::memory(self)
    }
    fn poll_ps(&self) -> Option<u64> {
        RankReader::poll_ps(self)
    }
}

/// What the caller read of one rank, for [`InMemory`].
#[derive(Clone, Copy, Debug)]
pub enum RankSource<'a> {
    Trace(&'a RankTrace),
    Missing,
    Unreadable,
}

/// Ranks already in memory (tests, small synthetic traces).
pub struct InMemory<'a>(pub Vec<RankSource<'a>>);

impl Ranks for InMemory<'_> {
    fn n_ranks(&self) -> u32 {
        self.0.len() as u32
    }

    fn open(&self, rank: u32) -> Opened<'_> {
        match self.0.get(rank as usize) {
            Some(RankSource::Trace(trace)) => Opened::Events(Box::new(Replay { trace, next: 0 })),
            Some(RankSource::Unreadable) => Opened::Unreadable,
            Some(RankSource::Missing) | None => Opened::Missing,
        }
    }
}

/// A [`RankTrace`] read again from its start.
struct Replay<'a> {
    trace: &'a RankTrace,
    next: usize,
}

impl RankEvents for Replay<'_> {
    fn next_event(&mut self, ev: &mut Event) -> Result<bool, TraceError> {
        match self.trace.events.get(self.next) {
            Some(e) => {
                ev.clone_from(e);
                self.next += 1;
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn sites(&self) -> BTreeMap<u64, SiteKey> {
        self.trace.sites.clone()
    }
    fn comms(&self) -> BTreeMap<u64, Vec<i64>> {
        self.trace.comms.clone()
    }
    fn grids(&self) -> BTreeMap<u64, Vec<(u64, bool)>> {
        self.trace.grids.clone()
    }
    fn completion(&self) -> Completion {
        self.trace.completion
    }
    fn memory(&self) -> Option<Memory> {
        self.trace.memory
    }
    fn poll_ps(&self) -> Option<u64> {
        self.trace.poll_ps
    }
}

/// Why a rank gave no events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Absent {
    Missing,
    Unreadable,
}

/// Reads rank `rank` from start to end, giving every event to `each`; gives the stream
/// after its end (for its tables and completion) and the number of events.
pub(crate) fn read_rank<'a>(
    ranks: &'a dyn Ranks,
    rank: u32,
    each: &mut dyn FnMut(&Event),
) -> Result<(Box<dyn RankEvents + 'a>, u64), Absent> {
    let mut stream = match ranks.open(rank) {
        Opened::Events(stream) => stream,
        Opened::Missing => return Err(Absent::Missing),
        Opened::Unreadable => return Err(Absent::Unreadable),
    };
    let mut ev = Event::default();
    let mut n_events = 0u64;
    loop {
        match stream.next_event(&mut ev) {
            Ok(true) => {
                n_events += 1;
                if let Some(ps) = stream.poll_ps() {
                    split_poll(&mut ev, ps);
                }
                each(&ev);
            }
            Ok(false) => return Ok((stream, n_events)),
            Err(_) => return Err(Absent::Unreadable),
        }
    }
}

/// A failed poll's time as the skeleton makes it again: the calls at what a failed
/// `MPI_Test` cost the rank (`ps` each, the poll record), the rest of the traced
/// duration moved to the gap before it, the application's compute. The tracer times one
/// call of a run in 64, and that call also waits for the work before it to land (a loop
/// of cache misses like HPCC's RandomAccess): 32 ns a call traced where the calls cost
/// 12 to 16 ns, so a skeleton replaying the split as traced ran HPCC 7 % short. The
/// event's end stays where it was.
///
/// Only where the poll stays in user space and the excess is what a wait for memory
/// can be ([`MAX_QUIET_POLL_PS`], [`MAX_STALL_NS`]): a poll that enters the kernel (a
/// yield where ranks share cores, a socket over TCP) costs what the other processes
/// make it cost at that moment, which the poll record, taken as MPI starts, does not
/// know (HPCC at 4 ranks on 2 cores: 0.4 µs measured, 1.2 µs a poll in the run; moved,
/// the skeleton's own yielding polls paid it again: +36 % at 1:1).
pub(crate) fn split_poll(ev: &mut Event, ps: u64) {
    if !ev.is_failed_poll() || ps > MAX_QUIET_POLL_PS {
        return;
    }
    let calls = u128::from(ev.calls());
    let keep = calls * u128::from(ps) / 1000;
    let dur = u128::from(ev.duration_ns());
    if keep < dur && dur - keep <= calls * u128::from(MAX_STALL_NS) {
        if let Ok(keep) = u64::try_from(keep) {
            ev.start_ns = ev.end_ns - keep;
        }
    }
}

/// The most a failed poll may cost when MPI starts (ps) for [`split_poll`] to move part
/// of the traced polls' time: a test that stays in user space costs tens of ns (12 to
/// 16 ns with Open MPI's shared memory here); a system call in a virtual machine, a
/// few hundred.
pub const MAX_QUIET_POLL_PS: u64 = 200_000;
/// The most a timed poll may have waited for the work before it, per call (ns): about a
/// memory access's latency; a larger excess is the poll's own cost.
pub const MAX_STALL_NS: u64 = 200;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Op;

    fn poll(op: Op, flag: u64, polls: u64, start_ns: u64, end_ns: u64) -> Event {
        Event {
            op,
            start_ns,
            end_ns,
            flag: Some(flag),
            polls,
            ..Event::default()
        }
    }

    /// A run of failed polls keeps its calls at the measured cost and gives the rest
    /// of its traced time to the gap before it; its end does not move.
    #[test]
    fn a_failed_poll_keeps_its_measured_cost_and_the_rest_is_compute() {
        // 2,000 calls traced at 32 ns, a failed test measured at 15.5 ns.
        let mut ev = poll(Op::Testany, 0, 2_000, 10_000, 74_000);
        split_poll(&mut ev, 15_500);
        assert_eq!((ev.start_ns, ev.end_ns), (74_000 - 31_000, 74_000));
        // A single failed call (no run) the same way.
        let mut ev = poll(Op::Iprobe, 0, 0, 1_000, 1_100);
        split_poll(&mut ev, 15_500);
        assert_eq!((ev.start_ns, ev.end_ns), (1_085, 1_100));
        // Calls that cost less than measured stay as traced.
        let mut ev = poll(Op::Test, 0, 100, 1_000, 2_000);
        split_poll(&mut ev, 15_500);
        assert_eq!((ev.start_ns, ev.end_ns), (1_000, 2_000));
        // Polls that enter the kernel: measured at 411 ns as MPI started (a yield with
        // no other process ready), 1.2 µs each in the run (yields to the ranks sharing
        // the core): as traced. The same excess over a quiet poll is no wait for memory.
        let mut ev = poll(Op::Testany, 0, 685, 0, 685 * 1_200);
        split_poll(&mut ev, 411_562);
        assert_eq!(ev.start_ns, 0);
        split_poll(&mut ev, 15_500);
        assert_eq!(ev.start_ns, 0);
        // An excess of up to 200 ns a call moves.
        let mut ev = poll(Op::Testany, 0, 10, 0, 10 * 215);
        split_poll(&mut ev, 15_000);
        assert_eq!(ev.start_ns, 10 * 200);
        // A test that completed something, and any other call, are not polls.
        let mut ev = poll(Op::Test, 1, 0, 1_000, 2_000);
        split_poll(&mut ev, 15_500);
        assert_eq!(ev.start_ns, 1_000);
        let mut ev = poll(Op::Test, 0, 0, 1_000, 2_000);
        ev.reqs = vec![3];
        split_poll(&mut ev, 15_500);
        assert_eq!(ev.start_ns, 1_000);
        let mut ev = poll(Op::Send, 0, 0, 1_000, 2_000);
        split_poll(&mut ev, 15_500);
        assert_eq!(ev.start_ns, 1_000);
    }
}
