//! Communicators: takes the communicator-creating calls of every rank (their members as
//! world ranks), gives the top-level `comm` declarations of the skeleton (`dup`, or
//! `split` with a color and key found among simple expressions of the rank and its
//! coordinates, checked on every rank) and each rank's map from its communicator ids to
//! them. `MPI_Cart_create` without reordering is the world itself: the skeleton's
//! topology already gives the grid.

use std::collections::BTreeMap;

use perfskel_grammar::ast::{BinOp, CommDef, Expr, ExprKind, Ident, Topology};

use crate::semantics::Shape;
use crate::trace::Op;

/// One creating call on one rank: rank, new communicator id, parent id, site id, call.
type Creation = (u32, u64, Option<u64>, u64, Op);

/// A communicator as tokens refer to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum CommRef {
    World,
    /// Index into [`Comms::decls`].
    Named(u32),
}

/// One `comm NAME = ...` declaration.
#[derive(Clone, Debug)]
pub(crate) struct Decl {
    pub name: String,
    pub def: CommDef,
    /// Where the first rank that made it called it.
    pub site: Option<String>,
    pub op: Op,
}

/// Every communicator of the trace.
#[derive(Clone, Debug, Default)]
pub(crate) struct Comms {
    pub decls: Vec<Decl>,
    /// (rank, rank-local id) → communicator.
    map: BTreeMap<(u32, u64), CommRef>,
    /// (rank, communicator) → rank-local id.
    local: BTreeMap<(u32, CommRef), u64>,
    /// Members (world ranks) of each rank's communicators, by rank-local id.
    members: BTreeMap<(u32, u64), Vec<i64>>,
    pub n_ranks: u32,
    /// Communicators no simple declaration reproduces; calls on them are dropped.
    pub unexpressed: Vec<String>,
}

/// Collects the communicator-creating calls rank by rank (the survey pass).
#[derive(Debug, Default)]
pub(crate) struct CommSurvey {
    members: BTreeMap<(u32, u64), Vec<i64>>,
    /// The k-th creating call of every rank creates the same communicator.
    created: BTreeMap<usize, Vec<Creation>>,
    /// Call-site name of each creating call on the first rank that made it.
    site_names: BTreeMap<usize, String>,
}

/// One communicator-creating call of a rank, as the survey meets it: the new
/// communicator's id (if any), its parent's id, the call-site id and the call.
pub(crate) type RankCreation = (Option<u64>, Option<u64>, u64, Op);

/// Whether `op` creates a communicator.
pub(crate) fn is_creating(op: Op) -> bool {
    matches!(
        op,
        Op::CommDup | Op::CommSplit | Op::CommCreate | Op::CartCreate | Op::CartSub
    )
}

impl CommSurvey {
    /// Adds one rank read to its end: its communicators (id → members) and its creating
    /// calls in order.
    pub fn add_rank(
        &mut self,
        rank: u32,
        comms: &BTreeMap<u64, Vec<i64>>,
        creating: &[RankCreation],
        site_name: &mut dyn FnMut(u64) -> Option<String>,
    ) {
        for (id, members) in comms {
            self.members.insert((rank, *id), members.clone());
        }
        for (k, &(newcomm, parent, site, op)) in creating.iter().enumerate() {
            if let Some(new) = newcomm {
                self.created
                    .entry(k)
                    .or_default()
                    .push((rank, new, parent, site, op));
                if let std::collections::btree_map::Entry::Vacant(slot) = self.site_names.entry(k) {
                    if let Some(name) = site_name(site) {
                        slot.insert(name);
                    }
                }
            }
        }
    }
}

impl Comms {
    pub fn build(survey: CommSurvey, n_ranks: u32, topology: &Topology) -> Comms {
        let mut comms = Comms {
            n_ranks,
            members: survey.members,
            ..Comms::default()
        };
        let created = survey.created;
        let shape = Shape::of_topology(topology, u64::from(n_ranks));
        for (k, calls) in &created {
            let Some(&(_, _, _, _, op)) = calls.first() else {
                continue;
            };
            let site = survey.site_names.get(k).cloned();
            let parents: Vec<Option<CommRef>> = calls
                .iter()
                .map(|(r, _, parent, _, _)| match parent {
                    None | Some(0) => Some(CommRef::World),
                    Some(id) => comms.map.get(&(*r, *id)).copied(),
                })
                .collect();
            let label = format!("{} at call {}", op.mpi_name(), comms.decls.len() + 1);
            if parents.iter().any(|p| *p != Some(CommRef::World)) {
                comms.unexpressed.push(format!(
                    "{label}: derived from a communicator other than MPI_COMM_WORLD"
                ));
                continue;
            }
            let members: BTreeMap<u32, Vec<i64>> = calls
                .iter()
                .filter_map(|(r, id, ..)| Some((*r, comms.members.get(&(*r, *id))?.clone())))
                .collect();
            let world: Vec<i64> = (0..i64::from(n_ranks)).collect();
            let whole = members.len() == calls.len() && members.values().all(|m| *m == world);
            let resolved = if whole && op == Op::CartCreate {
                Some(CommRef::World)
            } else {
                let def = if whole {
                    Some(CommDef::Dup {
                        parent: Ident::new("world"),
                    })
                } else {
                    split_def(&members, n_ranks, &shape)
                };
                def.map(|def| {
                    let prefix = match op {
                        Op::CommDup => "dup",
                        Op::CartCreate => "cart",
                        Op::CartSub => "sub",
                        Op::CommCreate => "group",
                        _ => "split",
                    };
                    let idx = comms.decls.len() as u32;
                    comms.decls.push(Decl {
                        name: format!("{prefix}{}", idx + 1),
                        def,
                        site: site.clone(),
                        op,
                    });
                    CommRef::Named(idx)
                })
            };
            match resolved {
                Some(c) => {
                    for (r, id, ..) in calls {
                        comms.map.insert((*r, *id), c);
                        comms.local.insert((*r, c), *id);
                    }
                }
                None => comms.unexpressed.push(format!(
                    "{label}: no color/key expression of the rank reproduces its groups"
                )),
            }
        }
        comms
    }

    /// The communicator a rank-local id stands for; `None` for `MPI_COMM_SELF` and
    /// communicators the skeleton cannot declare.
    pub fn lookup(&self, rank: u32, id: u64) -> Option<CommRef> {
        match id {
            0 => Some(CommRef::World),
            _ => self.map.get(&(rank, id)).copied(),
        }
    }

    fn members_of(&self, rank: u32, comm: CommRef) -> Option<&Vec<i64>> {
        let id = self.local.get(&(rank, comm))?;
        self.members.get(&(rank, *id))
    }

    /// The number of ranks of `comm` as `rank` sees it.
    pub fn size(&self, rank: u32, comm: CommRef) -> u64 {
        match comm {
            CommRef::World => u64::from(self.n_ranks),
            c => self.members_of(rank, c).map_or(1, |m| m.len() as u64),
        }
    }

    /// The rank in `comm` of world rank `world`.
    pub fn index_in(&self, rank: u32, comm: CommRef, world: i64) -> Option<u32> {
        match comm {
            CommRef::World => u32::try_from(world).ok(),
            c => self
                .members_of(rank, c)?
                .iter()
                .position(|m| *m == world)
                .map(|i| i as u32),
        }
    }
}

/// A `split(world, color = E, key = E)` that gives every rank exactly its recorded
/// members in their recorded order.
fn split_def(members: &BTreeMap<u32, Vec<i64>>, n_ranks: u32, shape: &Shape) -> Option<CommDef> {
    if members.len() != n_ranks as usize {
        return None;
    }
    let candidates = candidates(n_ranks, shape);
    let color = candidates.iter().find(|(_, values)| {
        members.iter().all(|(a, ma)| {
            members
                .iter()
                .all(|(b, mb)| (values[*a as usize] == values[*b as usize]) == (ma == mb))
        })
    })?;
    let sorted = members.values().all(|m| m.windows(2).all(|w| w[0] < w[1]));
    let key = if sorted {
        None
    } else {
        let (expr, _) = candidates.iter().find(|(_, values)| {
            members.values().all(|m| {
                m.windows(2).all(|w| {
                    let at = |r: i64| values.get(r as usize).copied().unwrap_or(i64::MAX);
                    at(w[0]) < at(w[1])
                })
            })
        })?;
        Some(expr.clone())
    };
    Some(CommDef::Split {
        parent: Ident::new("world"),
        color: color.0.clone(),
        key,
    })
}

/// Simple expressions of the rank with their value on every rank.
fn candidates(n_ranks: u32, shape: &Shape) -> Vec<(Expr, Vec<i64>)> {
    let n = i64::from(n_ranks);
    let rank = || Expr::new(ExprKind::Rank);
    let bin = |op, k: i64| {
        Expr::new(ExprKind::Binary(
            op,
            Box::new(rank()),
            Box::new(Expr::int(k)),
        ))
    };
    let mut out = Vec::new();
    if let Shape::Grid { dims, .. } = shape {
        for d in 0..dims.len() {
            let values = (0..n)
                .map(|r| shape.coords(r as u64).get(d).map_or(0, |c| *c as i64))
                .collect();
            out.push((Expr::new(ExprKind::Coord(d as u32)), values));
        }
    }
    for k in 2..n {
        out.push((bin(BinOp::Div, k), (0..n).map(|r| r / k).collect()));
        out.push((bin(BinOp::Rem, k), (0..n).map(|r| r % k).collect()));
    }
    out.push((rank(), (0..n).collect()));
    out.push((Expr::int(0), vec![0; n as usize]));
    out
}
