//! Property tests of the per-rank nests and the SPMD merge: for random SPMD-like rank
//! sequences on a chain (border calls to `MPI_PROC_NULL` or skipped altogether, loops
//! whose counts differ between ranks, rank-specific extra calls), running the merged
//! nest as rank r does (directions resolved with the topology, operations towards no
//! neighbour skipped) replays exactly rank r's own calls.

use std::collections::BTreeMap;

use perfskel_grammar::ast::{CollOp, P2pOp, Topology};
use proptest::prelude::*;

use super::comms::CommRef;
use super::fold;
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
                            shift: peer.map(|p| {
                                let n = dirs.peers.len() as u64;
                                ((p + n - u64::from(rank)) % n) as u32
                            }),
                            xor: peer.map(|p| (p ^ u64::from(rank)) as u32),
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
    run_at(nodes, rank, dirs, None, out)
}

/// [`run`] inside iteration `step` of a folded loop.
fn run_at(
    nodes: &[MNode],
    rank: u32,
    dirs: &Directions,
    step: Option<u64>,
    out: &mut Vec<(Tok, Vec<Option<u64>>)>,
) {
    let run = |nodes: &[MNode], rank, dirs, out: &mut Vec<_>| run_at(nodes, rank, dirs, step, out);
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
            MNode::Loop { counts, body, .. } => {
                let count = counts
                    .get(&rank)
                    .copied()
                    .unwrap_or_else(|| counts.values().copied().max().unwrap_or(0));
                for _ in 0..count {
                    run(body, rank, dirs, out);
                }
            }
            // The rank's traced tasks, then the receive that ended them.
            MNode::While { counts, body } => {
                let count = counts.get(&rank).copied().unwrap_or(0);
                for _ in 0..count {
                    run(body, rank, dirs, out);
                }
                run(&body[..1.min(body.len())], rank, dirs, out);
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
            MNode::Steps { count, body } => {
                for i in 0..*count {
                    run_at(body, rank, dirs, Some(i), out);
                }
            }
            MNode::When {
                cond,
                then,
                otherwise,
                ..
            } => {
                let i = step.expect("a folded condition outside its loop");
                run(
                    if cond.contains(i) { then } else { otherwise },
                    rank,
                    dirs,
                    out,
                );
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
                PeerAbs::Shift(k) => {
                    let n = dirs.peers.len() as u64;
                    Some((u64::from(rank) + u64::from(k)) % n)
                }
                PeerAbs::Xor(k) => Some(u64::from(rank ^ k)),
                PeerAbs::Table(ref t) => t.get(&rank).map(|&p| u64::from(p)),
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
        let seqs = rank_seqs(&steps, n_ranks, &dirs, skip_null);
        let merged = merged(&seqs, &dirs);
        let folded = fold::fold(&merged);
        for r in 0..n_ranks {
            for nodes in std::iter::once(&merged).chain(folded.as_ref()) {
                let mut got = Vec::new();
                run(nodes, r, &dirs, &mut got);
                let got: Vec<(u32, Vec<Option<u64>>)> =
                    got.into_iter().map(|(t, p)| (t.site, p)).collect();
                prop_assert_eq!(&got, &expected(&seqs[r as usize], r, &dirs), "rank {}", r);
            }
        }
    }

    /// Time steps that differ every p-th and q-th time fold into one loop reading its
    /// iteration number, which runs exactly the steps' calls and keeps their time.
    #[test]
    fn periodic_steps_fold_and_replay(
        n in 6u64..160,
        p in 2u64..12,
        r in 0u64..12,
        q in 2u64..30,
        r2 in 0u64..30,
        prologue in 0u32..4,
    ) {
        let seq = time_steps(n, (p, r % p), (q, r2 % q), prologue);
        let dirs = Directions::new(Topology::Chain, 2);
        let merged = merged_pair(&seq, &dirs);
        let Some(folded) = fold::fold(&merged) else {
            // Only when the exact nest is already short, or the steps hold fewer than
            // two whole periods of their pattern (10 steps of periods 3 and 2: 41
            // statements, a case proptest found).
            let whole = p / gcd(p, q) * q;
            prop_assert!(
                fold::size(&merged) <= 40 || n < 2 * whole,
                "not folded: {} statements", fold::size(&merged)
            );
            return Ok(());
        };
        prop_assert!(fold::size(&folded) * 5 <= fold::size(&merged) * 4);
        for rank in 0..2 {
            let mut got = Vec::new();
            run(&folded, rank, &dirs, &mut got);
            let got: Vec<u32> = got.into_iter().map(|(t, _)| t.site).collect();
            let want: Vec<u32> = seq.iter().map(|t| t.site).collect();
            prop_assert_eq!(got, want);
        }
        // Every call's compute (1 us each in `tokens_of`) is still there.
        let total = |nodes: &[MNode]| time_of(nodes, None);
        let (a, b) = (total(&merged), total(&folded));
        prop_assert!((a - b).abs() <= 1e-6 * a, "{} ns before, {} ns after", a, b);
    }
}

/// The merged nest of two ranks that both make the calls `seq`.
fn merged_pair(seq: &[Tok], dirs: &Directions) -> Vec<MNode> {
    merged(&[seq.to_vec(), seq.to_vec()], dirs)
}

/// The calls of `steps` on each of `n_ranks` ranks.
fn rank_seqs(steps: &[Step], n_ranks: u32, dirs: &Directions, skip_null: bool) -> Vec<Vec<Tok>> {
    (0..n_ranks)
        .map(|r| {
            let mut out = Vec::new();
            instantiate(steps, r, dirs, skip_null, &mut out);
            out
        })
        .collect()
}

/// The merged nest of ranks 0, 1, ... making the calls `seqs[0]`, `seqs[1]`, ...
fn merged(seqs: &[Vec<Tok>], dirs: &Directions) -> Vec<MNode> {
    let nests: Vec<(u32, Vec<MNode>)> = seqs
        .iter()
        .enumerate()
        .map(|(r, seq)| {
            let t = tokens_of(r as u32, seq);
            (r as u32, nest::rank_nest(&t, Algorithm::Exact).nodes)
        })
        .collect();
    let input: Vec<(u32, &[MNode])> = nests.iter().map(|(r, n)| (*r, n.as_slice())).collect();
    let merger = Merger { dirs };
    merger.tabulate_ifs(merger.merge(&input))
}

/// `n` steps of three allreduces (sites 0, 1, 2); on steps `s % p == r` two more
/// (sites 10, 11) after the second; on steps `s % q == r2` site 20 in place of site 0;
/// `prologue` calls before and one after.
fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn time_steps(n: u64, (p, r): (u64, u64), (q, r2): (u64, u64), prologue: u32) -> Vec<Tok> {
    let mut seq: Vec<Tok> = (0..prologue).map(|i| coll(90 + i)).collect();
    for s in 0..n {
        seq.push(coll(if s % q == r2 { 20 } else { 0 }));
        seq.push(coll(1));
        if s % p == r {
            seq.push(coll(10));
            seq.push(coll(11));
        }
        seq.push(coll(2));
    }
    seq.push(coll(99));
    seq
}

/// The compute time a nest runs over all ranks (each position's mean times the number
/// of times it runs).
fn time_of(nodes: &[MNode], step: Option<u64>) -> f64 {
    nodes
        .iter()
        .map(|node| match node {
            MNode::Tok { acc, .. } => acc.values().map(|a| a.mean()).sum::<f64>(),
            MNode::Loop { counts, body, .. } => {
                counts.values().copied().max().unwrap_or(0) as f64 * time_of(body, step)
            }
            MNode::While { counts, body } => {
                let n = counts.values().copied().max().unwrap_or(0) as f64;
                n * time_of(body, step) + time_of(&body[..1.min(body.len())], step)
            }
            MNode::If { branches } => branches.iter().map(|(_, b)| time_of(b, step)).sum(),
            MNode::Steps { count, body } => (0..*count).map(|i| time_of(body, Some(i))).sum(),
            MNode::When {
                cond,
                then,
                otherwise,
                ..
            } => {
                let i = step.unwrap_or(0);
                time_of(if cond.contains(i) { then } else { otherwise }, step)
            }
        })
        .sum()
}

#[test]
fn a_lammps_like_run_folds_into_one_step_loop() {
    // 500 steps; re-neighbouring every 20th, output every 50th (counted from 1).
    let seq = time_steps(500, (50, 49), (20, 19), 3);
    let dirs = Directions::new(Topology::Chain, 2);
    let merged = merged_pair(&seq, &dirs);
    let folded = fold::fold(&merged).expect("folds");
    let steps: Vec<&MNode> = folded
        .iter()
        .filter(|n| matches!(n, MNode::Steps { .. }))
        .collect();
    let [MNode::Steps { count, body }] = steps.as_slice() else {
        panic!("one folded loop: {folded:#?}");
    };
    assert!(*count >= 498, "{count} iterations");
    let conds: Vec<&fold::Cond> = body
        .iter()
        .filter_map(|n| match n {
            MNode::When { cond, .. } => Some(cond),
            _ => None,
        })
        .collect();
    // The loop may start anywhere in a step (here after its second call), the
    // conditions then name the steps' iteration numbers in that loop.
    let mut periods: Vec<u64> = conds
        .iter()
        .filter_map(|c| match c {
            fold::Cond::Is(fold::Atom::Every { p, .. }) => Some(*p),
            _ => None,
        })
        .collect();
    periods.sort();
    assert_eq!(periods, [20, 50], "{}", sketch(&folded));
    // 4 prologue calls and 2 epilogue calls at most, plus the loop of 8.
    assert!(fold::size(&folded) <= 16, "{}", sketch(&folded));
}

#[test]
fn a_step_that_starts_one_of_two_ways_and_a_first_step_that_does_more_fold_whole() {
    // A set-up of three calls, then steps 0..=500: every 20th step starts with an
    // exchange (sites 20, 21), the others with a forward communication (site 0);
    // then site 1; step 0 alone does site 30 (set-up output); every 50th step prints
    // (sites 10, 11). Site 99 after the run. No single call starts every step, and the
    // first step is of its own kind.
    let mut seq: Vec<Tok> = (90..93).map(coll).collect();
    for s in 0..=500u64 {
        if s % 20 == 0 {
            seq.extend([coll(20), coll(21)]);
        } else {
            seq.push(coll(0));
        }
        seq.push(coll(1));
        if s == 0 {
            seq.push(coll(30));
        }
        if s % 50 == 0 {
            seq.extend([coll(10), coll(11)]);
        }
    }
    seq.push(coll(99));
    let dirs = Directions::new(Topology::Chain, 2);
    let merged = merged_pair(&seq, &dirs);
    let folded = fold::fold(&merged).expect("folds");
    // One loop over all 501 steps: the set-up before it, the last call after it.
    let counts: Vec<u64> = folded
        .iter()
        .filter_map(|n| match n {
            MNode::Steps { count, .. } => Some(*count),
            _ => None,
        })
        .collect();
    assert_eq!(counts, [501], "{}", sketch(&folded));
    assert!(fold::size(&folded) <= 15, "{}", sketch(&folded));
    let text = sketch(&folded);
    assert!(text.contains("W(Is(At(0)))[30|]"), "{text}");
    // Every step runs what the application's step of that number ran.
    let sites = |nodes: &[MNode]| {
        let mut got = Vec::new();
        run(nodes, 0, &dirs, &mut got);
        got.into_iter().map(|(t, _)| t.site).collect::<Vec<u32>>()
    };
    assert_eq!(
        sites(&folded),
        seq.iter().map(|t| t.site).collect::<Vec<_>>()
    );
}

/// A nest in one line: sites, `L3[...]` loops, `S500[...]` folded loops, `W(cond)[...|...]`.
fn sketch(nodes: &[MNode]) -> String {
    nodes
        .iter()
        .map(|n| match n {
            MNode::Tok { tok, .. } => tok.site.to_string(),
            MNode::Loop { counts, body, .. } => format!(
                "L{}[{}]",
                counts.values().max().copied().unwrap_or(0),
                sketch(body)
            ),
            MNode::While { body, .. } => format!("H[{}]", sketch(body)),
            MNode::If { branches } => format!("If({})", branches.len()),
            MNode::Steps { count, body } => format!("S{count}[{}]", sketch(body)),
            MNode::When {
                cond,
                then,
                otherwise,
                ..
            } => format!("W({cond:?})[{}|{}]", sketch(then), sketch(otherwise)),
        })
        .collect::<Vec<_>>()
        .join(" ")
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
    let [MNode::Loop { counts, body, .. }] = merged.as_slice() else {
        panic!("one loop expected: {merged:?}");
    };
    assert_eq!(counts, &BTreeMap::from([(0, 5), (1, 5), (2, 5), (3, 5)]));
    assert_eq!(body.len(), 2);
}

#[test]
fn minor_phases_are_written_coarsely_in_order_and_time() {
    // A set-up of 40 allreduces from 40 call sites with a send towards `next` after
    // every tenth (from four call sites, of one size class), then a long main loop.
    let dirs = Directions::new(Topology::Chain, 2);
    let mut seq = Vec::new();
    for i in 0..40u32 {
        seq.push(coll(100 + i));
        if i % 10 == 9 {
            let mask = dirs.mask(0, dirs.peers[0][0]);
            seq.push(Tok {
                kind: Kind::P2p {
                    op: P2pOp::Send,
                    halves: vec![Half {
                        peer: PeerAbs::Dirs { mask, null: false },
                        bytes: Some(128),
                        shift: Some(1),
                        xor: None,
                    }],
                    tag: None,
                    req: None,
                },
                comm: CommRef::World,
                site: 200 + i,
            });
        }
    }
    for _ in 0..1000 {
        seq.push(coll(1));
        seq.push(coll(2));
    }
    let nodes = nest::rank_nest(&tokens_of(0, &seq), Algorithm::Exact).nodes;
    let before = fold::size(&nodes);
    // The set-up is 50 of 2,050 calls of 1 us each: under 5 % of the run.
    let app_ns = time_of(&nodes, None);
    let coarse = fold::coarsen(nodes.clone(), app_ns, 1);
    assert!(fold::size(&coarse) < before / 3, "{}", sketch(&coarse));
    // The same operations in the same order (sites aside), the same time.
    let ops = |nodes: &[MNode]| {
        let mut got = Vec::new();
        run(nodes, 0, &dirs, &mut got);
        got.into_iter()
            .map(|(t, p)| (matches!(t.kind, Kind::Coll { .. }), p))
            .collect::<Vec<_>>()
    };
    assert_eq!(ops(&coarse), ops(&nodes));
    let (a, b) = (time_of(&nodes, None), time_of(&coarse, None));
    assert!((a - b).abs() <= 1e-6 * a, "{a} ns before, {b} ns after");
    // The main loop is not touched; the send keeps its size class.
    let sends: Vec<u64> = coarse_sends(&coarse);
    assert_eq!(sends, [128], "{}", sketch(&coarse));
}

#[test]
fn a_set_up_over_the_minor_share_is_written_coarsely_in_pieces_under_it() {
    // 60 allreduces from 60 call sites, then a main loop of 300 iterations of two
    // calls: the set-up is over the share in all.
    let mut seq: Vec<Tok> = (0..60u32).map(|i| coll(100 + i)).collect();
    for _ in 0..300 {
        seq.push(coll(1));
        seq.push(coll(2));
    }
    let nodes = nest::rank_nest(&tokens_of(0, &seq), Algorithm::Exact).nodes;
    let before = fold::size(&nodes);
    let app_ns = nest::time(&nodes);
    let share = nest::time(&nodes[..60]) / app_ns;
    assert!(share > fold::MINOR_SHARE, "{share}");
    let coarse = fold::coarsen(nodes.clone(), app_ns, 1);
    // As few pieces of under 5 % each as that allows, each a loop over its allreduces,
    // and the main loop.
    let pieces = (share / fold::MINOR_SHARE).floor() as usize + 1;
    assert!(fold::size(&coarse) <= 2 * pieces + 3, "{}", sketch(&coarse));
    assert!(fold::size(&coarse) < before / 5, "{}", sketch(&coarse));
    let (a, b) = (time_of(&nodes, None), time_of(&coarse, None));
    assert!((a - b).abs() <= 1e-6 * a, "{a} ns before, {b} ns after");
}

#[test]
fn collectives_of_a_minor_stretch_are_grouped_by_kind_between_other_calls() {
    // A set-up of broadcasts and allreduces from 30 call sites with a send in the
    // middle, then a long main loop.
    let dirs = Directions::new(Topology::Chain, 2);
    let bcast = |site: u32| Tok {
        kind: Kind::Coll {
            op: CollOp::Bcast,
            nonblocking: false,
            size: CollSize::One(16),
            root: Some(0),
            req: None,
        },
        comm: CommRef::World,
        site,
    };
    let send = Tok {
        kind: Kind::P2p {
            op: P2pOp::Send,
            halves: vec![Half {
                peer: PeerAbs::Dirs {
                    mask: dirs.mask(0, dirs.peers[0][0]),
                    null: false,
                },
                bytes: Some(64),
                shift: Some(1),
                xor: None,
            }],
            tag: None,
            req: None,
        },
        comm: CommRef::World,
        site: 300,
    };
    // Broadcasts and allreduces in no pattern (a broadcast first), the send after the
    // fifteenth call.
    let is_bcast = |i: u32| (i * i + i / 3).is_multiple_of(3);
    let mut seq = Vec::new();
    for i in 0..30u32 {
        seq.push(if is_bcast(i) {
            bcast(100 + i)
        } else {
            coll(100 + i)
        });
        if i == 14 {
            seq.push(send.clone());
        }
    }
    for _ in 0..2000 {
        seq.push(coll(1));
        seq.push(coll(2));
    }
    let nodes = nest::rank_nest(&tokens_of(0, &seq), Algorithm::Exact).nodes;
    let app_ns = time_of(&nodes, None);
    let coarse = fold::coarsen(nodes.clone(), app_ns, 1);
    // On each side of the send, the broadcasts then the allreduces (the kind the
    // stretch met first comes first).
    let kinds = |nodes: &[MNode]| {
        let mut got = Vec::new();
        run(nodes, 0, &dirs, &mut got);
        got.into_iter()
            .take(31)
            .map(|(t, _)| match t.kind {
                Kind::Coll { op, .. } => format!("{op:?}"),
                _ => "send".to_string(),
            })
            .collect::<Vec<_>>()
    };
    let mut want: Vec<String> = Vec::new();
    for half in [0..15u32, 15..30] {
        let b = half.clone().filter(|i| is_bcast(*i)).count();
        want.extend(std::iter::repeat_n("Bcast".to_string(), b));
        want.extend(std::iter::repeat_n("Allreduce".to_string(), half.len() - b));
        if half.start == 0 {
            want.push("send".to_string());
        }
    }
    assert_eq!(kinds(&coarse), want, "{}", sketch(&coarse));
    // Four loops and the send before the main loop; the same time.
    assert!(fold::size(&coarse) <= 13, "{}", sketch(&coarse));
    let (a, b) = (time_of(&nodes, None), time_of(&coarse, None));
    assert!((a - b).abs() <= 1e-6 * a, "{a} ns before, {b} ns after");
}

/// The sizes of the sends of a nest, as its tokens say.
fn coarse_sends(nodes: &[MNode]) -> Vec<u64> {
    let mut out = Vec::new();
    for n in nodes {
        match n {
            MNode::Tok { tok, .. } => {
                if let Kind::P2p { halves, .. } = &tok.kind {
                    out.extend(halves.iter().filter_map(|h| h.bytes));
                }
            }
            MNode::Loop { body, .. } => out.extend(coarse_sends(body)),
            _ => {}
        }
    }
    out
}

#[test]
fn steps_without_a_pattern_are_spread_evenly_and_say_so() {
    // 300 steps of three calls; on 40 steps picked by a pseudo-random sequence (data-
    // dependent re-neighbouring) two more calls instead of the first.
    let mut state = 12345u64;
    let mut picked = std::collections::BTreeSet::new();
    while picked.len() < 40 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        picked.insert((state >> 33) % 300);
    }
    let mut seq = vec![coll(90)];
    for s in 0..300u64 {
        if picked.contains(&s) {
            seq.push(coll(10));
            seq.push(coll(11));
        } else {
            seq.push(coll(0));
        }
        seq.push(coll(1));
        seq.push(coll(2));
    }
    seq.push(coll(99));
    let dirs = Directions::new(Topology::Chain, 2);
    let merged = merged_pair(&seq, &dirs);
    assert!(fold::fold(&merged).is_none(), "no exact pattern");
    let folded = fold::fold_approx(&merged).expect("folds when spread");
    assert!(fold::size(&folded) <= 14, "{}", sketch(&folded));
    let mut got = Vec::new();
    run(&folded, 0, &dirs, &mut got);
    let count = |site: u32| got.iter().filter(|(t, _)| t.site == site).count();
    // Every step still has its two common calls; the picked ones run about as often,
    // evenly spread, and the When says how often they really ran.
    assert_eq!((count(1), count(2)), (300, 300));
    assert_eq!(count(10), count(11));
    assert_eq!(count(0) + count(10), 300);
    let whens: Vec<(u64, u64)> = all_whens(&folded);
    assert_eq!(whens.len(), 1, "{}", sketch(&folded));
    let (recorded, written) = whens[0];
    assert_eq!(recorded, 40);
    assert_eq!(written as usize, count(10));
    assert!(written.abs_diff(40) <= 3, "{written} of 40");
}

/// 240 steps; every 20th re-neighbours (sites 10, 11 instead of the forward call,
/// site 0), every 50th prints (site 30); after 8 of those 12 re-neighbourings, picked
/// with no pattern, `extra` (site 12) with 300 µs of compute before it. The merged nest
/// of two ranks, folded with spread sets.
fn reneighbouring_with_an_extra(extra: Tok) -> (Vec<MNode>, Vec<MNode>, Directions) {
    let picked = [0u64, 20, 60, 80, 140, 160, 200, 220];
    let mut seq = vec![coll(90)];
    let mut gaps = vec![1_000u64];
    for s in 0..240u64 {
        if s % 20 == 0 {
            seq.extend([coll(10), coll(11)]);
            gaps.extend([1_000, 1_000]);
            if picked.contains(&s) {
                seq.push(extra.clone());
                gaps.push(300_000);
            }
        } else {
            seq.push(coll(0));
            gaps.push(1_000);
        }
        seq.extend([coll(1), coll(2)]);
        gaps.extend([1_000, 1_000]);
        if s % 50 == 0 {
            seq.push(coll(30));
            gaps.push(1_000);
        }
    }
    seq.push(coll(99));
    gaps.push(1_000);
    let dirs = Directions::new(Topology::Chain, 2);
    let nests: Vec<(u32, Vec<MNode>)> = (0..2u32)
        .map(|r| {
            let mut t = tokens_of(r, &seq);
            t.gap_ns = gaps.clone();
            (r, nest::rank_nest(&t, Algorithm::Exact).nodes)
        })
        .collect();
    let input: Vec<(u32, &[MNode])> = nests.iter().map(|(r, n)| (*r, n.as_slice())).collect();
    let merger = Merger { dirs: &dirs };
    let merged = merger.tabulate_ifs(merger.merge(&input));
    let folded = fold::fold_approx(&merged).expect("folds");
    (merged, folded, dirs)
}

#[test]
fn compute_on_some_steps_of_a_pattern_runs_on_all_of_them_with_the_same_total() {
    // The extra is the compute before a loop of steps, a compute statement of its own
    // (LAMMPS keeps it apart where the steps after a re-neighbouring are a loop, not
    // where one prints). Spread evenly over the 240 steps, it took the forward call's
    // place on steps that have it; it runs on every re-neighbouring step instead, 8/12
    // of its time each.
    let entry = Tok {
        kind: Kind::Compute,
        comm: CommRef::World,
        site: 12,
    };
    let (merged, folded, dirs) = reneighbouring_with_an_extra(entry);
    let mut got = Vec::new();
    run(&folded, 0, &dirs, &mut got);
    let count = |site: u32| got.iter().filter(|(t, _)| t.site == site).count();
    assert_eq!(
        (count(0), count(10), count(1), count(12)),
        (228, 12, 240, 12),
        "{}",
        sketch(&folded)
    );
    assert!(
        all_whens(&folded).is_empty(),
        "nothing spread: {}",
        sketch(&folded)
    );
    let (a, b) = (time_of(&merged, None), time_of(&folded, None));
    assert!((a - b).abs() <= 1e-3 * a, "{a} ns before, {b} ns after");
}

#[test]
fn a_spread_call_takes_no_iterations_from_its_neighbours() {
    // The extra is a call: spread evenly (about 8 of the 240 steps), it stays out of
    // the forward call's `else`, which runs on all 228 steps it ran on.
    let (_, folded, dirs) = reneighbouring_with_an_extra(coll(12));
    let mut got = Vec::new();
    run(&folded, 0, &dirs, &mut got);
    let count = |site: u32| got.iter().filter(|(t, _)| t.site == site).count();
    assert_eq!(
        (count(0), count(10), count(1)),
        (228, 12, 240),
        "{}",
        sketch(&folded)
    );
    assert!(
        count(12).abs_diff(8) <= 1,
        "{} of 8: {}",
        count(12),
        sketch(&folded)
    );
    assert_eq!(
        all_whens(&folded),
        vec![(8, count(12) as u64)],
        "{}",
        sketch(&folded)
    );
}

/// The (recorded, written) counts of the spread conditions of a nest.
fn all_whens(nodes: &[MNode]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for n in nodes {
        match n {
            MNode::Steps { body, .. } | MNode::Loop { body, .. } => out.extend(all_whens(body)),
            MNode::When {
                recorded,
                then,
                otherwise,
                ..
            } => {
                out.extend(*recorded);
                out.extend(all_whens(then));
                out.extend(all_whens(otherwise));
            }
            _ => {}
        }
    }
    out
}

#[test]
fn ranks_that_differ_for_a_stretch_agree_again_after_it() {
    // Rank 0 makes two calls the others do not (reading input, say), then every rank
    // runs the same exchange loop: only the stretch is rank-conditional.
    let steps = vec![
        Step::Coll { site: 3 },
        Step::RootOnly { site: 5 },
        Step::RootOnly { site: 6 },
        Step::Loop {
            count: 4,
            vary: false,
            body: vec![
                Step::Send {
                    forward: true,
                    site: 0,
                },
                Step::Coll { site: 4 },
            ],
        },
        Step::Coll { site: 7 },
    ];
    let dirs = Directions::new(Topology::Ring, 4);
    let seqs = rank_seqs(&steps, 4, &dirs, false);
    let merged = merged(&seqs, &dirs);
    assert_eq!(sketch(&merged), "3 If(2) L4[0 4] 7");
    let MNode::If { branches } = &merged[1] else {
        unreachable!()
    };
    assert_eq!(branches[0].0, [0]);
    assert_eq!(sketch(&branches[0].1), "5 6");
    assert!(branches[1].1.is_empty(), "the others skip the stretch");
    for r in 0..4 {
        let mut got = Vec::new();
        run(&merged, r, &dirs, &mut got);
        let got: Vec<(u32, Vec<Option<u64>>)> = got.into_iter().map(|(t, p)| (t.site, p)).collect();
        assert_eq!(got, expected(&seqs[r as usize], r, &dirs), "rank {r}");
    }
}

#[test]
fn a_request_open_across_a_differing_stretch_keeps_the_ranks_apart() {
    // Rank 0 posts a receive, makes a call of its own and waits after the common call:
    // cutting the stretch before the common call would post in one branch and wait
    // outside it.
    let irecv = Tok {
        kind: Kind::P2p {
            op: P2pOp::Irecv,
            halves: vec![Half {
                peer: PeerAbs::Any,
                bytes: Some(8),
                shift: None,
                xor: None,
            }],
            tag: None,
            req: Some(0),
        },
        comm: CommRef::World,
        site: 8,
    };
    let wait = Tok {
        kind: Kind::Wait {
            op: perfskel_grammar::ast::WaitOp::Wait,
            slots: vec![0],
        },
        comm: CommRef::World,
        site: 9,
    };
    let root = vec![coll(3), irecv, coll(5), coll(4), wait, coll(7)];
    let other = vec![coll(3), coll(4), coll(7)];
    let dirs = Directions::new(Topology::Ring, 2);
    let merged = merged(&[root, other], &dirs);
    // The two ranks agree again only at the last call.
    assert_eq!(sketch(&merged), "3 If(2) 7");
}

#[test]
fn coarse_stretches_keep_sends_of_different_size_classes_apart() {
    // Set-up calls alternate a small and a large send (two call sites, two classes):
    // one coarse statement with their mean size could exceed what the receive of the
    // small one holds.
    let dirs = Directions::new(Topology::Chain, 2);
    let mask = dirs.mask(0, dirs.peers[0][0]);
    let send = |bytes: u64, site: u32| Tok {
        kind: Kind::P2p {
            op: P2pOp::Send,
            halves: vec![Half {
                peer: PeerAbs::Dirs { mask, null: false },
                bytes: Some(bytes),
                shift: Some(1),
                xor: None,
            }],
            tag: None,
            req: None,
        },
        comm: CommRef::World,
        site,
    };
    let mut seq = Vec::new();
    for i in 0..20u32 {
        seq.push(coll(100 + i));
        seq.push(send(if i % 2 == 0 { 128 } else { 4096 }, 200 + i));
    }
    for _ in 0..1000 {
        seq.push(coll(1));
        seq.push(coll(2));
    }
    let nodes = nest::rank_nest(&tokens_of(0, &seq), Algorithm::Exact).nodes;
    let app_ns = time_of(&nodes, None);
    let coarse = fold::coarsen(nodes.clone(), app_ns, 1);
    assert!(
        fold::size(&coarse) < fold::size(&nodes),
        "{}",
        sketch(&coarse)
    );
    let mut sends = coarse_sends(&coarse);
    sends.sort_unstable();
    sends.dedup();
    assert_eq!(sends, [128, 4096], "{}", sketch(&coarse));
}

#[test]
fn ranks_that_differ_only_in_peers_share_one_call_with_a_table() {
    // A random ring (HPCC's): each rank sends to its successor in a permutation and
    // receives from its predecessor, no direction or shift relating them; then all
    // reduce. One sendrecv with a table of peers, in one loop, and the allreduce.
    let dirs = Directions::new(Topology::Ring, 4);
    let order = [0u32, 2, 3, 1];
    let seqs: Vec<Vec<Tok>> = (0..4u32)
        .map(|r| {
            let at = order.iter().position(|&x| x == r).unwrap_or(0);
            let to = order[(at + 1) % 4];
            let from = order[(at + 3) % 4];
            let half = |p: u32| Half {
                peer: match dirs.mask(r, Some(u64::from(p))) {
                    0 => PeerAbs::Rank(p),
                    mask => PeerAbs::Dirs { mask, null: false },
                },
                bytes: Some(8),
                shift: Some((p + 4 - r) % 4),
                xor: Some(p ^ r),
            };
            let mut seq = Vec::new();
            for _ in 0..5 {
                seq.push(Tok {
                    kind: Kind::P2p {
                        op: P2pOp::Sendrecv,
                        halves: vec![half(to), half(from)],
                        tag: None,
                        req: None,
                    },
                    comm: CommRef::World,
                    site: 1,
                });
                seq.push(coll(2));
            }
            seq
        })
        .collect();
    let merged = merged(&seqs, &dirs);
    assert_eq!(merged.len(), 1, "{merged:#?}");
    let MNode::Loop { body, .. } = &merged[0] else {
        panic!("{merged:#?}");
    };
    let MNode::Tok { tok, .. } = &body[0] else {
        panic!("{body:#?}");
    };
    let Kind::P2p { halves, .. } = &tok.kind else {
        panic!("{tok:?}");
    };
    let to: BTreeMap<u32, u32> = [(0, 2), (2, 3), (3, 1), (1, 0)].into();
    assert_eq!(halves[0].peer, PeerAbs::Table(to));
    for rank in 0..4 {
        let mut out = Vec::new();
        run(&merged, rank, &dirs, &mut out);
        assert_eq!(out.len(), 10);
    }
}

#[test]
fn recursive_doubling_partners_are_rank_xor_k() {
    // A recursive-doubling allreduce by hand over 8 ranks on a ring: sendrecv with
    // rank ^ 1, rank ^ 2, rank ^ 4, ten times. No direction names rank ^ 1 or rank ^ 2
    // on every rank, nor does one shift; rank ^ 4 is also half the ring ahead.
    let n = 8u32;
    let dirs = Directions::new(Topology::Ring, n);
    let seqs: Vec<Vec<Tok>> = (0..n)
        .map(|r| {
            let half = |p: u32| Half {
                peer: match dirs.mask(r, Some(u64::from(p))) {
                    0 => PeerAbs::Rank(p),
                    mask => PeerAbs::Dirs { mask, null: false },
                },
                bytes: Some(8),
                shift: Some((p + n - r) % n),
                xor: Some(p ^ r),
            };
            let mut seq = Vec::new();
            for _ in 0..10 {
                for (site, k) in [(1u32, 1u32), (2, 2), (3, 4)] {
                    seq.push(Tok {
                        kind: Kind::P2p {
                            op: P2pOp::Sendrecv,
                            halves: vec![half(r ^ k), half(r ^ k)],
                            tag: None,
                            req: None,
                        },
                        comm: CommRef::World,
                        site,
                    });
                }
            }
            seq
        })
        .collect();
    let merged = merged(&seqs, &dirs);
    assert_eq!(merged.len(), 1, "{merged:#?}");
    let MNode::Loop { body, .. } = &merged[0] else {
        panic!("{merged:#?}");
    };
    let peers: Vec<PeerAbs> = body
        .iter()
        .map(|node| match node {
            MNode::Tok {
                tok:
                    Tok {
                        kind: Kind::P2p { halves, .. },
                        ..
                    },
                ..
            } => halves[0].peer.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        peers,
        vec![PeerAbs::Xor(1), PeerAbs::Xor(2), PeerAbs::Shift(4)]
    );
    for rank in 0..n {
        let mut out = Vec::new();
        run(&merged, rank, &dirs, &mut out);
        let want: Vec<Option<u64>> = [1u32, 2, 4]
            .iter()
            .map(|k| Some(u64::from(rank ^ k)))
            .collect();
        assert_eq!(out.len(), 30);
        for (i, (_, p)) in out.iter().enumerate() {
            assert_eq!(p[0], want[i % 3], "rank {rank}, call {i}");
        }
    }
}

#[test]
fn ranks_that_skip_a_call_others_make_to_their_own_partners_leave_one_if() {
    // The transpose exchange on a 4 x 4 grid: every rank off the diagonal sends to and
    // receives from its transpose; the diagonal, its own partner, skips it. Whatever
    // rule the merge finds for pairs of ranks, the busy ranks share one body with a
    // table of partners and the diagonal keeps an empty branch.
    let n = 16u32;
    let dirs = Directions::new(Topology::Ring, n);
    let transpose = |r: u32| (r % 4) * 4 + r / 4;
    let seqs: Vec<Vec<Tok>> = (0..n)
        .map(|r| {
            let p = transpose(r);
            let mut seq = vec![coll(1)];
            if p != r {
                let half = Half {
                    peer: match dirs.mask(r, Some(u64::from(p))) {
                        0 => PeerAbs::Rank(p),
                        mask => PeerAbs::Dirs { mask, null: false },
                    },
                    bytes: Some(64),
                    shift: Some((p + n - r) % n),
                    xor: Some(p ^ r),
                };
                seq.push(Tok {
                    kind: Kind::P2p {
                        op: P2pOp::Sendrecv,
                        halves: vec![half.clone(), half],
                        tag: None,
                        req: None,
                    },
                    comm: CommRef::World,
                    site: 2,
                });
            }
            seq.push(coll(3));
            seq
        })
        .collect();
    let merged = merged(&seqs, &dirs);
    let ifs: Vec<&Vec<(Vec<u32>, Vec<MNode>)>> = merged
        .iter()
        .filter_map(|node| match node {
            MNode::If { branches } => Some(branches),
            _ => None,
        })
        .collect();
    assert_eq!(ifs.len(), 1, "{merged:#?}");
    let branches = ifs[0];
    assert_eq!(branches.len(), 2, "{branches:#?}");
    assert_eq!(branches[1], (vec![0, 5, 10, 15], Vec::new()));
    assert_eq!(branches[0].1.len(), 1, "{branches:#?}");
    for rank in 0..n {
        let mut out = Vec::new();
        run(&merged, rank, &dirs, &mut out);
        let p2p: Vec<Vec<Option<u64>>> = out
            .into_iter()
            .filter(|(t, _)| t.site == 2)
            .map(|(_, p)| p)
            .collect();
        let p = u64::from(transpose(rank));
        if p == u64::from(rank) {
            assert!(p2p.is_empty(), "rank {rank}: {p2p:?}");
        } else {
            assert_eq!(p2p, vec![vec![Some(p), Some(p)]], "rank {rank}");
        }
    }
}

#[test]
fn tables_that_follow_a_rule_are_written_as_the_rule() {
    // Each table as rank -> peer over 16 ranks (entries for the ranks making the call),
    // checked by evaluating the rule's text on every rank of the table.
    let rule = |f: &dyn Fn(u32) -> u32, ranks: &[u32]| -> Option<String> {
        let t: BTreeMap<u32, u32> = ranks.iter().map(|&r| (r, f(r))).collect();
        let e = super::build::table_rule(&t, 16)?;
        for (&r, &p) in &t {
            let env = crate::semantics::Env {
                rank: u64::from(r),
                n_ranks: 16,
                coords: Vec::new(),
            };
            let v = crate::semantics::eval_int_in(&e, &env, &[]).expect("evaluates");
            assert_eq!(
                v,
                i64::from(p),
                "{} at rank {r}",
                perfskel_grammar::printer::expr(&e)
            );
        }
        Some(perfskel_grammar::printer::expr(&e))
    };
    let all: Vec<u32> = (0..16).collect();
    let off_diagonal: Vec<u32> = (0..16).filter(|r| r % 5 != 0).collect();
    assert_eq!(
        rule(&|r| (r + 4) % 16, &all).as_deref(),
        Some("(rank + 4) % nranks")
    );
    assert_eq!(
        rule(&|r| r ^ 5, &[1, 4, 11, 14]).as_deref(),
        Some("rank ^ 5")
    );
    assert_eq!(
        rule(&|r| r / 4 * 4 + (r + 1) % 4, &all).as_deref(),
        Some("rank / 4 * 4 + (rank + 1) % 4")
    );
    assert_eq!(
        rule(&|r| r % 4 * 4 + r / 4, &off_diagonal).as_deref(),
        Some("rank % 4 * 4 + rank / 4")
    );
    // A random ring follows none; one entry is no evidence.
    let ring = [0u32, 2, 3, 1, 7, 5, 4, 6, 9, 8, 11, 10, 15, 13, 12, 14];
    assert_eq!(rule(&|r| ring[r as usize], &all), None);
    assert_eq!(rule(&|r| r ^ 5, &[3]), None);
}

/// HPCC's RandomAccess at 8 ranks: one rank's exchange comes from another call site, so
/// a rank branch posts windows of other names, and a wait after the phase naming both
/// sets was a wait for handles each rank never posted (`check`: request completed before
/// it is posted). Branches that post the same windows share the first branch's names.
#[test]
fn exchange_windows_of_rank_branches_share_their_names() {
    let source = "skeleton w\nranks 4\ntopology ring\napp_time 1 s\n\
        loop 3 {\n    if rank == 2 {\n        loop nranks - 1 as other {\n            req ds2 = isend rank((rank + 1 + other) % nranks) 8 B window 16\n            req dr2 = irecv rank((rank - 1 - other) % nranks) 8 B window 16\n        }\n    } else {\n        loop nranks - 1 as other {\n            compute 1 ms\n            req ds3 = isend rank((rank + 1 + other) % nranks) 8 B window 16\n            req dr3 = irecv rank((rank - 1 - other) % nranks) 8 B window 16\n        }\n    }\n}\n\
        if rank == 0 {\n    loop 2 {\n        req ds4 = isend rank(1) 8 B window 4\n    }\n} else if rank == 1 {\n    loop 2 {\n        req dr4 = irecv rank(0) 8 B window 4\n    }\n} else {\n    compute 1 ms\n}\n";
    let (mut program, diags) = perfskel_grammar::parse(source);
    assert!(diags.is_empty(), "{diags:?}");
    program.body.stmts = super::build::complete_windows(std::mem::take(&mut program.body.stmts));
    let text = perfskel_grammar::print(&program);
    assert!(text.contains("    } else {\n        loop nranks - 1 as other {\n            compute 1 ms\n            req ds2 = isend"), "{text}");
    assert!(
        text.contains("waitall ds2, dr2 # the exchange's messages still in flight\n"),
        "{text}"
    );
    // Branches that post different operations keep their names, and each its wait.
    assert!(text.contains("wait ds4 #"), "{text}");
    assert!(text.contains("wait dr4 #"), "{text}");
    let checked = crate::check::check(&program, &text, crate::check::Options::default());
    assert!(checked.diags.is_empty(), "{:?}\n{text}", checked.diags);
}

/// The windows of data-addressed exchanges are completed after their phase: after the
/// outermost loop that holds them and no other communication, inside a loop that also
/// holds a collective, and inside the branch of an `if`, never after it.
#[test]
fn exchange_windows_are_completed_after_their_phase() {
    let source = "skeleton w\nranks 4\ntopology ring\napp_time 1 s\n\
        loop 10 {\n    loop nranks - 1 as other {\n        compute 1 ms\n        req ds0 = isend rank((rank + 1 + other) % nranks) 8 B window 4\n        req dr0 = irecv rank((rank - 1 - other) % nranks) 8 B window 4\n    }\n}\n\
        loop 5 {\n    loop nranks - 1 as other {\n        req ds1 = isend rank((rank + 1 + other) % nranks) 8 B window 4\n        req dr1 = irecv rank((rank - 1 - other) % nranks) 8 B window 4\n    }\n    barrier\n}\n\
        if rank == 0 {\n    loop 2 {\n        req ds2 = isend rank(1) 8 B window 4\n    }\n} else if rank == 1 {\n    loop 2 {\n        req dr2 = irecv rank(0) 8 B window 4\n    }\n}\n";
    let (mut program, diags) = perfskel_grammar::parse(source);
    assert!(diags.is_empty(), "{diags:?}");
    program.body.stmts = super::build::complete_windows(std::mem::take(&mut program.body.stmts));
    let text = perfskel_grammar::print(&program);
    let expected = "loop 10 {\n    loop nranks - 1 as other {\n        compute 1 ms\n        req ds0 = isend rank((rank + 1 + other) % nranks) 8 B window 4\n        req dr0 = irecv rank((rank - 1 - other) % nranks) 8 B window 4\n    }\n}\nwaitall ds0, dr0 # the exchange's messages still in flight\n\
        loop 5 {\n    loop nranks - 1 as other {\n        req ds1 = isend rank((rank + 1 + other) % nranks) 8 B window 4\n        req dr1 = irecv rank((rank - 1 - other) % nranks) 8 B window 4\n    }\n    waitall ds1, dr1 # the exchange's messages still in flight\n    barrier\n}\n\
        if rank == 0 {\n    loop 2 {\n        req ds2 = isend rank(1) 8 B window 4\n    }\n    wait ds2 # the exchange's messages still in flight\n} else if rank == 1 {\n    loop 2 {\n        req dr2 = irecv rank(0) 8 B window 4\n    }\n    wait dr2 # the exchange's messages still in flight\n}\n";
    assert!(text.ends_with(expected), "{text}");
    // And the program checks clean.
    let checked = crate::check::check(&program, &text, crate::check::Options::default());
    assert!(checked.diags.is_empty(), "{:?}\n{text}", checked.diags);
}

/// A partner exchange written as its graph completes its own receives (`waitall x`
/// after the sends): `complete_windows` adds no wait for `x`, in the loop or after it,
/// and still completes the data-addressed exchange beside it (in the loop, which holds
/// other communication). A rank with no partners
/// (rank 0 here) never posts into `x`, and its `waitall x` is no error.
#[test]
fn partner_graph_windows_are_left_to_their_own_wait() {
    let source = "skeleton w\nranks 4\ntopology ring\napp_time 1 s\n\
        loop 10 {\n    loop 2 as partner {\n        if partner < per_rank(0, 2, 1, 1) {\n            req x = irecv rank([2, 3, 1, 1][per_rank(0, 0, 2, 3) + partner]) [8 B, 16 B, 8 B, 16 B][per_rank(0, 0, 2, 3) + partner] window 2\n        }\n    }\n    loop 2 as partner {\n        if partner < per_rank(0, 2, 1, 1) {\n            compute 1 us\n            send rank([2, 3, 1, 1][per_rank(0, 0, 2, 3) + partner]) [8 B, 16 B, 8 B, 16 B][per_rank(0, 0, 2, 3) + partner]\n        }\n    }\n    waitall x\n    loop nranks - 1 as other {\n        req ds0 = isend rank((rank + 1 + other) % nranks) 8 B window 4\n        req dr0 = irecv rank((rank - 1 - other) % nranks) 8 B window 4\n    }\n}\n";
    let (mut program, diags) = perfskel_grammar::parse(source);
    assert!(diags.is_empty(), "{diags:?}");
    program.body.stmts = super::build::complete_windows(std::mem::take(&mut program.body.stmts));
    let text = perfskel_grammar::print(&program);
    assert_eq!(text.matches("waitall x").count(), 1, "{text}");
    assert!(!text.contains("wait x #"), "{text}");
    assert!(
        text.contains("    }\n    waitall ds0, dr0 # the exchange's messages still in flight\n}\n"),
        "{text}"
    );
    let checked = crate::check::check(&program, &text, crate::check::Options::default());
    assert!(checked.diags.is_empty(), "{:?}\n{text}", checked.diags);
    let info = checked.info.expect("checked");
    let sent: Vec<u64> = info.ranks().iter().map(|r| r.messages_sent).collect();
    // Per iteration: the graph's 0, 2, 1, 1 sends and the exchange's 3 a rank.
    assert_eq!(sent, vec![30, 50, 40, 40]);
}

#[test]
fn compute_in_a_step_loop_keeps_each_ranks_total_over_the_visits_it_runs() {
    // The alignment folded several places into one compute position: 3 visits on rank
    // 0 and 40 on rank 1, in a block the written loop runs twice on 8 of its 10
    // iterations (LAMMPS traced with 4 ranks on 2 cores: 59 visits of 7.1 ms in a block
    // run on 470 steps). Written as the mean of a visit, 16 runs would multiply rank 0's
    // time by 5; each rank keeps its total instead.
    let compute = Tok {
        kind: Kind::Compute,
        comm: CommRef::World,
        site: 3,
    };
    let acc = |n: u64, each_ns: u64| {
        let mut a = nest::Acc::default();
        for _ in 0..n {
            a.add(each_ns, 0);
        }
        a
    };
    let block = |counts: BTreeMap<u32, u64>, accs: BTreeMap<u32, nest::Acc>| MNode::Steps {
        count: 10,
        body: vec![MNode::When {
            cond: fold::Cond::Not(fold::Atom::Every { p: 5, r: 2 }),
            then: vec![MNode::Loop {
                counts,
                body: vec![MNode::Tok {
                    tok: compute.clone(),
                    acc: accs,
                }],
                entry: Default::default(),
            }],
            otherwise: Vec::new(),
            recorded: None,
        }],
    };
    let mut nodes = vec![block(
        [(0, 2), (1, 2)].into(),
        [(0, acc(3, 1_000_000)), (1, acc(40, 100_000))].into(),
    )];
    assert_eq!(fold::keep_totals(&mut nodes), 1);
    let MNode::Steps { body, .. } = &nodes[0] else {
        panic!("{nodes:?}")
    };
    let MNode::When { then, .. } = &body[0] else {
        panic!("{body:?}")
    };
    let MNode::Loop { body, .. } = &then[0] else {
        panic!("{then:?}")
    };
    let MNode::Tok { acc: got, .. } = &body[0] else {
        panic!("{body:?}")
    };
    for (rank, total_ns) in [(0, 3_000_000.0), (1, 4_000_000.0)] {
        let a = &got[&rank];
        assert_eq!(a.n, 16, "rank {rank}: {a:?}");
        assert!((a.sum_ns - total_ns).abs() < 1e-6, "rank {rank}: {a:?}");
        assert!(
            (a.mean() - total_ns / 16.0).abs() < 1e-6,
            "rank {rank}: {a:?}"
        );
        // Every span the same length: no spread made up.
        let var = a.sum_sq / a.n as f64 - a.mean() * a.mean();
        assert!(var.abs() < 1e-3 * a.mean() * a.mean(), "rank {rank}: {a:?}");
    }

    // Visits that match what the loop runs are left as they are.
    let mut exact = vec![block([(0, 2)].into(), [(0, acc(16, 1_000))].into())];
    let before = exact.clone();
    assert_eq!(fold::keep_totals(&mut exact), 0);
    assert_eq!(exact, before);
}

#[test]
fn the_compute_check_flags_a_skeleton_that_computes_more_than_the_trace() {
    use super::summary::ComputeCheck;
    // LAMMPS traced with 4 ranks on 2 cores, before `keep_totals`: 5.28 s of compute on
    // ranks 0 and 2 for 2.34 s in the trace.
    let traced: BTreeMap<u32, f64> = [(0, 2.339), (1, 2.404), (2, 2.311), (3, 2.330)].into();
    let bad = ComputeCheck::new(&traced, 0.0, &[5.279, 2.698, 5.198, 2.642], 5.032, true);
    assert_eq!(bad.worst_rank, Some(0));
    assert!((bad.error_pct - 68.6).abs() < 0.1, "{bad:?}");
    let note = bad.note().expect("a note");
    assert!(
        note.contains("on rank 0 5.279 s against 2.339 s (+125.7 %)"),
        "{note}"
    );
    // After it: within the spans too short to write.
    let good = ComputeCheck::new(&traced, 0.0, &[2.342, 2.349, 2.332, 2.335], 5.032, true);
    assert_eq!(good.note(), None, "{good:?}");
    // A program that mostly communicates: half its little compute in spans too short
    // to write is no fault that matters to the prediction.
    let tiny: BTreeMap<u32, f64> = [(0, 0.010), (1, 0.012)].into();
    let chatty = ComputeCheck::new(&tiny, 0.0, &[0.005, 0.006], 4.0, true);
    assert!(chatty.error_pct < -40.0, "{chatty:?}");
    assert_eq!(chatty.note(), None, "{chatty:?}");
    // A task farm's workers take the tasks that come to them: one may compute twice
    // what it did in the trace, the sum stays, and only a sum that moves is a fault.
    let farm: BTreeMap<u32, f64> = [(0, 0.010), (1, 1.0), (2, 2.0)].into();
    let shared = ComputeCheck::new(&farm, 0.0, &[0.010, 2.0, 1.0], 3.0, false);
    assert_eq!(shared.note(), None, "{shared:?}");
    let lost = ComputeCheck::new(&farm, 0.0, &[0.010, 1.0, 1.0], 3.0, false);
    let note = lost.note().expect("a note");
    assert!(
        note.contains("2.010 s summed over the ranks where the trace has 3.010 s (-33.2 %):"),
        "{note}"
    );
    assert!(!note.contains("on rank"), "{note}");
    // Spans too short to write are not the skeleton's to compute: 40 % of a small
    // program's compute in them (a halo's packing between calls) is no fault, and what
    // is written is checked against the rest.
    let short: BTreeMap<u32, f64> = [(0, 0.75), (1, 0.80)].into();
    let kept = ComputeCheck::new(&short, 0.30, &[0.45, 0.50], 1.0, true);
    assert_eq!(kept.note(), None, "{kept:?}");
    assert!(kept.error_pct.abs() < 1e-9, "{kept:?}");
    let halved = ComputeCheck::new(&short, 0.30, &[0.225, 0.25], 1.0, true);
    let note = halved.note().expect("a note");
    assert!(
        note.contains("1.550 s less 0.600 s in spans too short to write (-50.0 %)"),
        "{note}"
    );
}
