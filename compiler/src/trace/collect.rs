//! One rank's whole trace in memory: takes a [`RankReader`], gives its events with call
//! sites as object-relative [`SiteKey`]s and communicators as world-rank lists. For
//! passes that need random access (logicalization, loop-nest compression); statistics and
//! `trace show` stream instead.

use std::collections::BTreeMap;
use std::io::Read;

use super::reader::{Clock, Completion, Event, Header, Memory, RankReader, Site, TraceError};
use super::stats::SiteKey;

/// Everything one rank file holds.
#[derive(Clone, Debug)]
pub struct RankTrace {
    pub header: Header,
    pub events: Vec<Event>,
    /// Call-site id (as in [`Event::site`]) → where it is, independent of load address.
    pub sites: BTreeMap<u64, SiteKey>,
    /// Communicator id (as in [`Event::comm`]) → world rank of each of its ranks.
    pub comms: BTreeMap<u64, Vec<i64>>,
    /// Communicator id → its Cartesian grid (size, periodic) per dimension, for those
    /// the application gave one (format 5).
    pub grids: BTreeMap<u64, Vec<(u64, bool)>>,
    pub completion: Completion,
    /// Working set and memory probe (format version 3).
    pub memory: Option<Memory>,
    /// Whether the events' off-CPU time was measured (format version 6).
    pub clock: Option<Clock>,
    /// What a failed `MPI_Test` cost the rank, ps (format version 10; see
    /// [`RankReader::poll_ps`]).
    pub poll_ps: Option<u64>,
}

impl RankTrace {
    /// Reads the rest of `reader`.
    pub fn read<R: Read>(mut reader: RankReader<R>) -> Result<RankTrace, TraceError> {
        let mut events = Vec::new();
        let mut ev = Event::default();
        while reader.next_event(&mut ev)? {
            events.push(ev.clone());
        }
        Ok(RankTrace {
            header: reader.header().clone(),
            events,
            sites: site_keys(&reader),
            comms: comm_members(&reader),
            grids: comm_grids(&reader),
            completion: completion(&reader),
            memory: reader.memory(),
            clock: reader.clock(),
            poll_ps: reader.poll_ps(),
        })
    }
}

/// The call sites `reader` has read so far (all of them once it reached the end), by id,
/// as object-relative keys.
pub fn site_keys<R: Read>(reader: &RankReader<R>) -> BTreeMap<u64, SiteKey> {
    (1..=reader.sites().len() as u64)
        .filter_map(|id| Some((id, site_key(reader, id)?)))
        .collect()
}

/// Where call site `id` of `reader` is, independent of the load address, with its
/// callers where the trace has them; `None` for a site not defined (yet).
pub fn site_key<R: Read>(reader: &RankReader<R>, id: u64) -> Option<SiteKey> {
    let mut key = frame_key(reader, reader.site(id)?);
    key.callers = reader
        .callers(id)
        .iter()
        .map(|c| {
            let f = frame_key(reader, c);
            (f.object, f.offset)
        })
        .collect();
    Some(key)
}

/// Where return address `s` of `reader` is, independent of the load address.
fn frame_key<R: Read>(reader: &RankReader<R>, s: &Site) -> SiteKey {
    match reader.object(s.object) {
        Some(o) => SiteKey::at(o.path.as_str(), s.addr.wrapping_sub(o.bias)),
        None => SiteKey::at("", s.addr),
    }
}

/// The communicators `reader` has read so far: id → world rank of each member.
pub fn comm_members<R: Read>(reader: &RankReader<R>) -> BTreeMap<u64, Vec<i64>> {
    reader
        .comms()
        .iter()
        .map(|(id, c)| (*id, c.world_ranks.clone()))
        .collect()
}

/// The Cartesian grids of the communicators `reader` has read so far, by id (those
/// without one are left out).
pub fn comm_grids<R: Read>(reader: &RankReader<R>) -> BTreeMap<u64, Vec<(u64, bool)>> {
    reader
        .comms()
        .iter()
        .filter(|(_, c)| !c.grid.is_empty())
        .map(|(id, c)| (*id, c.grid.clone()))
        .collect()
}

/// How the file ended, once `next_event` returned `Ok(false)` (a reader that has not
/// reached its end counts as cut off at its start).
pub fn completion<R: Read>(reader: &RankReader<R>) -> Completion {
    reader.completion().unwrap_or(Completion::Incomplete {
        valid_bytes: 0,
        trailing_bytes: 0,
    })
}
