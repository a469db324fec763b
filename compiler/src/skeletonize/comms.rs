//! Communicators: takes the communicator-creating calls of every rank (their members as
//! world ranks), gives the top-level `comm` declarations of the skeleton and each rank's
//! map from its communicator ids to them.
//!
//! A communicator may derive from any other (a `dup` of a `split` of a `cart_sub` ...).
//! The calls that make one communicator are matched across ranks the way MPI orders
//! them: the k-th creating call a rank makes on a parent communicator is, on every rank
//! of that parent, the same collective call. So the calls are grouped by (parent, k),
//! parents first, and each group becomes one declaration: `dup(parent)` when every rank
//! got its parent's group back, otherwise `split(parent, color = E, key = E)` with a
//! color and key found among simple expressions of the rank and its coordinates and
//! checked on every rank (ranks that got `MPI_COMM_NULL` get a negative color).
//! `MPI_Cart_create` of the whole of `MPI_COMM_WORLD` without reordering is the world
//! itself: the skeleton's topology already gives the grid.

use std::collections::{BTreeMap, BTreeSet};

use perfskel_grammar::ast::{BinOp, CommDef, Expr, ExprKind, Ident, Topology, UnaryOp};

use crate::semantics::Shape;
use crate::trace::{Event, Op, OpClass};

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
    /// Whether the skeleton declares it ([`Comms::keep_used`]).
    pub kept: bool,
    /// What the declaration's comment says instead of the call that made it.
    pub note: Option<&'static str>,
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
    /// Communicators no declaration reproduces, each with why; calls on them are
    /// dropped (and counted).
    pub unexpressed: Vec<String>,
}

/// One communicator-creating call of a rank, as the survey meets it: the new
/// communicator's id (`None`: the rank got `MPI_COMM_NULL`), its parent's id, the call
/// site's name and the call.
#[derive(Clone, Debug)]
pub(crate) struct Creation {
    pub new: Option<u64>,
    pub parent: u64,
    pub site: Option<String>,
    pub op: Op,
}

/// A rank's intercommunicators, followed event by event: those `MPI_Intercomm_create`
/// and `MPI_Comm_spawn` make, and what is duplicated, split or created from them (also
/// intercommunicators); and the intracommunicators `MPI_Intercomm_merge` makes of them
/// (and what derives from those), which no declaration stands for. Intercommunicators
/// are not modelled: the calls on both kinds are dropped and counted.
#[derive(Debug, Default)]
pub(crate) struct Intercomms {
    inter: BTreeSet<u64>,
    merged: BTreeSet<u64>,
}

impl Intercomms {
    /// Follows one event; what its communicator is when that is an intercommunicator or
    /// merged from one.
    pub fn see(&mut self, ev: &Event) -> Option<&'static str> {
        let on = match ev.comm {
            Some(c) if self.inter.contains(&c) => Some("an intercommunicator"),
            Some(c) if self.merged.contains(&c) => {
                Some("a communicator merged from an intercommunicator")
            }
            _ => None,
        };
        if let Some(new) = ev.newcomm {
            if ev.op.makes_intercomm() {
                self.inter.insert(new);
            } else if ev.op == Op::IntercommMerge {
                self.merged.insert(new);
            } else if is_creating(ev.op) {
                match ev.comm {
                    Some(c) if self.inter.contains(&c) => {
                        self.inter.insert(new);
                    }
                    Some(c) if self.merged.contains(&c) => {
                        self.merged.insert(new);
                    }
                    _ => {}
                }
            }
        }
        on
    }
}

/// Why an event the skeleton does not model is dropped, if it is one: one-sided
/// communication, the calls that make intercommunicators, and every call on one or on
/// what is merged from one (`on`, from [`Intercomms::see`]).
pub(crate) fn unmodelled(ev: &Event, on: Option<&str>) -> Option<String> {
    let name = ev.op.mpi_name();
    if ev.op.class() == OpClass::OneSided {
        Some(format!("{name}: one-sided communication is not modelled"))
    } else if ev.op.makes_intercomm() {
        Some(format!("{name}: intercommunicators are not modelled"))
    } else {
        on.map(|what| format!("{name} on {what}: intercommunicators are not modelled"))
    }
}

/// Collects the communicator-creating calls rank by rank (the survey pass).
#[derive(Debug, Default)]
pub(crate) struct CommSurvey {
    members: BTreeMap<(u32, u64), Vec<i64>>,
    /// Every rank read to its end, with its creating calls in program order.
    calls: BTreeMap<u32, Vec<Creation>>,
}

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
        creating: Vec<Creation>,
    ) {
        for (id, members) in comms {
            self.members.insert((rank, *id), members.clone());
        }
        self.calls.insert(rank, creating);
    }
}

/// The calls of all ranks that make one communicator.
#[derive(Debug)]
struct Group {
    parent: CommRef,
    calls: Vec<(u32, Creation)>,
}

impl Comms {
    pub fn build(survey: CommSurvey, n_ranks: u32, topology: &Topology) -> Comms {
        let mut comms = Comms {
            n_ranks,
            members: survey.members,
            ..Comms::default()
        };
        let shape = Shape::of_topology(topology, u64::from(n_ranks));
        // MPI_COMM_SELF: every rank alone. Declared (first, so that what is made from it
        // can follow) only when a kept call uses it.
        let own = CommRef::Named(0);
        comms.decls.push(Decl {
            name: "self0".into(),
            def: CommDef::Split {
                parent: Ident::new("world"),
                color: Expr::new(ExprKind::Rank),
                key: None,
            },
            site: None,
            op: Op::CommSplit,
            kept: true,
            note: Some("MPI_COMM_SELF"),
        });
        for rank in 0..n_ranks {
            comms.map.insert((rank, 1), own);
            comms.local.insert((rank, own), 1);
            comms.members.insert((rank, 1), vec![i64::from(rank)]);
        }
        let calls = survey.calls;
        // How far each rank's calls are grouped, and how many calls it made per parent.
        let mut cursor: BTreeMap<u32, usize> = BTreeMap::new();
        let mut ordinal: BTreeMap<(u32, CommRef), u32> = BTreeMap::new();
        // Groups by (parent, ordinal), with the order they were first seen in.
        let mut pending: BTreeMap<(CommRef, u32), (usize, Group)> = BTreeMap::new();
        let mut seen = 0usize;
        // New communicators of pending groups: their ranks wait for the group.
        let mut awaiting: BTreeSet<(u32, u64)> = BTreeSet::new();
        // Communicators no declaration stands for (their calls and children dropped).
        let mut undeclared: BTreeMap<String, u64> = BTreeMap::new();
        loop {
            let mut progress = false;
            for (&rank, list) in &calls {
                let at = cursor.entry(rank).or_insert(0);
                while let Some(call) = list.get(*at) {
                    let parent = match call.parent {
                        0 => Some(CommRef::World),
                        id => comms.map.get(&(rank, id)).copied(),
                    };
                    let Some(parent) = parent else {
                        if awaiting.contains(&(rank, call.parent)) {
                            break;
                        }
                        let why = match call.parent {
                            1 => "made from MPI_COMM_SELF".to_string(),
                            _ => "derived from a communicator the skeleton does not declare"
                                .to_string(),
                        };
                        *undeclared
                            .entry(format!("{}: {why}", call.op.mpi_name()))
                            .or_default() += 1;
                        *at += 1;
                        progress = true;
                        continue;
                    };
                    let k = ordinal.entry((rank, parent)).or_insert(0);
                    let entry = pending.entry((parent, *k)).or_insert_with(|| {
                        seen += 1;
                        (
                            seen,
                            Group {
                                parent,
                                calls: Vec::new(),
                            },
                        )
                    });
                    entry.1.calls.push((rank, call.clone()));
                    *k += 1;
                    if let Some(new) = call.new {
                        awaiting.insert((rank, new));
                    }
                    *at += 1;
                    progress = true;
                }
            }
            // Declare the groups every traced rank of whose parent has joined (all that
            // are left once no rank can go further: some ranks were not traced).
            let traced = |r: u32| calls.contains_key(&r);
            let mut ready: Vec<(usize, (CommRef, u32))> = pending
                .iter()
                .filter(|(_, (_, g))| {
                    let have: BTreeSet<u32> = g.calls.iter().map(|(r, _)| *r).collect();
                    (0..n_ranks)
                        .filter(|&r| traced(r) && comms.holds(r, g.parent))
                        .all(|r| have.contains(&r))
                })
                .map(|(k, (order, _))| (*order, *k))
                .collect();
            if ready.is_empty() && !progress {
                ready = pending.iter().map(|(k, (order, _))| (*order, *k)).collect();
            }
            if ready.is_empty() && !progress {
                break;
            }
            ready.sort_unstable();
            for (_, key) in ready {
                let Some((_, group)) = pending.remove(&key) else {
                    continue;
                };
                for (r, call) in &group.calls {
                    if let Some(new) = call.new {
                        awaiting.remove(&(*r, new));
                    }
                }
                comms.declare(group, &shape);
            }
        }
        comms.unexpressed.extend(
            undeclared
                .into_iter()
                .map(|(what, n)| format!("{what} ({n} call(s))")),
        );
        comms
    }

    /// Whether `rank` holds an instance of `comm`.
    fn holds(&self, rank: u32, comm: CommRef) -> bool {
        comm == CommRef::World || self.local.contains_key(&(rank, comm))
    }

    /// The name a declaration refers to `comm` by.
    fn ident(&self, comm: CommRef) -> Ident {
        match comm {
            CommRef::World => Ident::new("world"),
            CommRef::Named(i) => Ident::new(
                self.decls
                    .get(i as usize)
                    .map_or("world", |d| d.name.as_str()),
            ),
        }
    }

    /// Members (world ranks, in communicator order) of `rank`'s instance of `comm`.
    fn instance(&self, rank: u32, comm: CommRef) -> Option<Vec<i64>> {
        match comm {
            CommRef::World => Some((0..i64::from(self.n_ranks)).collect()),
            c => self.members_of(rank, c).cloned(),
        }
    }

    /// Turns one group of calls into a declaration (or a reason it has none).
    fn declare(&mut self, group: Group, shape: &Shape) {
        let Some((_, first)) = group.calls.first() else {
            return;
        };
        let op = first.op;
        let site = group.calls.iter().find_map(|(_, c)| c.site.clone());
        let label = format!(
            "{} on {} (call {})",
            op.mpi_name(),
            match group.parent {
                CommRef::World => "MPI_COMM_WORLD".to_string(),
                p => format!("`{}`", self.ident(p).name),
            },
            self.decls.len() + self.unexpressed.len() + 1
        );
        // Per calling rank: its parent instance and its new group (None: MPI_COMM_NULL).
        let mut ranks: BTreeMap<u32, (Vec<i64>, Option<Vec<i64>>)> = BTreeMap::new();
        for (r, call) in &group.calls {
            let Some(parent) = self.instance(*r, group.parent) else {
                continue;
            };
            let new = match call.new {
                Some(id) => match self.members.get(&(*r, id)) {
                    Some(m) => Some(m.clone()),
                    None => {
                        self.unexpressed
                            .push(format!("{label}: the trace lacks its members"));
                        return;
                    }
                },
                None => None,
            };
            ranks.insert(*r, (parent, new));
        }
        let whole = ranks
            .values()
            .all(|(parent, new)| new.as_ref() == Some(parent));
        let resolved = if whole && op == Op::CartCreate && group.parent == CommRef::World {
            Some(CommRef::World)
        } else {
            let def = if whole {
                Some(CommDef::Dup {
                    parent: self.ident(group.parent),
                })
            } else {
                split_def(&ranks, self.n_ranks, shape).map(|(color, key)| CommDef::Split {
                    parent: self.ident(group.parent),
                    color,
                    key,
                })
            };
            def.map(|def| {
                let prefix = match op {
                    Op::CommDup => "dup",
                    Op::CartCreate => "cart",
                    Op::CartSub => "sub",
                    Op::CommCreate => "group",
                    _ => "split",
                };
                let idx = self.decls.len() as u32;
                self.decls.push(Decl {
                    name: format!("{prefix}{}", idx + 1),
                    def,
                    site: site.clone(),
                    op,
                    kept: true,
                    note: None,
                });
                CommRef::Named(idx)
            })
        };
        match resolved {
            Some(c) => {
                for (r, call) in &group.calls {
                    if let Some(id) = call.new {
                        self.map.insert((*r, id), c);
                        self.local.insert((*r, c), id);
                    }
                }
            }
            None => self.unexpressed.push(format!(
                "{label}: no color/key expression of the rank reproduces its groups"
            )),
        }
    }

    /// Keeps the declarations `used` names and those they derive from; the others (made
    /// by the application but never used by a call the skeleton keeps) are marked left
    /// out, and the kept ones renamed in order (indexes stay valid). Gives how many went.
    pub fn keep_used(&mut self, used: &BTreeSet<CommRef>) -> usize {
        let by_name: BTreeMap<String, usize> = self
            .decls
            .iter()
            .enumerate()
            .map(|(i, d)| (d.name.clone(), i))
            .collect();
        let mut keep: BTreeSet<usize> = BTreeSet::new();
        for c in used {
            let CommRef::Named(i) = *c else {
                continue;
            };
            let mut at = Some(i as usize);
            while let Some(i) = at.filter(|i| keep.insert(*i)) {
                at = self
                    .decls
                    .get(i)
                    .and_then(|d| by_name.get(&d.def.parent().name).copied());
            }
        }
        let mut renamed: BTreeMap<String, String> = BTreeMap::new();
        let mut n_kept = 0;
        for (i, d) in self.decls.iter_mut().enumerate() {
            d.kept = keep.contains(&i);
            if !d.kept {
                continue;
            }
            n_kept += 1;
            let prefix: String = d
                .name
                .chars()
                .take_while(|c| c.is_ascii_alphabetic())
                .collect();
            let name = format!("{prefix}{n_kept}");
            renamed.insert(std::mem::replace(&mut d.name, name.clone()), name);
            let parent = match &mut d.def {
                CommDef::Split { parent, .. }
                | CommDef::Dup { parent }
                | CommDef::CartSub { parent, .. } => parent,
            };
            if let Some(new) = renamed.get(&parent.name) {
                *parent = Ident::new(new.clone());
            }
        }
        // MPI_COMM_SELF is not one the application made.
        self.decls
            .iter()
            .filter(|d| !d.kept && d.note.is_none())
            .count()
    }

    /// The communicator a rank-local id stands for; `None` for communicators the
    /// skeleton cannot declare.
    pub fn lookup(&self, rank: u32, id: u64) -> Option<CommRef> {
        match id {
            0 => Some(CommRef::World),
            _ => self.map.get(&(rank, id)).copied(),
        }
    }

    /// For a rank-local id whose communicator holds every rank in world order (world
    /// or a copy of it), a number naming that communicator alike on every rank (0 for
    /// world); `None` for any other.
    pub fn world_copy(&self, rank: u32, id: u64) -> Option<u32> {
        match self.lookup(rank, id)? {
            CommRef::World => Some(0),
            c @ CommRef::Named(i) => self
                .members_of(rank, c)
                .is_some_and(|m| self.in_world_order(m))
                .then_some(i + 1),
        }
    }

    /// Whether `comm` holds every rank in world order (world, or a copy of it), so
    /// that `rank` in a peer expression is the caller's rank in it. One member's view
    /// decides: a communicator is one group on all its members.
    pub fn world_numbered(&self, comm: CommRef) -> bool {
        match comm {
            CommRef::World => true,
            c => (0..self.n_ranks)
                .find_map(|r| self.members_of(r, c))
                .is_some_and(|m| self.in_world_order(m)),
        }
    }

    fn in_world_order(&self, members: &[i64]) -> bool {
        members.len() == self.n_ranks as usize && members.iter().zip(0i64..).all(|(m, w)| *m == w)
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

/// The color and key of a `split(parent, color = E, key = E)` that gives every calling
/// rank exactly its recorded group in its recorded order: ranks of one parent instance
/// share a color exactly when they share a group; ranks that got `MPI_COMM_NULL` get a
/// negative color; the key is left out when the parent's order is kept.
/// `ranks`: calling rank → (its parent instance, its new group).
fn split_def(
    ranks: &BTreeMap<u32, (Vec<i64>, Option<Vec<i64>>)>,
    n_ranks: u32,
    shape: &Shape,
) -> Option<(Expr, Option<Expr>)> {
    let candidates = candidates(n_ranks, shape);
    let value = |values: &[i64], r: u32| values.get(r as usize).copied().unwrap_or(i64::MIN);
    let members: Vec<(u32, &Vec<i64>, &Vec<i64>)> = ranks
        .iter()
        .filter_map(|(r, (parent, new))| Some((*r, parent, new.as_ref()?)))
        .collect();
    // A constant color first (one group per parent instance), then the rank's terms.
    let zero = (Expr::int(0), vec![0; n_ranks as usize]);
    let color = std::iter::once(&zero)
        .chain(&candidates)
        .find(|(_, values)| {
            members.iter().all(|(a, pa, ma)| {
                members
                    .iter()
                    .filter(|(_, pb, _)| pa == pb)
                    .all(|(b, _, mb)| (value(values, *a) == value(values, *b)) == (ma == mb))
            })
        })?;
    let excluded: BTreeSet<u32> = ranks
        .iter()
        .filter(|(_, (_, new))| new.is_none())
        .map(|(r, _)| *r)
        .collect();
    let color = if excluded.is_empty() {
        color.0.clone()
    } else {
        // The rank itself first: most codes leave out the ranks past a count.
        let indicator = candidates
            .iter()
            .find_map(|(expr, values)| exclusion(expr, values, ranks.keys().copied(), &excluded))?;
        if matches!(color.0.kind, ExprKind::Int(0)) {
            Expr::new(ExprKind::Unary(UnaryOp::Neg, Box::new(indicator)))
        } else {
            // color - (largest color + 1) * indicator: members keep their color
            // (indicator 0), the others go negative (indicator at least 1).
            let mut top = 0i64;
            for r in ranks.keys() {
                let v = value(&color.1, *r);
                if v < 0 {
                    return None;
                }
                top = top.max(v);
            }
            bin(
                BinOp::Sub,
                color.0.clone(),
                bin(BinOp::Mul, Expr::int(top.checked_add(1)?), indicator),
            )
        }
    };
    // Recorded order against the parent's: the key is left out when they agree.
    let in_parent_order = members.iter().all(|(_, parent, m)| {
        let at = |w: i64| parent.iter().position(|p| *p == w).unwrap_or(usize::MAX);
        m.windows(2).all(|w| at(w[0]) < at(w[1]))
    });
    let key = if in_parent_order {
        None
    } else {
        let (expr, _) = candidates.iter().find(|(_, values)| {
            members.iter().all(|(_, _, m)| {
                m.windows(2).all(|w| {
                    let at = |r: i64| u32::try_from(r).map_or(i64::MAX, |r| value(values, r));
                    at(w[0]) < at(w[1])
                })
            })
        })?;
        Some(expr.clone())
    };
    Some((color, key))
}

/// An expression that is 0 on the ranks that join and at least 1 on those that do not,
/// made from candidate `expr` (its `values` per world rank): `expr / t` where the
/// excluded ranks are exactly those of `ranks` with a value of at least `t`, every
/// value non-negative.
fn exclusion(
    expr: &Expr,
    values: &[i64],
    ranks: impl Iterator<Item = u32>,
    excluded: &BTreeSet<u32>,
) -> Option<Expr> {
    let mut joined_max = -1i64;
    let mut excluded_min = i64::MAX;
    for r in ranks {
        let v = *values.get(r as usize)?;
        if v < 0 {
            return None;
        }
        if excluded.contains(&r) {
            excluded_min = excluded_min.min(v);
        } else {
            joined_max = joined_max.max(v);
        }
    }
    if excluded_min <= joined_max || excluded_min == i64::MAX {
        return None;
    }
    let t = joined_max + 1;
    if t == 0 {
        return None;
    }
    Some(if t == 1 {
        expr.clone()
    } else {
        bin(BinOp::Div, expr.clone(), Expr::int(t))
    })
}

/// `a op b`.
pub(crate) fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)))
}

/// Simple expressions of the rank with their value on every rank, the rank itself first.
fn candidates(n_ranks: u32, shape: &Shape) -> Vec<(Expr, Vec<i64>)> {
    let n = i64::from(n_ranks);
    let rank = || Expr::new(ExprKind::Rank);
    let mut out = vec![(rank(), (0..n).collect())];
    if let Shape::Grid { dims, .. } = shape {
        for d in 0..dims.len() {
            let values = (0..n)
                .map(|r| shape.coords(r as u64).get(d).map_or(0, |c| *c as i64))
                .collect();
            out.push((Expr::new(ExprKind::Coord(d as u32)), values));
        }
    }
    for k in 2..n {
        out.push((
            bin(BinOp::Div, rank(), Expr::int(k)),
            (0..n).map(|r| r / k).collect(),
        ));
        out.push((
            bin(BinOp::Rem, rank(), Expr::int(k)),
            (0..n).map(|r| r % k).collect(),
        ));
    }
    out
}
