//! Property tests of the per-rank nests and the SPMD merge: for random SPMD-like rank
//! sequences on a chain (border calls to `MPI_PROC_NULL` or skipped altogether, loops
//! whose counts differ between ranks, rank-specific extra calls), running the merged
//! nest as rank r does (directions resolved with the topology, operations towards no
//! neighbour skipped) replays exactly rank r's own calls.

use std::collections::BTreeMap;

use perfskel_grammar::ast::{CollOp, P2pOp, Topology};
use proptest::prelude::*;

use super::comms::CommRef;
use super::merge::Merger;
use super::nest::{self, MNode};
use super::tokens::{CollSize, Half, Kind, PeerAbs, RankTokens, Tok};
use super::topo::Directions;
use crate::compress::Algorithm;

/// One step of the template every rank follows.
#[derive(Clone, Debug)]
enum Step {
    /// A send towards `next` (true) or `prev`, at a call site.
    Send { forward: bool, site: u32 },
    /// An allreduce at a call site.
    Coll { site: u32 },
    /// A loop; `vary` makes rank 1's count one less (data-dependent).
    Loop {
        count: u64,
        vary: bool,
        body: Vec<Step>,
    },
    /// A call only rank 0 makes.
    RootOnly { site: u32 },
}

fn step() -> impl Strategy<Value = Step> {
    let leaf = prop_oneof![
        (any::<bool>(), 0u32..3).prop_map(|(forward, site)| Step::Send { forward, site }),
        (3u32..5).prop_map(|site| Step::Coll { site }),
        (5u32..6).prop_map(|site| Step::RootOnly { site }),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        (2u64..5, any::<bool>(), prop::collection::vec(inner, 1..4))
            .prop_map(|(count, vary, body)| Step::Loop { count, vary, body })
    })
}

/// How a rank calls towards a missing neighbour: with `MPI_PROC_NULL`, or not at all.
fn instantiate(steps: &[Step], rank: u32, dirs: &Directions, skip_null: bool, out: &mut Vec<Tok>) {
    for s in steps {
        match s {
            Step::Send { forward, site } => {
                let bit = if *forward { 0 } else { 1 };
                let peer = dirs.peers[rank as usize][bit];
                if peer.is_none() && skip_null {
                    continue;
                }
                let mask = dirs.mask(rank, peer);
                out.push(Tok {
                    kind: Kind::P2p {
                        op: P2pOp::Send,
                        halves: vec![Half {
                            peer: PeerAbs::Dirs {
                                mask,
                                null: peer.is_none(),
                            },
                            bytes: peer.map(|_| 64),
                        }],
                        tag: None,
                        req: None,
                    },
                    comm: CommRef::World,
                    site: *site,
                });
            }
            Step::Coll { site } => out.push(coll(*site)),
            Step::RootOnly { site } => {
                if rank == 0 {
                    out.push(coll(*site));
                }
            }
            Step::Loop { count, vary, body } => {
                let n = if *vary && rank == 1 {
                    count - 1
                } else {
                    *count
                };
                for _ in 0..n {
                    instantiate(body, rank, dirs, skip_null, out);
                }
            }
        }
    }
}

fn coll(site: u32) -> Tok {
    Tok {
        kind: Kind::Coll {
            op: CollOp::Allreduce,
            nonblocking: false,
            size: CollSize::One(8),
            root: None,
            req: None,
        },
        comm: CommRef::World,
        site,
    }
}

fn tokens_of(rank: u32, seq: &[Tok]) -> RankTokens {
    let mut table: Vec<Tok> = Vec::new();
    let mut ids = Vec::new();
    for t in seq {
        let id = match table.iter().position(|x| x == t) {
            Some(i) => i,
            None => {
                table.push(t.clone());
                table.len() - 1
            }
        };
        ids.push(id as u32);
    }
    RankTokens {
        rank,
        gap_ns: vec![1_000; ids.len()],
        dur_ns: vec![100; ids.len()],
        ids,
        table,
    }
}

/// What rank `rank` does when it runs `nodes`: its real calls, as (token, resolved peers).
fn run(nodes: &[MNode], rank: u32, dirs: &Directions, out: &mut Vec<(Tok, Vec<Option<u64>>)>) {
    for node in nodes {
        match node {
            MNode::Tok { tok, .. } => {
                let peers = resolved(tok, rank, dirs);
                let noop =
                    matches!(tok.kind, Kind::P2p { .. }) && peers.iter().all(Option::is_none);
                if !noop {
                    out.push((tok.clone(), peers));
                }
            }
            MNode::Loop { counts, body } => {
                let count = counts
                    .get(&rank)
                    .copied()
                    .unwrap_or_else(|| counts.values().copied().max().unwrap_or(0));
                for _ in 0..count {
                    run(body, rank, dirs, out);
                }
            }
            MNode::If { branches } => {
                let taken = branches
                    .iter()
                    .find(|(ranks, _)| ranks.contains(&rank))
                    .or(branches.last());
                if let Some((_, body)) = taken {
                    run(body, rank, dirs, out);
                }
            }
        }
    }
}

fn resolved(tok: &Tok, rank: u32, dirs: &Directions) -> Vec<Option<u64>> {
    match &tok.kind {
        Kind::P2p { halves, .. } => halves
            .iter()
            .map(|h| match h.peer {
                PeerAbs::Dirs { mask, .. } => {
                    dirs.peers[rank as usize][mask.trailing_zeros() as usize]
                }
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The rank's own calls that do something (a send to `MPI_PROC_NULL` does nothing).
fn expected(seq: &[Tok], rank: u32, dirs: &Directions) -> Vec<(u32, Vec<Option<u64>>)> {
    seq.iter()
        .filter_map(|t| {
            let peers: Vec<Option<u64>> = match &t.kind {
                Kind::P2p { halves, .. } => halves
                    .iter()
                    .map(|h| match h.peer {
                        PeerAbs::Dirs { mask, null: false } => {
                            dirs.peers[rank as usize][mask.trailing_zeros() as usize]
                        }
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let noop = matches!(t.kind, Kind::P2p { .. }) && peers.iter().all(Option::is_none);
            (!noop).then_some((t.site, peers))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn every_rank_replays_its_own_calls(
        steps in prop::collection::vec(step(), 1..5),
        n_ranks in 2u32..6,
        skip_null in any::<bool>(),
    ) {
        let dirs = Directions::new(Topology::Chain, n_ranks);
        let seqs: Vec<Vec<Tok>> = (0..n_ranks)
            .map(|r| {
                let mut out = Vec::new();
                instantiate(&steps, r, &dirs, skip_null, &mut out);
                out
            })
            .collect();
        let nests: Vec<(u32, Vec<MNode>)> = seqs
            .iter()
            .enumerate()
            .map(|(r, seq)| {
                let t = tokens_of(r as u32, seq);
                (r as u32, nest::rank_nest(&t, Algorithm::Exact).nodes)
            })
            .collect();
        let input: Vec<(u32, &[MNode])> = nests.iter().map(|(r, n)| (*r, n.as_slice())).collect();
        let merged = Merger { dirs: &dirs }.merge(&input);
        for r in 0..n_ranks {
            let mut got = Vec::new();
            run(&merged, r, &dirs, &mut got);
            let got: Vec<(u32, Vec<Option<u64>>)> =
                got.into_iter().map(|(t, p)| (t.site, p)).collect();
            prop_assert_eq!(&got, &expected(&seqs[r as usize], r, &dirs), "rank {}", r);
        }
    }
}

#[test]
fn border_exchanges_fold_into_one_body() {
    // Every rank sends next then prev, 5 times; the chain's ends call MPI_PROC_NULL.
    let steps = vec![Step::Loop {
        count: 5,
        vary: false,
        body: vec![
            Step::Send {
                forward: true,
                site: 0,
            },
            Step::Send {
                forward: false,
                site: 1,
            },
        ],
    }];
    let dirs = Directions::new(Topology::Chain, 4);
    let nests: Vec<(u32, Vec<MNode>)> = (0..4)
        .map(|r| {
            let mut seq = Vec::new();
            instantiate(&steps, r, &dirs, false, &mut seq);
            (
                r,
                nest::rank_nest(&tokens_of(r, &seq), Algorithm::Exact).nodes,
            )
        })
        .collect();
    let input: Vec<(u32, &[MNode])> = nests.iter().map(|(r, n)| (*r, n.as_slice())).collect();
    let merged = Merger { dirs: &dirs }.merge(&input);
    let [MNode::Loop { counts, body }] = merged.as_slice() else {
        panic!("one loop expected: {merged:?}");
    };
    assert_eq!(counts, &BTreeMap::from([(0, 5), (1, 5), (2, 5), (3, 5)]));
    assert_eq!(body.len(), 2);
}
