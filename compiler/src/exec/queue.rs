//! Matching: messages waiting for their receive and receives waiting for their message,
//! per destination, and collectives some members reached while others have not yet.
//!
//! MPI's rules, written once: a receive takes the oldest pending message from its
//! source (any source for `any`) with its tag, so messages between two ranks on one
//! communicator and tag arrive in the order they were sent; the k-th collective each
//! member calls on a communicator instance is one operation, complete once every member
//! has called it.

use std::collections::VecDeque;

/// The source of a pending receive that takes a message from any rank.
pub(crate) const ANY: u32 = u32::MAX;

/// A pending message or receive: its source (the sender's rank in the communicator, or
/// [`ANY`] for a receive that takes any) and tag.
pub(crate) trait Envelope {
    fn src(&self) -> u32;
    fn tag(&self) -> u32;
}

/// Implements [`Envelope`] for structs with `src` and `tag` fields.
macro_rules! envelope {
    ($($t:ty),*) => {
        $(impl $crate::exec::queue::Envelope for $t {
            fn src(&self) -> u32 {
                self.src
            }
            fn tag(&self) -> u32 {
                self.tag
            }
        })*
    };
}
pub(crate) use envelope;

/// Pending sends and receives, by destination slot (an instance's base plus the
/// destination's rank in it).
pub(crate) struct Queues<S, R> {
    sends: Vec<VecDeque<S>>,
    recvs: Vec<VecDeque<R>>,
}

impl<S: Envelope, R: Envelope> Queues<S, R> {
    pub fn new(slots: usize) -> Queues<S, R> {
        Queues {
            sends: (0..slots).map(|_| VecDeque::new()).collect(),
            recvs: (0..slots).map(|_| VecDeque::new()).collect(),
        }
    }

    /// A message from `src` with `tag` for `slot`: the receive it completes, if one is
    /// posted (a receive's tag may be [`ANY`]: `while recv`); otherwise the caller
    /// queues it with [`Queues::queue_send`].
    #[inline]
    pub fn receive_for(&mut self, slot: usize, src: u32, tag: u32) -> Option<R> {
        take(&mut self.recvs[slot], |r| {
            (r.tag() == tag || r.tag() == ANY) && (r.src() == ANY || r.src() == src)
        })
    }

    /// A receive at `slot` from `from` (or [`ANY`]) with `tag` (or [`ANY`]): the oldest message it
    /// takes, if one is there; otherwise the caller queues it with
    /// [`Queues::queue_recv`].
    #[inline]
    pub fn message_for(&mut self, slot: usize, from: u32, tag: u32) -> Option<S> {
        take(&mut self.sends[slot], |s| {
            (tag == ANY || s.tag() == tag) && (from == ANY || from == s.src())
        })
    }

    #[inline]
    pub fn queue_send(&mut self, slot: usize, send: S) {
        self.sends[slot].push_back(send);
    }

    #[inline]
    pub fn queue_recv(&mut self, slot: usize, recv: R) {
        self.recvs[slot].push_back(recv);
    }

    /// The messages pending for `slot`, oldest first.
    pub fn sends_at(&self, slot: usize) -> &VecDeque<S> {
        &self.sends[slot]
    }

    /// Every pending receive, by slot.
    pub fn recvs(&self) -> impl Iterator<Item = &R> {
        self.recvs.iter().flatten()
    }
}

/// The first entry of `queue` that `pred` accepts, taken out. The match is usually the
/// oldest entry: `pop_front` moves nothing.
#[inline]
fn take<T>(queue: &mut VecDeque<T>, pred: impl Fn(&T) -> bool) -> Option<T> {
    match queue.iter().position(pred) {
        Some(0) => queue.pop_front(),
        Some(i) => queue.remove(i),
        None => None,
    }
}

/// The collectives of each instance that some members called and others not yet:
/// `entries[i]` is collective number `first + i`. They complete in order.
pub(crate) struct Gatherings<E> {
    queues: Vec<Gathering<E>>,
}

struct Gathering<E> {
    first: u64,
    entries: VecDeque<Option<E>>,
}

impl<E> Gatherings<E> {
    pub fn new(insts: usize) -> Gatherings<E> {
        Gatherings {
            queues: (0..insts)
                .map(|_| Gathering {
                    first: 0,
                    entries: VecDeque::new(),
                })
                .collect(),
        }
    }

    /// Collective number `seq` of instance `inst`, started by `start` when no member
    /// has reached it yet.
    #[inline]
    pub fn entry(&mut self, inst: usize, seq: u64, start: impl FnOnce() -> E) -> &mut E {
        let queue = &mut self.queues[inst];
        // Collectives before `first` completed: every member passed them.
        let index = (seq - queue.first) as usize;
        if queue.entries.len() <= index {
            queue.entries.resize_with(index + 1, || None);
        }
        queue.entries[index].get_or_insert_with(start)
    }

    /// Takes collective `seq` of `inst` out, once every member has reached it.
    #[inline]
    pub fn finish(&mut self, inst: usize, seq: u64) -> Option<E> {
        let queue = &mut self.queues[inst];
        let entry = queue.entries[(seq - queue.first) as usize].take();
        while let Some(None) = queue.entries.front() {
            queue.entries.pop_front();
            queue.first += 1;
        }
        entry
    }

    /// Every collective some members reached and others not: (instance, number, entry).
    pub fn pending(&self) -> impl Iterator<Item = (usize, u64, &E)> {
        self.queues.iter().enumerate().flat_map(|(inst, q)| {
            q.entries
                .iter()
                .enumerate()
                .filter_map(move |(i, e)| e.as_ref().map(|e| (inst, q.first + i as u64, e)))
        })
    }
}
