//! Point-to-point operations: `send`, `recv`, `sendrecv` (blocking, `.run()`) and
//! `isend`, `irecv` (nonblocking, `.start(request)`), to a topology direction, an
//! explicit rank or (receives) any rank. A direction without a neighbour makes the
//! operation do nothing; a nonblocking one is posted to `MPI_PROC_NULL`, so it completes
//! at once and `waitany` sees it as MPI would.

use std::mem::MaybeUninit;

use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::request::StaticScope;
use mpi::traits::*;

use crate::buffers::reserve;
use crate::requests::Req;
use crate::skeleton::{fatal, on_comm, Comm, CommEntry, Handle, Skeleton, WORLD};
use crate::topology::Dir;

/// Whom a point-to-point operation talks to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    /// A direction of the communicator's topology.
    Dir(Dir),
    /// `rank(EXPR)`: a rank of the communicator.
    Rank(i64),
    /// `any`: any source (receives only).
    Any,
    /// `source`: the rank the last blocking receive from `any` got its message from.
    Source,
}

impl From<Dir> for Peer {
    fn from(dir: Dir) -> Peer {
        Peer::Dir(dir)
    }
}

/// `rank(EXPR)` as a peer.
pub fn rank(r: i64) -> Peer {
    Peer::Rank(r)
}

/// `any`: receive from whichever rank sends.
pub const ANY: Peer = Peer::Any;

/// `source`: the rank this rank's last blocking receive from [`ANY`] (`recv`, or the
/// receive half of `sendrecv`) got its message from, on the same communicator.
pub const SOURCE: Peer = Peer::Source;

/// A peer resolved on this rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Rank(i32),
    /// A missing neighbour: the operation does nothing.
    Null,
    Any,
}

/// Resolves `peer` in communicator `entry` (index `comm`) on this rank, whose last
/// receive from any rank matched `source`.
pub(crate) fn resolve(
    entry: &CommEntry,
    comm: usize,
    source: Option<(usize, i32)>,
    peer: &Peer,
) -> Target {
    match peer {
        Peer::Any => Target::Any,
        Peer::Source => match source {
            Some((on, rank)) if on == comm => Target::Rank(rank),
            Some(_) => fatal(&format!(
                "`source` on `{}` names a rank of another communicator: the last receive from `any` was on another one",
                entry.name
            )),
            None => fatal(&format!(
                "`source` on `{}` names no rank: no receive from `any` has received a message yet",
                entry.name
            )),
        },
        Peer::Rank(r) if (0..entry.size as i64).contains(r) => Target::Rank(*r as i32),
        Peer::Rank(r) => fatal(&format!(
            "rank({r}) is out of range: `{}` has ranks 0 to {}",
            entry.name,
            entry.size as i64 - 1
        )),
        Peer::Dir(dir) => {
            let computed = entry
                .shape
                .peer(entry.rank, entry.size, dir)
                .unwrap_or_else(|why| fatal(&format!("on `{}`: {why}", entry.name)));
            // One step along a grid axis is MPI_Cart_shift's job.
            let peer = match (&entry.handle, dir) {
                (Handle::Cart(cart), Dir::Axis { dim, forward }) => {
                    cart.shift(*dim as i32, if *forward { 1 } else { -1 }).1
                }
                (Handle::Cart(cart), Dir::Shift { dim, disp }) => {
                    cart.shift(*dim as i32, i32::try_from(*disp).unwrap_or(i32::MAX))
                        .1
                }
                _ => computed.map(|p| p as i32),
            };
            peer.map_or(Target::Null, Target::Rank)
        }
    }
}

/// A point-to-point operation being described; `NB` tells whether it is nonblocking.
#[must_use = "an operation does nothing until `.run()` (blocking) or `.start(request)` (nonblocking)"]
pub struct P2p<'s, const NB: bool> {
    skeleton: &'s mut Skeleton,
    send: Option<(Peer, u64)>,
    recv: Option<(Peer, u64)>,
    tag: i32,
    comm: Comm,
}

impl<const NB: bool> P2p<'_, NB> {
    /// `tag N` (default 0).
    pub fn tag(mut self, tag: i32) -> Self {
        self.tag = tag;
        self
    }

    /// `on COMM` (default [`WORLD`]).
    pub fn on(mut self, comm: Comm) -> Self {
        self.comm = comm;
        self
    }
}

impl Skeleton {
    /// `send PEER SIZE`
    pub fn send(&mut self, to: impl Into<Peer>, bytes: u64) -> P2p<'_, false> {
        self.p2p(Some((to.into(), bytes)), None)
    }

    /// `recv PEER SIZE`
    pub fn recv(&mut self, from: impl Into<Peer>, bytes: u64) -> P2p<'_, false> {
        self.p2p(None, Some((from.into(), bytes)))
    }

    /// `sendrecv to PEER SIZE from PEER SIZE`
    pub fn sendrecv(
        &mut self,
        to: impl Into<Peer>,
        send_bytes: u64,
        from: impl Into<Peer>,
        recv_bytes: u64,
    ) -> P2p<'_, false> {
        self.p2p(
            Some((to.into(), send_bytes)),
            Some((from.into(), recv_bytes)),
        )
    }

    /// `req H = isend PEER SIZE`
    pub fn isend(&mut self, to: impl Into<Peer>, bytes: u64) -> P2p<'_, true> {
        self.p2p(Some((to.into(), bytes)), None)
    }

    /// `req H = irecv PEER SIZE`
    pub fn irecv(&mut self, from: impl Into<Peer>, bytes: u64) -> P2p<'_, true> {
        self.p2p(None, Some((from.into(), bytes)))
    }

    fn p2p<const NB: bool>(
        &mut self,
        send: Option<(Peer, u64)>,
        recv: Option<(Peer, u64)>,
    ) -> P2p<'_, NB> {
        P2p {
            skeleton: self,
            send,
            recv,
            tag: 0,
            comm: WORLD,
        }
    }
}

impl P2p<'_, false> {
    /// Runs the blocking operation.
    pub fn run(self) {
        let sk = self.skeleton;
        let entry = match sk.comms.get(self.comm.0) {
            Some(entry) => entry,
            None => fatal("unknown communicator"),
        };
        let tag = self.tag;
        let comm = self.comm.0;
        let send = self
            .send
            .map(|(peer, bytes)| (send_target(entry, comm, sk.source, &peer), usize_of(bytes)));
        let recv = self
            .recv
            .map(|(peer, bytes)| (resolve(entry, comm, sk.source, &peer), usize_of(bytes)));
        match (send, recv) {
            (Some((Target::Rank(to), n_send)), Some((from, n_recv))) if from != Target::Null => {
                let (data, buf) = sk.buffers.pair::<u8>(n_send, n_recv);
                on_comm!(entry, c => {
                    let dest = c.process_at_rank(to);
                    match from {
                        Target::Rank(from) => {
                            let src = c.process_at_rank(from);
                            mpi::point_to_point::send_receive_into_with_tags(
                                data, &dest, tag, buf, &src, tag,
                            );
                        }
                        _ => {
                            let src = c.any_process();
                            let status = mpi::point_to_point::send_receive_into_with_tags(
                                data, &dest, tag, buf, &src, tag,
                            );
                            sk.source = Some((comm, status.source_rank()));
                        }
                    }
                });
            }
            (send, recv) => {
                // At most one half has a peer: it alone is what MPI_Sendrecv would do.
                if let Some((Target::Rank(to), n)) = send {
                    let data = sk.buffers.send::<u8>(n);
                    on_comm!(entry, c => c.process_at_rank(to).send_with_tag(data, tag));
                }
                if let Some((from, n)) = recv {
                    let buf = sk.buffers.scratch::<u8>(n);
                    match from {
                        Target::Rank(from) => {
                            on_comm!(entry, c => c.process_at_rank(from).receive_into_with_tag(buf, tag));
                        }
                        Target::Any => {
                            let status = on_comm!(entry, c => c.any_process().receive_into_with_tag(buf, tag));
                            sk.source = Some((comm, status.source_rank()));
                        }
                        Target::Null => {}
                    }
                }
            }
        }
    }
}

impl P2p<'_, false> {
    /// The receive of `while recv PEER SIZE tag T { ... }`: takes the next message from
    /// the peer whatever its tag, and says whether its tag is T (`.tag(T)`), which keeps
    /// the loop going; a missing neighbour ends it.
    pub fn run_tagged(self) -> bool {
        let sk = self.skeleton;
        let entry = match sk.comms.get(self.comm.0) {
            Some(entry) => entry,
            None => fatal("unknown communicator"),
        };
        let comm = self.comm.0;
        let Some((peer, bytes)) = self.recv else {
            fatal("`while` heads a loop with a receive, not a send")
        };
        let buf = sk.buffers.scratch::<u8>(usize_of(bytes));
        let status = match resolve(entry, comm, sk.source, &peer) {
            Target::Rank(from) => {
                on_comm!(entry, c => c.process_at_rank(from).receive_into(buf))
            }
            Target::Any => {
                let status = on_comm!(entry, c => c.any_process().receive_into(buf));
                sk.source = Some((comm, status.source_rank()));
                status
            }
            Target::Null => return false,
        };
        status.tag() == self.tag
    }
}

impl P2p<'_, true> {
    /// Starts the nonblocking operation and binds it to `req`.
    pub fn start(self, req: Req) {
        let sk = self.skeleton;
        let entry = match sk.comms.get(self.comm.0) {
            Some(entry) => entry,
            None => fatal("unknown communicator"),
        };
        let tag = self.tag;
        let (comm, source) = (self.comm.0, sk.source);
        let slot = sk.requests.for_post(req);
        if let Some((peer, bytes)) = self.send {
            let n = usize_of(bytes);
            let data = sk.buffers.send::<u8>(n);
            slot.raw = match send_target(entry, comm, source, &peer) {
                Target::Rank(to) => {
                    // SAFETY: the shared send buffer is never freed while the program
                    // runs (grown buffers are retired, not dropped).
                    let data: &'static [u8] = unsafe { extend(data) };
                    let request = on_comm!(entry, c => c
                        .process_at_rank(to)
                        .immediate_send_with_tag(StaticScope, data, tag));
                    // SAFETY: the request is completed through the slot.
                    unsafe { request.into_raw().0 }
                }
                _ => on_comm!(entry, c => post_null(true, c.as_raw(), tag)),
            };
        } else if let Some((peer, bytes)) = self.recv {
            let n = usize_of(bytes);
            reserve(&mut slot.buf, bytes);
            let buf = crate::buffers::view_mut::<u8>(&mut slot.buf, n);
            // SAFETY: the slot's buffer is neither moved nor freed until the request
            // completes (`Requests::for_post` refuses a pending slot; its Drop leaks
            // buffers of pending requests).
            let buf: &'static mut [u8] = unsafe { extend_mut(buf) };
            slot.raw = match resolve(entry, comm, source, &peer) {
                Target::Rank(from) => {
                    let request = on_comm!(entry, c => c
                        .process_at_rank(from)
                        .immediate_receive_into_with_tag(StaticScope, buf, tag));
                    // SAFETY: as above.
                    unsafe { request.into_raw().0 }
                }
                Target::Any => {
                    let request = on_comm!(entry, c => c
                        .any_process()
                        .immediate_receive_into_with_tag(StaticScope, buf, tag));
                    // SAFETY: as above.
                    unsafe { request.into_raw().0 }
                }
                Target::Null => on_comm!(entry, c => post_null(false, c.as_raw(), tag)),
            };
        }
        sk.requests.trim(req);
    }
}

fn send_target(
    entry: &CommEntry,
    comm: usize,
    source: Option<(usize, i32)>,
    peer: &Peer,
) -> Target {
    match resolve(entry, comm, source, peer) {
        Target::Any => fatal(&format!(
            "`any` is a source, not a destination (on `{}`)",
            entry.name
        )),
        target => target,
    }
}

/// A nonblocking operation with `MPI_PROC_NULL`, which completes at once.
fn post_null(send: bool, comm: ffi::MPI_Comm, tag: i32) -> ffi::MPI_Request {
    let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
    let mut byte = 0u8;
    let datatype = u8::equivalent_datatype().as_raw();
    // SAFETY: a zero-count operation with MPI_PROC_NULL touches no buffer; MPI writes
    // the request.
    unsafe {
        if send {
            ffi::MPI_Isend(
                (&byte as *const u8).cast(),
                0,
                datatype,
                ffi::RSMPI_PROC_NULL,
                tag,
                comm,
                request.as_mut_ptr(),
            );
        } else {
            ffi::MPI_Irecv(
                (&mut byte as *mut u8).cast(),
                0,
                datatype,
                ffi::RSMPI_PROC_NULL,
                tag,
                comm,
                request.as_mut_ptr(),
            );
        }
        request.assume_init()
    }
}

/// Extends a borrow to `'static` for a request whose buffer the runtime keeps alive.
///
/// # Safety
/// The memory must stay allocated and unmoved until the MPI operation completes.
pub(crate) unsafe fn extend<T: ?Sized>(r: &T) -> &'static T {
    &*(r as *const T)
}

/// As [`extend`], mutably.
///
/// # Safety
/// As [`extend`]; nothing else may use the memory until the operation completes.
pub(crate) unsafe fn extend_mut<T: ?Sized>(r: &mut T) -> &'static mut T {
    &mut *(r as *mut T)
}

pub(crate) fn usize_of(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or_else(|_| fatal(&format!("{bytes} bytes do not fit in memory")))
}
