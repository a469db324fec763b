//! Trace → communication matrix: takes the already-read events of every rank of a
//! perfskel trace (see [`crate::trace`]), gives the [`CommMatrix`] that
//! [`super::logicalize`] reads, and what the trace lacked (missing, incomplete and
//! unreadable ranks), so that a partial matrix is never taken for a whole one.
//!
//! - A message counts once, at its sender: `MPI_Send` and its mode variants, `MPI_Isend`
//!   and its variants, and the send half of `MPI_Sendrecv` / `MPI_Sendrecv_replace`, with
//!   their world-rank peer and bytes. Receives are not counted (the sender's event already
//!   did), so a missing rank's outgoing messages are absent from the matrix.
//! - Time is the summed duration of those calls (for nonblocking sends, the time to post
//!   them; the wait is not attributed to an edge).
//! - Sends to `MPI_PROC_NULL` are skipped and counted.
//! - Collectives are kept apart by operation (`allreduce`, `alltoall`, ...): calls, bytes
//!   sent per rank (summed over ranks), time.
//!
//! Opening files is the caller's business (`perfskel topo TRACE_DIR` in the CLI).

use serde::Serialize;

use super::matrix::{CommMatrix, MatrixError, Traffic};
use crate::trace::format::PEER_PROC_NULL;
use crate::trace::{Event, Op, OpClass};

/// What the caller could read of one rank.
#[derive(Clone, Copy, Debug)]
pub enum RankInput<'a> {
    /// The rank's events; `complete` is false when its file has no end record (the rank
    /// died: the events up to its last flushed record are counted).
    Events { events: &'a [Event], complete: bool },
    /// The rank's file does not exist.
    Missing,
    /// The rank's file exists but could not be read (the caller reports why).
    Unreadable,
}

/// The matrix of a trace and what it lacks.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TraceMatrix {
    pub matrix: CommMatrix,
    /// Ranks without a file: their sends are absent.
    pub missing_ranks: Vec<u32>,
    /// Ranks whose file stops before `MPI_Finalize`: their later sends are absent.
    pub incomplete_ranks: Vec<u32>,
    /// Ranks whose file could not be read: their sends are absent.
    pub unreadable_ranks: Vec<u32>,
    /// Sends to `MPI_PROC_NULL`, not counted.
    pub proc_null_sends: u64,
    /// Sends whose peer is not a rank of the trace (should not happen), not counted.
    pub bad_peer_sends: u64,
}

impl TraceMatrix {
    /// One line per thing the user must know about the input, for the report's warnings.
    pub fn warnings(&self) -> Vec<String> {
        let list = |ranks: &[u32]| {
            ranks
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = Vec::new();
        if !self.missing_ranks.is_empty() {
            out.push(format!(
                "trace: rank file missing for rank(s) {}; their sends are not in the matrix",
                list(&self.missing_ranks)
            ));
        }
        if !self.unreadable_ranks.is_empty() {
            out.push(format!(
                "trace: rank file unreadable for rank(s) {}; their sends are not in the matrix",
                list(&self.unreadable_ranks)
            ));
        }
        if !self.incomplete_ranks.is_empty() {
            out.push(format!(
                "trace: rank(s) {} did not reach MPI_Finalize; only their sends up to the last \
                 flushed event are in the matrix",
                list(&self.incomplete_ranks)
            ));
        }
        if self.bad_peer_sends > 0 {
            out.push(format!(
                "trace: {} sends to a peer outside the trace's ranks were skipped",
                self.bad_peer_sends
            ));
        }
        out
    }

    /// True when every rank was read to its end.
    pub fn is_whole(&self) -> bool {
        self.missing_ranks.is_empty()
            && self.incomplete_ranks.is_empty()
            && self.unreadable_ranks.is_empty()
    }
}

/// The collective's name in the matrix: `MPI_Allreduce` → `allreduce`.
pub fn collective_name(op: Op) -> String {
    let name = op.mpi_name();
    name.strip_prefix("MPI_")
        .unwrap_or(name)
        .to_ascii_lowercase()
}

/// Whether `op` sends a message to its `peer` (a sendrecv too).
pub fn is_send(op: Op) -> bool {
    matches!(
        op,
        Op::Send
            | Op::Bsend
            | Op::Ssend
            | Op::Rsend
            | Op::Isend
            | Op::Ibsend
            | Op::Issend
            | Op::Irsend
            | Op::Sendrecv
            | Op::SendrecvReplace
    )
}

/// Builds the matrix of a trace: `ranks[r]` is world rank `r`; the matrix has
/// `ranks.len()` ranks. Fails only when there are more ranks than
/// [`super::matrix::MAX_RANKS`].
pub fn matrix(ranks: &[RankInput<'_>]) -> Result<TraceMatrix, MatrixError> {
    let n_ranks = u32::try_from(ranks.len()).unwrap_or(u32::MAX);
    let mut out = TraceMatrix {
        matrix: CommMatrix::new(n_ranks)?,
        ..TraceMatrix::default()
    };
    for (rank, input) in (0..n_ranks).zip(ranks) {
        let (events, complete) = match *input {
            RankInput::Events { events, complete } => (events, complete),
            RankInput::Missing => {
                out.missing_ranks.push(rank);
                continue;
            }
            RankInput::Unreadable => {
                out.unreadable_ranks.push(rank);
                continue;
            }
        };
        if !complete {
            out.incomplete_ranks.push(rank);
        }
        for ev in events {
            out.add_event(rank, ev)?;
        }
    }
    Ok(out)
}

impl TraceMatrix {
    /// Counts one event of `rank` (a send at its sender, a collective by operation), for
    /// callers that stream a rank's events instead of holding them.
    pub fn add_event(&mut self, rank: u32, ev: &Event) -> Result<(), MatrixError> {
        let time_s = Some(ev.duration_ns() as f64 * 1e-9);
        if is_send(ev.op) {
            let Some(peer) = ev.peer else {
                self.bad_peer_sends += 1;
                return Ok(());
            };
            if peer == PEER_PROC_NULL {
                self.proc_null_sends += 1;
                return Ok(());
            }
            let n_ranks = self.matrix.n_ranks;
            let Some(dst) = u32::try_from(peer).ok().filter(|p| *p < n_ranks) else {
                self.bad_peer_sends += 1;
                return Ok(());
            };
            let traffic = Traffic {
                messages: 1,
                bytes: ev.bytes.unwrap_or(0),
                time_s,
            };
            self.matrix.add_p2p(rank, dst, traffic)?;
        } else if ev.op.class() == OpClass::Collective {
            self.matrix.add_collective(
                &collective_name(ev.op),
                Traffic {
                    messages: 1,
                    bytes: ev.bytes.unwrap_or(0),
                    time_s,
                },
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(op: Op, peer: Option<i64>, bytes: u64, dur_ns: u64) -> Event {
        Event {
            op,
            start_ns: 100,
            end_ns: 100 + dur_ns,
            peer,
            bytes: Some(bytes),
            ..Event::default()
        }
    }

    #[test]
    fn sends_count_at_the_sender_and_collectives_apart() {
        let r0 = vec![
            ev(Op::Init, None, 0, 5),
            ev(Op::Send, Some(1), 80, 1_000),
            ev(Op::Isend, Some(1), 80, 500),
            ev(Op::Sendrecv, Some(PEER_PROC_NULL), 0, 100),
            ev(Op::Allreduce, None, 8, 2_000),
        ];
        let r1 = vec![
            ev(Op::Recv, Some(0), 80, 1_000),
            ev(Op::Sendrecv, Some(0), 16, 300),
            ev(Op::Allreduce, None, 8, 1_000),
        ];
        let inputs = [
            RankInput::Events {
                events: &r0,
                complete: true,
            },
            RankInput::Events {
                events: &r1,
                complete: false,
            },
            RankInput::Missing,
        ];
        let tm = matrix(&inputs).expect("small");
        assert_eq!(tm.matrix.n_ranks, 3);
        let e01 = tm.matrix.p2p[&(0, 1)];
        assert_eq!((e01.messages, e01.bytes), (2, 160));
        assert!((e01.time_s.expect("timed") - 1.5e-6).abs() < 1e-12);
        assert_eq!(tm.matrix.p2p[&(1, 0)].bytes, 16);
        assert_eq!(tm.matrix.p2p.len(), 2);
        assert_eq!(tm.proc_null_sends, 1);
        let ar = tm.matrix.collectives["allreduce"];
        assert_eq!((ar.messages, ar.bytes), (2, 16));
        assert_eq!(tm.missing_ranks, vec![2]);
        assert_eq!(tm.incomplete_ranks, vec![1]);
        assert!(!tm.is_whole());
        assert_eq!(tm.warnings().len(), 2);
    }
}
