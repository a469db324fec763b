//! The skeleton's topology and its directions: takes the logicalization of the trace,
//! gives the DSL [`Topology`] of the header and, for every rank, which world rank each
//! topology direction names (through [`Shape`], the same semantics the checker and the
//! back ends use), so that a direction is written only where it means exactly the peer
//! that was recorded.

use std::collections::BTreeMap;

use perfskel_grammar::ast::{AxisDir, AxisSpelling, Direction, Expr, Topology};

use crate::logicalize::{self, Logicalization};
use crate::semantics::{Env, Shape};

/// Directions are kept in a bit set; a topology offers at most this many.
pub(crate) const MAX_DIRS: usize = 64;

/// A call site (object, offset) and which half of the call.
pub(crate) type SiteHalf = ((String, u64), u8);

/// One recorded peer, for choosing the topology.
#[derive(Clone, Debug)]
pub(crate) struct RecordedPeer {
    pub rank: u32,
    pub site: SiteHalf,
    /// `None`: `MPI_PROC_NULL`.
    pub peer: Option<u64>,
}

/// The world topology with every rank's neighbours.
#[derive(Clone, Debug)]
pub(crate) struct Directions {
    pub topology: Topology,
    /// The directions the topology offers, indexed by bit position.
    pub dirs: Vec<Direction>,
    /// `peers[rank][dir]`: the world rank `dir` names from `rank`, `None` for no neighbour.
    pub peers: Vec<Vec<Option<u64>>>,
}

impl Directions {
    /// Of the grid the application declared, the logicalization's pattern and the usual
    /// topologies over `n_ranks` ranks (chain, ring, every 2-D and 3-D grid with and
    /// without wrap-around, binary tree, star, hypercube), the one in which the most call
    /// sites use one direction on every rank (what lets the ranks share statements: on
    /// two ranks, a ring's `next` is every rank's partner, a chain needs `next` on one and
    /// `prev` on the other, hence rank conditions; a code that also sends to arbitrary
    /// ranks must not trade its halo's directions for a `star` that names more of those),
    /// then whose directions name the most recorded peers, `MPI_PROC_NULL` included (a
    /// border must have a missing neighbour). The declared grid, then the
    /// logicalization's pattern, win ties. Matching the communication graph alone cannot
    /// tell a 2 × 2 grid from a ring of 4; the peers of the calls can.
    pub fn choose(
        report: Option<&Logicalization>,
        declared: Option<&[(u64, bool)]>,
        n_ranks: u32,
        peers: &[RecordedPeer],
    ) -> Directions {
        let mut candidates: Vec<Topology> = Vec::new();
        // The grid the application declared (`MPI_Cart_create` over the world in its
        // order) goes first: its dimension order and periods are the application's
        // names, so `+x` in the skeleton is the application's direction 0.
        candidates.extend(declared.and_then(|g| declared_topology(g, n_ranks)));
        if let Some(t) = report
            .and_then(|r| r.patterns.first())
            .and_then(|p| dsl_topology(&p.topology, n_ranks))
        {
            candidates.push(t);
        }
        candidates.extend(usual_topologies(n_ranks));
        // In a dimension of size 2, left and right are the same rank when it wraps
        // around: a periodic code's exchange names its one partner by the same
        // direction on both sides (one statement), which the non-periodic reading names
        // `east` on one side and `west` on the other (rank conditions). The graph
        // cannot tell them apart; the peers (MPI_PROC_NULL at a border) can. The wrapped
        // variant goes first, so it wins ties.
        let candidates: Vec<Topology> = candidates
            .into_iter()
            .flat_map(|t| match &t {
                Topology::Grid { dims, periodic }
                    if dims.iter().zip(periodic).any(|(d, p)| *d == 2 && !*p) =>
                {
                    let wrapped = Topology::Grid {
                        dims: dims.clone(),
                        periodic: dims
                            .iter()
                            .zip(periodic)
                            .map(|(d, p)| *p || *d == 2)
                            .collect(),
                    };
                    vec![wrapped, t]
                }
                _ => vec![t],
            })
            .collect();
        let mut best: Option<((usize, usize), Directions)> = None;
        for t in candidates {
            let d = Directions::new(t, n_ranks);
            let mut reached = 0;
            let mut by_site: BTreeMap<&SiteHalf, u64> = BTreeMap::new();
            for p in peers {
                let mask = d.mask(p.rank, p.peer);
                if mask != 0 {
                    reached += 1;
                }
                *by_site.entry(&p.site).or_insert(u64::MAX) &= mask;
            }
            let consistent = by_site.values().filter(|m| **m != 0).count();
            let score = (consistent, reached);
            if best.as_ref().is_none_or(|(s, _)| score > *s) {
                best = Some((score, d));
            }
        }
        best.map(|(_, d)| d)
            .unwrap_or_else(|| Directions::new(Topology::Complete, n_ranks))
    }

    pub fn new(topology: Topology, n_ranks: u32) -> Directions {
        let n = u64::from(n_ranks);
        let shape = Shape::of_topology(&topology, n);
        let dirs = directions_of(&shape, n);
        let peers = (0..n)
            .map(|rank| {
                let env = Env {
                    rank,
                    n_ranks: n,
                    coords: shape.coords(rank),
                };
                dirs.iter()
                    .map(|d| shape.peer(rank, n, d, &env).ok().flatten())
                    .collect()
            })
            .collect();
        Directions {
            topology,
            dirs,
            peers,
        }
    }

    /// Directions from `rank` that name `peer` (`None`: that have no neighbour).
    pub fn mask(&self, rank: u32, peer: Option<u64>) -> u64 {
        let Some(row) = self.peers.get(rank as usize) else {
            return 0;
        };
        row.iter()
            .enumerate()
            .filter(|(_, p)| **p == peer)
            .fold(0, |m, (i, _)| m | (1 << i))
    }
}

/// The grid topology of a declared Cartesian grid (size and periodicity per dimension)
/// over `n_ranks` ranks; `None` when it has no dimension or another number of ranks.
/// The topology of the grid an application declared over all its `n_ranks` ranks (per
/// dimension its size and whether it wraps around); `None` when the sizes do not
/// multiply to `n_ranks`.
pub fn declared_topology(grid: &[(u64, bool)], n_ranks: u32) -> Option<Topology> {
    let dims: Vec<u64> = grid.iter().map(|(d, _)| *d).collect();
    (!dims.is_empty() && dims.iter().product::<u64>() == u64::from(n_ranks)).then(|| {
        Topology::Grid {
            dims,
            periodic: grid.iter().map(|(_, p)| *p).collect(),
        }
    })
}

fn usual_topologies(n: u32) -> Vec<Topology> {
    let n64 = u64::from(n);
    let mut out = vec![Topology::Chain, Topology::Ring];
    let grid = |dims: Vec<u64>, wrap: bool| Topology::Grid {
        periodic: vec![wrap; dims.len()],
        dims,
    };
    for a in 2..n64 {
        if n64 % a != 0 || n64 / a < 2 {
            continue;
        }
        let rest = n64 / a;
        for wrap in [false, true] {
            out.push(grid(vec![a, rest], wrap));
        }
        for b in 2..rest {
            if rest % b == 0 && rest / b >= 2 {
                for wrap in [false, true] {
                    out.push(grid(vec![a, b, rest / b], wrap));
                }
            }
        }
    }
    out.push(Topology::Tree { arity: 2 });
    out.push(Topology::Star);
    if n.is_power_of_two() && n > 1 {
        out.push(Topology::Hypercube);
    }
    out
}

fn dsl_topology(t: &logicalize::Topology, n_ranks: u32) -> Option<Topology> {
    Some(match t {
        logicalize::Topology::Grid { dims, periodic } if dims.len() == 1 => {
            if periodic.first().copied().unwrap_or(false) && n_ranks > 2 {
                Topology::Ring
            } else {
                Topology::Chain
            }
        }
        logicalize::Topology::Grid { dims, periodic } => Topology::Grid {
            dims: dims.iter().map(|d| u64::from(*d)).collect(),
            periodic: periodic.clone(),
        },
        logicalize::Topology::Hypercube { .. } => Topology::Hypercube,
        logicalize::Topology::Tree { arity } => Topology::Tree {
            arity: u64::from(*arity),
        },
        logicalize::Topology::Star => Topology::Star,
        logicalize::Topology::Complete => Topology::Complete,
        logicalize::Topology::BinomialTree => return None,
    })
}

fn directions_of(shape: &Shape, n: u64) -> Vec<Direction> {
    let axis = |dim: u32, forward: bool, n_dims: usize| {
        Direction::Axis(AxisDir {
            dim,
            forward,
            spelling: if n_dims <= 3 {
                AxisSpelling::Compass
            } else {
                AxisSpelling::Numbered
            },
        })
    };
    let mut dirs = match shape {
        Shape::Grid { dims, .. } if dims.len() == 1 => vec![Direction::Next, Direction::Prev],
        Shape::Grid { dims, .. } => (0..dims.len() as u32)
            .flat_map(|d| [axis(d, true, dims.len()), axis(d, false, dims.len())])
            .collect(),
        Shape::Hypercube { bits } => (0..i64::from(*bits))
            .map(|b| Direction::Bit(Expr::int(b)))
            .collect(),
        Shape::Tree { arity } => std::iter::once(Direction::Parent)
            .chain((0..*arity as i64).map(|i| Direction::Child(Expr::int(i))))
            .collect(),
        Shape::Star => std::iter::once(Direction::Hub)
            .chain((0..n.saturating_sub(1) as i64).map(|i| Direction::Leaf(Expr::int(i))))
            .collect(),
        _ => Vec::new(),
    };
    dirs.truncate(MAX_DIRS);
    dirs
}
