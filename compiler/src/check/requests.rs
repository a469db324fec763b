//! The lifecycle of request handles, checked on the program text: a handle is posted by
//! `req NAME = ...` and completed by `wait`, `waitall` or `waitany`. Flow-sensitive over
//! loops (the body is walked twice, so an iteration sees what the previous one left)
//! and branches (states are joined).

use std::collections::{BTreeMap, BTreeSet};

use perfskel_grammar::ast::*;
use perfskel_grammar::Diag;

use super::statics::closest;

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

type States = BTreeMap<String, State>;

pub(super) fn check(program: &Program, diags: &mut Vec<Diag>) {
    let mut declared = BTreeSet::new();
    collect_declared(&program.body, &mut declared);
    let mut walk = Walk {
        declared,
        used: BTreeSet::new(),
        reported: BTreeSet::new(),
        diags,
    };
    let mut states = States::new();
    walk.block(&program.body, &mut states);
    for (name, state) in &states {
        match state {
            State::Pending(pos) => {
                let message = if walk.used.contains(name) {
                    format!("request `{name}` is not completed by the end of the program")
                } else {
                    format!("request `{name}` is never waited for")
                };
                walk.report(
                    Diag::error("request-never-completed", message)
                        .at(*pos, "posted here")
                        .with_note(format!(
                            "hint: complete it with `wait {name}` (or `waitall`)"
                        )),
                );
            }
            State::Maybe(pos) => walk.report(
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

fn collect_declared(block: &Block, out: &mut BTreeSet<String>) {
    for stmt in &block.stmts {
        match &stmt.kind {
            StmtKind::P2p(P2p {
                request: Some(r), ..
            })
            | StmtKind::Collective(Collective {
                request: Some(r), ..
            }) => {
                out.insert(r.name.clone());
            }
            StmtKind::Loop(l) => collect_declared(&l.body, out),
            StmtKind::If(i) => {
                let mut current = i;
                loop {
                    collect_declared(&current.then_block, out);
                    match &current.else_branch {
                        None => break,
                        Some(Else::Block(b)) => {
                            collect_declared(b, out);
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

struct Walk<'d> {
    declared: BTreeSet<String>,
    used: BTreeSet<String>,
    /// (code, start of primary span) of reported problems: a loop body is walked twice
    /// and must not report the same problem twice.
    reported: BTreeSet<(&'static str, u32, String)>,
    diags: &'d mut Vec<Diag>,
}

impl Walk<'_> {
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

    fn block(&mut self, block: &Block, states: &mut States) {
        for stmt in &block.stmts {
            self.stmt(stmt, states);
        }
    }

    fn stmt(&mut self, stmt: &Stmt, states: &mut States) {
        match &stmt.kind {
            StmtKind::P2p(P2p {
                request: Some(r), ..
            })
            | StmtKind::Collective(Collective {
                request: Some(r), ..
            }) => self.post(r, stmt.pos, states),
            StmtKind::Wait(w) => self.wait(w, stmt.pos, states),
            StmtKind::Loop(l) => {
                // Two passes: the second starts from what one iteration leaves behind.
                let once = is_constant_one(&l.count);
                self.block(&l.body, states);
                if !once {
                    self.block(&l.body, states);
                }
            }
            StmtKind::If(i) => {
                let mut branches = Vec::new();
                let mut current = i;
                let mut has_else = false;
                loop {
                    let mut s = states.clone();
                    self.block(&current.then_block, &mut s);
                    branches.push(s);
                    match &current.else_branch {
                        None => break,
                        Some(Else::Block(b)) => {
                            let mut s = states.clone();
                            self.block(b, &mut s);
                            branches.push(s);
                            has_else = true;
                            break;
                        }
                        Some(Else::If(next)) => current = next,
                    }
                }
                if !has_else {
                    branches.push(states.clone());
                }
                *states = join(&branches);
            }
            _ => {}
        }
    }

    fn post(&mut self, handle: &Ident, pos: Pos, states: &mut States) {
        match states.get(&handle.name) {
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
        states.insert(handle.name.clone(), State::Pending(pos));
    }

    fn wait(&mut self, wait: &Wait, pos: Pos, states: &mut States) {
        let mut seen = BTreeSet::new();
        for handle in &wait.handles {
            if !seen.insert(handle.name.as_str()) {
                self.report(
                    Diag::error(
                        "request-twice",
                        format!("request `{}` is listed twice", handle.name),
                    )
                    .at(handle.pos, "again"),
                );
                continue;
            }
            self.used.insert(handle.name.clone());
            let state = states.get(&handle.name).copied();
            match state {
                None if !self.declared.contains(&handle.name) => {
                    let names: Vec<&str> = self.declared.iter().map(String::as_str).collect();
                    let mut diag = Diag::error(
                        "undefined-request",
                        format!("request `{}` is never posted", handle.name),
                    )
                    .at(handle.pos, "unknown request");
                    if let Some(best) = closest(&handle.name, &names) {
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
                        states.insert(handle.name.clone(), State::Done(pos));
                    }
                    WaitOp::Waitany => {
                        states.insert(handle.name.clone(), State::AnyWaited(posted));
                    }
                    WaitOp::Test => {}
                },
                Some(State::AnyWaited(_)) => {
                    if wait.op != WaitOp::Test && wait.op != WaitOp::Waitany {
                        states.insert(handle.name.clone(), State::Done(pos));
                    }
                }
                Some(State::Done(_)) => {}
            }
        }
    }
}

fn join(branches: &[States]) -> States {
    let mut names = BTreeSet::new();
    for b in branches {
        names.extend(b.keys().cloned());
    }
    let mut out = States::new();
    for name in names {
        let states: Vec<Option<State>> = branches.iter().map(|b| b.get(&name).copied()).collect();
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
        out.insert(name, joined);
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

fn is_constant_one(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Int(1))
}
