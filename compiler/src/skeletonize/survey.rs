//! The survey sweep: takes every rank's event stream once, gives the trace-wide facts the
//! tokens depend on ([`Survey`]: communication matrix, a sample of recorded peers,
//! communicators, tags and sizes, each rank's call-site table) without keeping events.
//!
//! A rank's contributions are gathered apart ([`RankSurvey`]) and added only once the
//! rank has been read to its end: a file that turns out unreadable halfway leaves no
//! trace in the survey, as when the whole rank was read before it was looked at. Call
//! sites are resolved against the rank's site table then, so a site defined after its
//! first use still counts.

use std::collections::{BTreeMap, BTreeSet};

use super::comms::{self, CommSurvey};
use super::exchange;
use super::source::{self, Absent};
use super::tokens::{EventSurvey, RankEventSurvey};
use super::topo::RecordedPeer;
use super::{Input, Progress, Summary};
use crate::logicalize::trace::TraceMatrix;
use crate::logicalize::CommMatrix;
use crate::trace::format::PEER_PROC_NULL;
use crate::trace::stats::SiteKey;
use crate::trace::{Completion, Event, Op, OpClass};

/// At most this many point-to-point peers, over all ranks, are scored when choosing the
/// topology (and at least 64 per rank).
const PEER_SAMPLE: usize = 200_000;

/// How often (in events) a long rank reports progress.
pub(super) const PROGRESS_EVERY: u64 = 1 << 20;

/// What the survey pass learns from every rank before tokens are made.
pub(super) struct Survey {
    pub matrix: CommMatrix,
    pub peers: Vec<RecordedPeer>,
    pub comms: CommSurvey,
    pub events: EventSurvey,
    /// Task loops' receive sites and the channels that feed them ([`super::serve`]).
    pub serve: super::serve::ServeSurvey,
    pub complete: Vec<u32>,
    pub readable: Vec<u32>,
    pub events_per_rank: BTreeMap<u32, u64>,
    /// Each readable rank's call sites, by rank-local id.
    pub sites: BTreeMap<u32, BTreeMap<u64, SiteKey>>,
    /// The memory record of each rank that has one (trace format 3).
    pub memory: BTreeMap<u32, crate::trace::Memory>,
    /// The Cartesian grid the application declared over all of `MPI_COMM_WORLD` in its
    /// order (`MPI_Cart_create` without reordering; format 5): per dimension its size and
    /// whether it is periodic. The first such communicator the lowest rank made.
    pub grid: Option<Vec<(u64, bool)>>,
    /// Per rank, the requests `MPI_Cancel` named (their calls and completions are left
    /// out of the skeleton).
    pub cancelled: BTreeMap<u32, BTreeSet<u64>>,
    /// Per rank, its data-addressed stretches ([`exchange`]).
    pub stretches: BTreeMap<u32, Vec<exchange::Stretch>>,
    /// Per phase (world collectives so far), messages sent to each world rank, the
    /// receives each rank posted and the phase of each cancel.
    sent_to: BTreeMap<u64, BTreeMap<u32, u64>>,
    receives: BTreeMap<u32, BTreeMap<u32, u64>>,
    cancel_phase: BTreeMap<u32, BTreeMap<u64, u32>>,
}

/// Reads every rank once; fills the summary's raw event count and its missing,
/// unreadable and incomplete ranks.
pub(super) fn survey(
    input: &Input<'_>,
    summary: &mut Summary,
    site_name: &mut dyn FnMut(&SiteKey) -> Option<String>,
    progress: &mut dyn FnMut(Progress),
) -> Survey {
    let n_ranks = input.ranks.n_ranks();
    let mut survey = Survey {
        matrix: CommMatrix::new(n_ranks).unwrap_or_default(),
        peers: Vec::new(),
        comms: CommSurvey::default(),
        events: EventSurvey::default(),
        serve: Default::default(),
        complete: Vec::new(),
        readable: Vec::new(),
        events_per_rank: BTreeMap::new(),
        sites: BTreeMap::new(),
        memory: BTreeMap::new(),
        grid: None,
        cancelled: BTreeMap::new(),
        stretches: BTreeMap::new(),
        sent_to: BTreeMap::new(),
        receives: BTreeMap::new(),
        cancel_phase: BTreeMap::new(),
    };
    let peer_limit = (PEER_SAMPLE / n_ranks.max(1) as usize).max(64);
    for rank in 0..n_ranks {
        let mut part = RankSurvey::new(rank, n_ranks, peer_limit);
        let before = summary.raw_events;
        let mut seen = 0u64;
        let read = source::read_rank(input.ranks, rank, &mut |ev| {
            part.add(ev);
            seen += 1;
            if seen.is_multiple_of(PROGRESS_EVERY) {
                progress(Progress {
                    done: before + seen,
                    total: 0,
                });
            }
        });
        let (stream, n_events) = match read {
            Ok(read) => read,
            Err(Absent::Missing) => {
                summary.missing_ranks.push(rank);
                continue;
            }
            Err(Absent::Unreadable) => {
                summary.unreadable_ranks.push(rank);
                continue;
            }
        };
        summary.raw_events += n_events;
        survey.events_per_rank.insert(rank, n_events);
        survey.readable.push(rank);
        if matches!(stream.completion(), Completion::Complete { .. }) {
            survey.complete.push(rank);
        } else {
            summary.incomplete_ranks.push(rank);
        }
        if let Some(memory) = stream.memory() {
            survey.memory.insert(rank, memory);
        }
        if survey.grid.is_none() {
            let world: Vec<i64> = (0..i64::from(n_ranks)).collect();
            let members = stream.comms();
            survey.grid = stream
                .grids()
                .into_iter()
                .find(|(id, _)| members.get(id) == Some(&world))
                .map(|(_, g)| g);
        }
        let sites = stream.sites();
        part.add_to(&mut survey, &sites, &stream.comms(), site_name);
        survey.sites.insert(rank, sites);
        progress(Progress {
            done: summary.raw_events,
            total: 0,
        });
    }
    survey.late_cancels();
    survey
}

impl Survey {
    /// A cancel can come too late (the receive had matched a message; `MPI_Cancel`
    /// then does nothing), which the trace does not say: where a rank's receives other
    /// than the cancelled ones are fewer than the messages sent to it, as many cancelled
    /// receives got the rest and are kept: for the j-th, the last cancel before the
    /// first phase (stretch between world collectives) after which the rank has
    /// received j messages fewer than were sent to it.
    fn late_cancels(&mut self) {
        let (none, no_phases) = (BTreeMap::new(), BTreeMap::new());
        for (rank, cancelled) in &mut self.cancelled {
            let sent = self.sent_to.get(&u64::from(*rank)).unwrap_or(&none);
            let posted = self.receives.get(rank).unwrap_or(&none);
            let phases = self.cancel_phase.get(rank).unwrap_or(&no_phases);
            let total = |m: &BTreeMap<u32, u64>| m.values().sum::<u64>();
            let kept = total(posted).saturating_sub(cancelled.len() as u64);
            let late = total(sent).saturating_sub(kept).min(cancelled.len() as u64);
            if late == 0 {
                continue;
            }
            // The deficit after each phase.
            let mut all: BTreeSet<u32> = sent.keys().chain(posted.keys()).copied().collect();
            all.extend(phases.values());
            let (mut s, mut p, mut c) = (0u64, 0u64, 0u64);
            let mut deficit: Vec<(u32, u64)> = Vec::new();
            for k in all {
                s += sent.get(&k).copied().unwrap_or(0);
                p += posted.get(&k).copied().unwrap_or(0);
                c += phases.values().filter(|&&ph| ph == k).count() as u64;
                deficit.push((k, s.saturating_sub(p.saturating_sub(c))));
            }
            for j in 1..=late {
                let upto = deficit
                    .iter()
                    .find(|(_, d)| *d >= j)
                    .map_or(u32::MAX, |(k, _)| *k);
                let pick = cancelled
                    .iter()
                    .rev()
                    .find(|r| phases.get(r).is_some_and(|ph| *ph <= upto))
                    .or_else(|| cancelled.iter().next_back())
                    .copied();
                if let Some(r) = pick {
                    cancelled.remove(&r);
                }
            }
        }
        self.cancelled.retain(|_, c| !c.is_empty());
    }
}

/// One rank's share of the survey while it is being read.
struct RankSurvey {
    rank: u32,
    /// This rank's sends and collectives (`None` once the matrix refused an event).
    matrix: Option<TraceMatrix>,
    /// The peers of its first point-to-point calls: (site id, half, peer), `None` for
    /// `MPI_PROC_NULL`; half 0 is the send or receive, 1 the receive of a sendrecv.
    peers: Vec<(u64, u8, Option<u64>)>,
    peer_limit: usize,
    /// Communicator-creating calls: new id, parent id, site id, call.
    creating: Vec<(Option<u64>, u64, u64, Op)>,
    events: RankEventSurvey,
    serve: super::serve::RankServe,
    intercomms: comms::Intercomms,
    /// Requests `MPI_Cancel` named.
    cancelled: BTreeSet<u64>,
    /// Per phase (world collectives so far), messages sent by world rank of the
    /// receiver, receives posted, and the phase of each cancel (for a cancel that came
    /// too late: its receive got a message).
    phase: u32,
    sent_to: BTreeMap<(u32, u64), u64>,
    receives: BTreeMap<u32, u64>,
    cancel_phase: BTreeMap<u64, u32>,
    exchanges: exchange::Scan,
}

impl RankSurvey {
    fn new(rank: u32, n_ranks: u32, peer_limit: usize) -> Self {
        RankSurvey {
            rank,
            matrix: CommMatrix::new(n_ranks).ok().map(|matrix| TraceMatrix {
                matrix,
                ..TraceMatrix::default()
            }),
            peers: Vec::new(),
            peer_limit,
            creating: Vec::new(),
            events: RankEventSurvey::default(),
            serve: Default::default(),
            intercomms: comms::Intercomms::default(),
            cancelled: BTreeSet::new(),
            phase: 0,
            sent_to: BTreeMap::new(),
            receives: BTreeMap::new(),
            cancel_phase: BTreeMap::new(),
            exchanges: exchange::Scan::new(n_ranks),
        }
    }

    fn add(&mut self, ev: &Event) {
        self.exchanges.add(ev);
        if ev.op == Op::Cancel {
            self.cancelled.extend(&ev.reqs);
            self.cancel_phase
                .extend(ev.reqs.iter().map(|r| (*r, self.phase)));
        }
        if ev.op.class() == OpClass::Collective && ev.comm.unwrap_or(0) == 0 {
            self.phase += 1;
        }
        let sends = crate::logicalize::trace::is_send(ev.op)
            .then_some(ev.peer)
            .flatten();
        let receives = match ev.op {
            Op::Recv | Op::Irecv => ev.peer,
            Op::Sendrecv | Op::SendrecvReplace => ev.src,
            _ => None,
        };
        if let Some(to) = sends.and_then(|p| u64::try_from(p).ok()) {
            *self.sent_to.entry((self.phase, to)).or_default() += 1;
        }
        if receives.is_some_and(|p| p != PEER_PROC_NULL) {
            *self.receives.entry(self.phase).or_default() += 1;
        }
        let on_intercomm = self.intercomms.see(ev);
        if comms::is_creating(ev.op) {
            self.creating
                .push((ev.newcomm, ev.comm.unwrap_or(0), ev.site, ev.op));
        }
        // What the skeleton drops (one-sided calls, intercommunicators) shapes neither
        // the topology nor the sizes and tags.
        if comms::unmodelled(ev, on_intercomm).is_some() {
            return;
        }
        if let Some(m) = &mut self.matrix {
            if m.add_event(self.rank, ev).is_err() {
                self.matrix = None;
            }
        }
        if ev.op.class() == OpClass::PointToPoint {
            for (half, p) in [(0u8, ev.peer), (1, ev.src)] {
                if self.peers.len() >= self.peer_limit {
                    break;
                }
                let peer = match p {
                    None => continue,
                    Some(PEER_PROC_NULL) => None,
                    Some(p) => match u64::try_from(p) {
                        Ok(p) => Some(p),
                        Err(_) => continue,
                    },
                };
                self.peers.push((ev.site, half, peer));
            }
        }
        self.events.add(ev);
        self.serve.add(ev);
    }

    /// Adds the rank, read to its end, to the trace's survey.
    fn add_to(
        self,
        survey: &mut Survey,
        sites: &BTreeMap<u64, SiteKey>,
        comms: &BTreeMap<u64, Vec<i64>>,
        site_name: &mut dyn FnMut(&SiteKey) -> Option<String>,
    ) {
        if let Some(part) = self.matrix {
            for ((src, dst), traffic) in part.matrix.p2p {
                let _ = survey.matrix.add_p2p(src, dst, traffic);
            }
            for (name, traffic) in &part.matrix.collectives {
                survey.matrix.add_collective(name, *traffic);
            }
            survey.matrix.self_traffic.add(&part.matrix.self_traffic);
        }
        let site = |id: u64| {
            sites
                .get(&id)
                .map(|k| (k.object.clone(), k.offset))
                .unwrap_or_default()
        };
        if !self.cancelled.is_empty() {
            survey.cancelled.insert(self.rank, self.cancelled);
        }
        for ((phase, to), n) in self.sent_to {
            *survey
                .sent_to
                .entry(to)
                .or_default()
                .entry(phase)
                .or_default() += n;
        }
        survey.receives.insert(self.rank, self.receives);
        survey.stretches.insert(self.rank, self.exchanges.finish());
        survey.cancel_phase.insert(self.rank, self.cancel_phase);
        survey
            .peers
            .extend(self.peers.into_iter().map(|(id, half, peer)| RecordedPeer {
                rank: self.rank,
                site: (site(id), half),
                peer,
            }));
        let creating = self
            .creating
            .into_iter()
            .map(|(new, parent, site, op)| comms::Creation {
                new,
                parent,
                site: sites.get(&site).and_then(&mut *site_name),
                op,
            })
            .collect();
        survey.comms.add_rank(self.rank, comms, creating);
        survey.events.add_rank(self.events, sites);
        survey.serve.add_rank(self.rank, self.serve, sites);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rank 1 cancels a receive in each of three phases (stretches between world
    /// collectives); in phase 1 the cancel came too late (a message was sent to it that
    /// no other receive took): that receive is kept, the others stay left out.
    #[test]
    fn a_late_cancel_keeps_the_receive_of_its_phase() {
        let mut survey = Survey {
            matrix: CommMatrix::default(),
            peers: Vec::new(),
            comms: CommSurvey::default(),
            events: EventSurvey::default(),
            serve: Default::default(),
            complete: vec![0, 1],
            readable: vec![0, 1],
            events_per_rank: BTreeMap::new(),
            sites: BTreeMap::new(),
            memory: BTreeMap::new(),
            grid: None,
            cancelled: [(1, BTreeSet::from([10, 20, 30]))].into(),
            stretches: BTreeMap::new(),
            // Rank 0 sends rank 1 two messages in phase 0, three in phase 1, one in 2.
            sent_to: [(1, BTreeMap::from([(0, 2), (1, 3), (2, 1)]))].into(),
            // Rank 1 posts three receives in each phase, one of which it cancels.
            receives: [(1, BTreeMap::from([(0, 3), (1, 3), (2, 2)]))].into(),
            cancel_phase: [(1, BTreeMap::from([(10, 0), (20, 1), (30, 2)]))].into(),
        };
        survey.late_cancels();
        assert_eq!(survey.cancelled, [(1, BTreeSet::from([10, 30]))].into());
    }
}
