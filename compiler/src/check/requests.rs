//! The lifecycle of request handles, checked on the program text: a handle is posted by
//! `req NAME = ...` and completed by `wait`, `waitall` or `waitany`. Flow-sensitive over
//! loops (the body is walked twice, so an iteration sees what the previous one left)
//! and branches (states are joined).
//!
//! A condition that reads only the rank (`rank`, `nranks`, `coord(i)`: no loop variable)
//! has one value per rank for the whole run, so the program is walked once per group of
//! ranks that decide every such condition alike (up to [`MAX_GROUPS`]; past that, once
//! with every branch joined): a request posted under `if rank == 0` and completed under a
//! later `if rank == 0` is complete on every path a rank can take.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;

use perfskel_grammar::ast::*;
use perfskel_grammar::Diag;

use super::statics::closest;
use crate::semantics::{eval_bool, reads_vars, visit, Env, Shape};

/// Groups of ranks walked apart at most; a program whose rank conditions split the ranks
/// into more groups is walked once, with every branch joined.
const MAX_GROUPS: usize = 64;

/// The value of each rank-only condition (by address) for one group of ranks.
type Decided = HashMap<usize, bool>;

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    /// Posted at `Pos`, not completed.
    Pending(Pos),
    /// Completed at `Pos`.
    Done(Pos),
    /// Pending on some paths, completed (or never posted) on others; posted at `Pos`.
    Maybe(Pos),
    /// Listed in a `waitany`, which completes one request of its list: completed or not,
    /// depending on the others (the simulation knows which).
    AnyWaited(Pos),
}

/// The state of every handle name, indexed by [`Names`] id; `None` before it is posted.
type States = Vec<Option<State>>;

/// Handle names (posted or waited for) and their ids.
#[derive(Default)]
struct Names<'p> {
    ids: HashMap<&'p str, usize>,
    names: Vec<&'p str>,
    declared: Vec<bool>,
}

impl<'p> Names<'p> {
    fn id(&mut self, name: &'p str) -> usize {
        // Programs use a handful of names: comparing them is cheaper than hashing.
        if self.names.len() <= 16 {
            if let Some(i) = self.names.iter().position(|&n| n == name) {
                return i;
            }
        }
        let next = self.names.len();
        let id = *self.ids.entry(name).or_insert(next);
        if id == next {
            self.names.push(name);
            self.declared.push(false);
        }
        id
    }
}

/// The most operations a `window` keeps in flight: each is an MPI request (and, in the
/// Rust runtime, a receive buffer) per rank.
pub const MAX_WINDOW: u64 = 1 << 16;

pub(super) fn check(program: &Program, diags: &mut Vec<Diag>) {
    let mut names = Names::default();
    collect_names(&program.body, &mut names);
    check_windows(&program.body, diags);
    let mut declared: Vec<&str> = (0..names.names.len())
        .filter(|&i| names.declared[i])
        .map(|i| names.names[i])
        .collect();
    declared.sort_unstable();
    let n = names.names.len();
    let mut walk = Walk {
        names,
        declared,
        used: vec![false; n],
        reported: BTreeSet::new(),
        decided: Decided::default(),
        diags,
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_unstable_by_key(|&i| walk.names.names[i]);
    for decided in rank_groups(program) {
        walk.decided = decided;
        let mut states: States = vec![None; n];
        walk.block(&program.body, &mut states);
        walk.finish(&states, &order);
    }
}

/// For each group of ranks that decide the program's rank-only `if` conditions alike,
/// those decisions; one empty set (nothing decided) when there are none, or too many
/// groups.
fn rank_groups(program: &Program) -> Vec<Decided> {
    let mut conds = Vec::new();
    rank_conditions(&program.body, &mut conds);
    let n = program.ranks.value;
    if conds.is_empty() || n == 0 || n > 1 << 20 {
        return vec![Decided::default()];
    }
    let shape = Shape::of_topology(&program.topology.value, n);
    let mut seen: BTreeSet<Vec<Option<bool>>> = BTreeSet::new();
    let mut groups = Vec::new();
    for rank in 0..n {
        let env = Env {
            rank,
            n_ranks: n,
            coords: shape.coords(rank),
        };
        let values: Vec<Option<bool>> = conds.iter().map(|c| eval_bool(c, &env).ok()).collect();
        if seen.insert(values.clone()) {
            if groups.len() == MAX_GROUPS {
                return vec![Decided::default()];
            }
            groups.push(values);
        }
    }
    groups
        .into_iter()
        .map(|values| {
            conds
                .iter()
                .zip(values)
                .filter_map(|(c, v)| Some((std::ptr::from_ref(*c) as usize, v?)))
                .collect()
        })
        .collect()
}

/// The conditions of `if`s that touch requests and read no loop variable.
fn rank_conditions<'p>(block: &'p Block, out: &mut Vec<&'p Expr>) {
    visit(block, &mut |stmt| {
        let StmtKind::If(i) = &stmt.kind else {
            return;
        };
        if !if_touches_requests(i) {
            return;
        }
        let mut current = Some(&**i);
        while let Some(c) = current {
            if !reads_vars(&c.cond, None) {
                out.push(&c.cond);
            }
            current = match &c.else_branch {
                Some(Else::If(next)) => Some(next),
                _ => None,
            };
        }
    });
}

/// Windows (`req h = isend ... window W`): W between 1 and [`MAX_WINDOW`]; a windowed
/// handle posted only by statements with the same window, and completed by `wait` or
/// `waitall` (which complete every operation in flight), not `waitany` or `test`.
fn check_windows(body: &Block, diags: &mut Vec<Diag>) {
    // Each handle name: its first post's window (or none), and where.
    let mut posts: HashMap<&str, (Option<u64>, Pos)> = HashMap::default();
    let mut waits: Vec<(&Ident, WaitOp)> = Vec::new();
    visit(body, &mut |stmt| {
        if let StmtKind::Wait(w) = &stmt.kind {
            waits.extend(w.handles.iter().map(|h| (h, w.op)));
        }
        let Some(r) = stmt.kind.request() else {
            return;
        };
        let window = match &stmt.kind {
            StmtKind::P2p(p) => p.window,
            _ => None,
        };
        if let Some(w) = window {
            if w.value == 0 || w.value > MAX_WINDOW {
                diags.push(
                    Diag::error(
                        "bad-window",
                        format!("a window of {} operations in flight", w.value),
                    )
                    .at(w.pos, "window")
                    .with_note(format!("a window holds 1 to {MAX_WINDOW} operations")),
                );
            }
        }
        let value = window.map(|w| w.value);
        match posts.get(r.name.as_str()) {
            None => {
                posts.insert(&r.name, (value, r.pos));
            }
            Some(&(first, at)) if first != value => {
                let what =
                    |w: Option<u64>| w.map_or("no window".to_string(), |w| format!("window {w}"));
                diags.push(
                    Diag::error(
                        "window-mismatch",
                        format!(
                            "request `{}` is posted with {} here and with {} before",
                            r.name,
                            what(value),
                            what(first)
                        ),
                    )
                    .at(r.pos, "posted here")
                    .with_secondary(at, "first posted here")
                    .with_note(
                        "every statement that posts a windowed request gives it the same window",
                    ),
                );
            }
            Some(_) => {}
        }
    });
    for (h, op) in waits {
        if !matches!(op, WaitOp::Waitany | WaitOp::Test) {
            continue;
        }
        if let Some((Some(_), at)) = posts.get(h.name.as_str()) {
            diags.push(
                Diag::error(
                    "window-waitany",
                    format!(
                        "request `{}` holds a window of operations: `{}` cannot complete one of them",
                        h.name,
                        if op == WaitOp::Test { "test" } else { "waitany" }
                    ),
                )
                .at(h.pos, "windowed request")
                .with_secondary(*at, "posted with a window here")
                .with_note(format!("complete them all with `wait {}`", h.name)),
            );
        }
    }
}

impl Walk<'_, '_> {
    /// Reports the requests `states` leaves pending at the end of the program.
    fn finish(&mut self, states: &States, order: &[usize]) {
        for &id in order {
            let Some(state) = &states[id] else {
                continue;
            };
            let name = self.names.names[id];
            match state {
                State::Pending(pos) => {
                    let message = if self.used[id] {
                        format!("request `{name}` is not completed by the end of the program")
                    } else {
                        format!("request `{name}` is never waited for")
                    };
                    self.report(
                        Diag::error("request-never-completed", message)
                            .at(*pos, "posted here")
                            .with_note(format!(
                                "hint: complete it with `wait {name}` (or `waitall`)"
                            )),
                    );
                }
                State::Maybe(pos) => self.report(
                    Diag::warning(
                        "request-maybe-pending",
                        format!("request `{name}` may still be pending at the end of the program"),
                    )
                    .at(*pos, "posted here")
                    .with_note("it is completed on some paths only"),
                ),
                State::Done(_) | State::AnyWaited(_) => {}
            }
        }
    }
}

/// Gives every handle name an id and marks the posted (declared) ones.
fn collect_names<'p>(block: &'p Block, out: &mut Names<'p>) {
    for stmt in &block.stmts {
        if let Some(r) = stmt.kind.request() {
            let id = out.id(&r.name);
            out.declared[id] = true;
        }
        match &stmt.kind {
            StmtKind::Wait(w) => {
                for h in &w.handles {
                    out.id(&h.name);
                }
            }
            StmtKind::Loop(l) => collect_names(&l.body, out),
            StmtKind::While(w) => collect_names(&w.body, out),
            StmtKind::If(i) => {
                let mut current = i;
                loop {
                    collect_names(&current.then_block, out);
                    match &current.else_branch {
                        None => break,
                        Some(Else::Block(b)) => {
                            collect_names(b, out);
                            break;
                        }
                        Some(Else::If(next)) => current = next,
                    }
                }
            }
            _ => {}
        }
    }
}

struct Walk<'p, 'd> {
    names: Names<'p>,
    /// Posted names, sorted (for hints).
    declared: Vec<&'p str>,
    used: Vec<bool>,
    /// (code, start of primary span) of reported problems: a loop body is walked twice
    /// and must not report the same problem twice.
    reported: BTreeSet<(&'static str, u32, String)>,
    /// The rank-only conditions decided for the group of ranks being walked.
    decided: Decided,
    diags: &'d mut Vec<Diag>,
}

impl<'p> Walk<'p, '_> {
    fn report(&mut self, diag: Diag) {
        let key = (
            diag.code,
            diag.primary.as_ref().map_or(0, |l| l.span.start),
            diag.message.clone(),
        );
        if self.reported.insert(key) {
            self.diags.push(diag);
        }
    }

    fn block(&mut self, block: &'p Block, states: &mut States) {
        for stmt in &block.stmts {
            self.stmt(stmt, states);
        }
    }

    fn stmt(&mut self, stmt: &'p Stmt, states: &mut States) {
        if let Some(r) = stmt.kind.request() {
            // A windowed handle holds several operations in flight: posting it while
            // pending is what it is for (`check_windows` keeps its posts alike).
            let windowed = matches!(&stmt.kind, StmtKind::P2p(p) if p.window.is_some());
            if windowed
                && matches!(
                    states[self.names.id(&r.name)],
                    Some(State::Pending(_) | State::Maybe(_))
                )
            {
                return;
            }
            self.post(r, stmt.pos, states);
            return;
        }
        match &stmt.kind {
            StmtKind::Wait(w) => self.wait(w, stmt.pos, states),
            // A block that neither posts nor completes a request leaves every state as
            // it found it and reports nothing: skip it (a join of equal states is the
            // identity).
            StmtKind::Loop(l) if !touches_requests(&l.body) => {}
            StmtKind::While(w) if !touches_requests(&w.body) => {}
            StmtKind::If(i) if !if_touches_requests(i) => {}
            StmtKind::While(w) => {
                // None, one or more iterations: the states before joined with those
                // after one and after two.
                let before = states.clone();
                self.block(&w.body, states);
                let once = states.clone();
                self.block(&w.body, states);
                *states = join(&[before, once, states.clone()]);
            }
            StmtKind::Loop(l) => {
                // Two passes: the second starts from what one iteration leaves behind.
                let once = is_constant_one(&l.count);
                self.block(&l.body, states);
                if !once {
                    self.block(&l.body, states);
                }
            }
            StmtKind::If(i) => {
                // The branches a rank of this group may take: one, when the conditions
                // before it are decided false and its own true.
                let mut taken: Vec<&'p Block> = Vec::new();
                let mut current = i;
                let mut falls_through = true;
                loop {
                    match self
                        .decided
                        .get(&(std::ptr::from_ref(&current.cond) as usize))
                    {
                        Some(false) => {}
                        Some(true) => {
                            taken.push(&current.then_block);
                            falls_through = false;
                            break;
                        }
                        None => taken.push(&current.then_block),
                    }
                    match &current.else_branch {
                        None => break,
                        Some(Else::Block(b)) => {
                            taken.push(b);
                            falls_through = false;
                            break;
                        }
                        Some(Else::If(next)) => current = next,
                    }
                }
                match (taken.as_slice(), falls_through) {
                    ([], true) => {}
                    ([only], false) => self.block(only, states),
                    _ => {
                        let mut branches: Vec<States> = taken
                            .iter()
                            .map(|b| {
                                let mut s = states.clone();
                                self.block(b, &mut s);
                                s
                            })
                            .collect();
                        if falls_through {
                            branches.push(states.clone());
                        }
                        *states = join(&branches);
                    }
                }
            }
            _ => {}
        }
    }

    fn post(&mut self, handle: &'p Ident, pos: Pos, states: &mut States) {
        let id = self.names.id(&handle.name);
        match &states[id] {
            Some(State::Pending(prev)) => {
                let prev = *prev;
                let again = prev.span() == pos.span();
                self.report(
                    Diag::error(
                        "request-overwritten",
                        format!(
                            "request `{}` is posted again while still pending",
                            handle.name
                        ),
                    )
                    .at(
                        handle.pos,
                        if again {
                            "posted again in the next iteration"
                        } else {
                            "posted again here"
                        },
                    )
                    .with_secondary(if again { Pos::Derived } else { prev }, "first posted here")
                    .with_note(format!(
                        "the earlier request is lost; complete it first with `wait {}`",
                        handle.name
                    )),
                );
            }
            Some(State::Maybe(prev)) => {
                let prev = *prev;
                self.report(
                    Diag::warning(
                        "request-overwritten",
                        format!(
                            "request `{}` may still be pending when it is posted again",
                            handle.name
                        ),
                    )
                    .at(handle.pos, "posted again here")
                    .with_secondary(prev, "posted here"),
                );
            }
            _ => {}
        }
        states[id] = Some(State::Pending(pos));
    }

    fn wait(&mut self, wait: &'p Wait, pos: Pos, states: &mut States) {
        let mut seen: smallvec::SmallVec<[usize; 8]> = smallvec::SmallVec::new();
        for handle in &wait.handles {
            let id = self.names.id(&handle.name);
            if seen.contains(&id) {
                self.report(
                    Diag::error(
                        "request-twice",
                        format!("request `{}` is listed twice", handle.name),
                    )
                    .at(handle.pos, "again"),
                );
                continue;
            }
            seen.push(id);
            self.used[id] = true;
            let state = states[id];
            match state {
                None if !self.names.declared[id] => {
                    let names = &self.declared;
                    let mut diag = Diag::error(
                        "undefined-request",
                        format!("request `{}` is never posted", handle.name),
                    )
                    .at(handle.pos, "unknown request");
                    if let Some(best) = closest(&handle.name, names) {
                        diag = diag.with_note(format!("hint: did you mean `{best}`?"));
                    }
                    self.report(diag);
                }
                None => self.report(
                    Diag::error(
                        "request-before-post",
                        format!("request `{}` is completed before it is posted", handle.name),
                    )
                    .at(handle.pos, "not posted yet"),
                ),
                Some(State::Done(done)) if wait.op != WaitOp::Test => {
                    self.report(
                        Diag::error(
                            "request-completed-twice",
                            format!("request `{}` is completed twice", handle.name),
                        )
                        .at(handle.pos, "completed again here")
                        .with_secondary(
                            if done.span() == pos.span() {
                                Pos::Derived
                            } else {
                                done
                            },
                            "already completed here",
                        ),
                    );
                }
                Some(State::Pending(posted) | State::Maybe(posted)) => match wait.op {
                    WaitOp::Wait | WaitOp::Waitall => {
                        states[id] = Some(State::Done(pos));
                    }
                    WaitOp::Waitany => {
                        states[id] = Some(State::AnyWaited(posted));
                    }
                    WaitOp::Test => {}
                },
                Some(State::AnyWaited(_)) => {
                    if wait.op != WaitOp::Test && wait.op != WaitOp::Waitany {
                        states[id] = Some(State::Done(pos));
                    }
                }
                Some(State::Done(_)) => {}
            }
        }
    }
}

fn join(branches: &[States]) -> States {
    let n = branches.first().map_or(0, Vec::len);
    let mut out = vec![None; n];
    for (id, slot) in out.iter_mut().enumerate() {
        let states: smallvec::SmallVec<[Option<State>; 4]> =
            branches.iter().map(|b| b[id]).collect();
        if states.iter().all(Option::is_none) {
            continue;
        }
        let posted = states.iter().find_map(|s| match s {
            Some(State::Pending(p) | State::Maybe(p)) => Some(*p),
            _ => None,
        });
        let all_same = states.windows(2).all(|w| same_kind(w[0], w[1]));
        let any_waited = states.iter().find_map(|s| match s {
            Some(State::AnyWaited(p)) => Some(*p),
            _ => None,
        });
        let pending = states
            .iter()
            .any(|s| matches!(s, Some(State::Pending(_) | State::Maybe(_))));
        let joined = match (all_same, states.first().copied().flatten(), posted) {
            (false, _, _) if any_waited.is_some() && !pending => {
                State::AnyWaited(any_waited.unwrap_or_default())
            }
            (true, Some(s), _) => s,
            (_, _, Some(p)) => State::Maybe(p),
            (_, _, None) => match states.iter().find_map(|s| *s) {
                Some(s) => s,
                None => continue,
            },
        };
        *slot = Some(joined);
    }
    out
}

fn same_kind(a: Option<State>, b: Option<State>) -> bool {
    matches!(
        (a, b),
        (None, None)
            | (Some(State::Pending(_)), Some(State::Pending(_)))
            | (Some(State::Done(_)), Some(State::Done(_)))
            | (Some(State::Maybe(_)), Some(State::Maybe(_)))
            | (Some(State::AnyWaited(_)), Some(State::AnyWaited(_)))
    )
}

/// Whether `block` posts or completes a request, directly or in a nested block.
fn touches_requests(block: &Block) -> bool {
    block.stmts.iter().any(|stmt| match &stmt.kind {
        StmtKind::P2p(_) | StmtKind::Collective(_) => stmt.kind.request().is_some(),
        StmtKind::Wait(_) => true,
        StmtKind::Loop(l) => touches_requests(&l.body),
        StmtKind::While(w) => touches_requests(&w.body),
        StmtKind::If(i) => if_touches_requests(i),
        StmtKind::Compute(_) | StmtKind::CommDecl(_) => false,
    })
}

/// Whether any branch of an `if` chain posts or completes a request.
fn if_touches_requests(i: &If) -> bool {
    let mut current = i;
    loop {
        if touches_requests(&current.then_block) {
            return true;
        }
        match &current.else_branch {
            None => return false,
            Some(Else::Block(b)) => return touches_requests(b),
            Some(Else::If(next)) => current = next,
        }
    }
}

fn is_constant_one(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Int(1))
}

#[cfg(test)]
mod tests {
    fn codes(source: &str) -> Vec<&'static str> {
        let (program, diags) = perfskel_grammar::parse(source);
        assert!(diags.is_empty(), "{diags:?}");
        let mut out = Vec::new();
        super::check(&program, &mut out);
        out.iter().map(|d| d.code).collect()
    }

    const HEAD: &str = "skeleton t\nranks 4\ntopology ring\napp_time 1 s\n";

    /// A request posted under a condition on the rank and completed under the same
    /// condition later is complete on every rank's path; under a condition on a loop
    /// variable the text alone cannot tell, and the checker says it may be pending.
    #[test]
    fn conditions_on_the_rank_are_decided_per_rank_and_loop_variables_are_not() {
        let by_rank = format!(
            "{HEAD}if rank == 0 {{\n req a = isend next 8 B\n}}\nif rank == 1 {{\n recv prev 8 B\n}}\n\
             if rank == 0 {{\n wait a\n}}\n"
        );
        assert_eq!(codes(&by_rank), Vec::<&str>::new());
        let mismatched = format!(
            "{HEAD}if rank == 0 {{\n req a = isend next 8 B\n}}\nif rank <= 1 {{\n wait a\n}}\n"
        );
        assert_eq!(codes(&mismatched), vec!["request-before-post"]);
        let by_step = format!(
            "{HEAD}loop 4 as i {{\n if i % 2 == 0 {{\n  req a = isend next 8 B\n }}\n\
             if i % 2 == 0 {{\n  wait a\n }}\n}}\n"
        );
        assert_eq!(
            codes(&by_step),
            vec!["request-overwritten", "request-maybe-pending"]
        );
    }
}
