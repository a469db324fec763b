//! Communicators: the groups every declaration creates, computed once before a run.
//!
//! Declarations sit at the top level (the static pass makes sure), so their groups are
//! known before any rank runs; a run still treats each declaration as a collective over
//! its parent. `split` groups the parent's ranks by color, ordered by key (default: the
//! rank in the parent), a negative color leaving a rank out; `dup` copies the parent's
//! group and shape; `cart_sub` keeps the listed dimensions of a grid.

use std::collections::{BTreeMap, BTreeSet};

use perfskel_grammar::ast::*;

use super::plan::{Plan, WORLD};
use crate::semantics::{cart_sub_color, eval_int, Env, EvalError, Shape};

/// One instance of a declared communicator (a `split` makes one per color).
pub(crate) struct Inst {
    pub name: String,
    /// Which declaration made it (`world` is 0): a rank is a member of at most one
    /// instance of each.
    pub decl: usize,
    /// World ranks, in the order of their rank in the instance.
    pub members: Vec<u64>,
    pub shape: Shape,
    /// Index of its rank 0 in per-rank tables of every instance (matching queues).
    pub base: usize,
}

/// Membership table entry of a rank that is not a member: (instance, rank) packed.
const NOT_MEMBER: u64 = u64::MAX;

/// Every instance and who belongs to which.
pub(crate) struct Comms {
    pub insts: Vec<Inst>,
    /// Per plan communicator id, per world rank: instance in the high and rank in it in
    /// the low 32 bits, or `NOT_MEMBER`; `id * n + rank`.
    member_of: Vec<u64>,
    n: usize,
    /// The sum of the instances' sizes: the length of per-rank tables over all of them.
    pub slots: usize,
    /// How many declarations there are, `world` included (for per-declaration
    /// counters indexed by [`Inst::decl`]).
    pub decls: usize,
}

/// A future member of a new communicator: (key, rank in the parent, world rank).
type Member = (i64, u64, u64);

/// Per world rank of one communicator name: its instance and its rank there.
type Members = Vec<Option<(usize, u64)>>;

/// Why the communicators could not be created: an expression that fails on a rank, or
/// a parent no declaration before names (only in programs that failed the static pass).
pub(crate) enum CommError {
    Eval(u64, EvalError),
    UnknownParent,
}

impl Comms {
    /// The groups of every declaration of `program` (lowered to `plan`), on `n` ranks
    /// whose environments are `envs`, the world shaped `world`.
    pub fn create(
        program: &Program,
        plan: &Plan,
        world: &Shape,
        envs: &[Env],
    ) -> Result<Comms, CommError> {
        let n = envs.len() as u64;
        let mut insts = vec![Inst {
            name: "world".into(),
            decl: 0,
            members: (0..n).collect(),
            shape: world.clone(),
            base: 0,
        }];
        let id_of = |name: &str| plan.comm_names.iter().position(|&c| c == name);
        let mut membership: Vec<Option<Members>> = vec![None; plan.comm_names.len()];
        membership[WORLD] = Some((0..n).map(|r| Some((0, r))).collect());
        let decls: Vec<&CommDecl> = program
            .body
            .stmts
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::CommDecl(decl) => Some(&**decl),
                _ => None,
            })
            .collect();
        for (ordinal, decl) in decls.iter().enumerate() {
            let Some(parent) =
                id_of(decl.def.parent().name.as_str()).and_then(|id| membership[id].clone())
            else {
                return Err(CommError::UnknownParent);
            };
            // (parent instance, color) → members as (key, rank in parent, world rank).
            let mut groups: BTreeMap<(usize, i64), Vec<Member>> = BTreeMap::new();
            for rank in 0..n {
                let Some((pinst, prank)) = parent[rank as usize] else {
                    continue;
                };
                let env = &envs[rank as usize];
                let default_key = i64::try_from(prank).unwrap_or(i64::MAX);
                let (color, key) = match &decl.def {
                    CommDef::Split { color, key, .. } => {
                        let color = eval_int(color, env).map_err(|e| CommError::Eval(rank, e))?;
                        let key = match key {
                            Some(k) => eval_int(k, env).map_err(|e| CommError::Eval(rank, e))?,
                            None => default_key,
                        };
                        (color, key)
                    }
                    CommDef::Dup { .. } => (0, default_key),
                    CommDef::CartSub { keep, .. } => {
                        let coords = insts[pinst].shape.coords(prank);
                        let keep: Vec<u32> = keep.iter().map(|k| k.value).collect();
                        (cart_sub_color(&coords, &keep), default_key)
                    }
                };
                if color >= 0 {
                    groups
                        .entry((pinst, color))
                        .or_default()
                        .push((key, prank, rank));
                }
            }
            let mut member_of = vec![None; n as usize];
            for ((pinst, _), mut members) in groups {
                members.sort_unstable();
                let shape = derived_shape(&decl.def, &insts[pinst].shape);
                let inst = insts.len();
                for (i, &(_, _, world)) in members.iter().enumerate() {
                    member_of[world as usize] = Some((inst, i as u64));
                }
                insts.push(Inst {
                    name: decl.name.name.clone(),
                    decl: ordinal + 1,
                    members: members.iter().map(|&(_, _, w)| w).collect(),
                    shape,
                    base: 0,
                });
            }
            if let Some(id) = id_of(&decl.name.name) {
                membership[id] = Some(member_of);
            }
        }
        let mut slots = 0;
        for inst in &mut insts {
            inst.base = slots;
            slots += inst.members.len();
        }
        let n = n as usize;
        let mut flat = vec![NOT_MEMBER; membership.len() * n];
        for (id, members) in membership.iter().enumerate() {
            for (rank, m) in members.iter().flatten().enumerate() {
                if let Some((inst, me)) = *m {
                    flat[id * n + rank] = ((inst as u64) << 32) | me;
                }
            }
        }
        Ok(Comms {
            insts,
            member_of: flat,
            n,
            slots,
            decls: decls.len() + 1,
        })
    }

    /// The instance of communicator `comm` (a plan id) that `rank` belongs to and its
    /// rank there; `None` when it is not a member.
    #[inline]
    pub fn membership(&self, rank: u32, comm: Option<usize>) -> Option<(u32, u32)> {
        let entry = comm.map_or(NOT_MEMBER, |c| self.member_of[c * self.n + rank as usize]);
        (entry != NOT_MEMBER).then_some(((entry >> 32) as u32, entry as u32))
    }
}

/// The shape of a communicator `def` makes of a parent shaped `parent`: a `split` has
/// none, a `dup` its parent's, a `cart_sub` the kept dimensions of a grid.
fn derived_shape(def: &CommDef, parent: &Shape) -> Shape {
    match def {
        CommDef::Split { .. } => Shape::Unstructured,
        CommDef::Dup { .. } => parent.clone(),
        CommDef::CartSub { keep, .. } => match parent {
            Shape::Grid { dims, periodic } => {
                let kept: BTreeSet<usize> = keep.iter().map(|k| k.value as usize).collect();
                Shape::Grid {
                    dims: kept.iter().filter_map(|&k| dims.get(k).copied()).collect(),
                    periodic: kept
                        .iter()
                        .filter_map(|&k| periodic.get(k).copied())
                        .collect(),
                }
            }
            _ => Shape::Unstructured,
        },
    }
}
