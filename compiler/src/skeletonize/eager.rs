//! Sends that relied on MPI's eager buffering: takes a skeleton's text and the
//! diagnostics `check` gave it, gives the text with every blocking `send` that a
//! deadlock names turned into an `isend` completed at the end of its block.
//!
//! An application may send a small message with `MPI_Send` and go on to a call that
//! needs its receiver (a broadcast, say) before the receiver posts the receive: every
//! MPI library buffers small messages (the eager protocol), so the send returns at once
//! and the program runs, although the standard calls it unsafe. The skeleton makes the
//! same calls in the same order, and `check`, which holds a standard-mode send until it
//! is received, reports the deadlock the standard allows. Such a send is written as
//! what the library did with it: `req eN = isend ...` where it was, and `wait eN` at the
//! end of the loop body or program it is in, so the rank goes on at once and completes
//! the send later, as the buffered send completed. A send inside `if` branches whose
//! conditions read only the rank is completed there under the same conditions
//! (`if rank == 0 { wait e0 }`: the checker decides such conditions per rank); a branch
//! whose condition reads a loop variable completes it at its own end. The CLI keeps a
//! rewrite only when it leaves fewer errors.

use perfskel_grammar::ast::{
    BinOp, Block, Else, Expr, ExprKind, Ident, If, P2pOp, Span, Stmt, StmtKind, UnaryOp, Wait,
    WaitOp,
};
use perfskel_grammar::Diag;

use super::comms::bin;
use crate::semantics::{reads_vars, visit};

/// The text with the blocking sends that `diags`' deadlocks name written as `isend` +
/// `wait` at the end of their block, and how many; `None` when no deadlock names one.
pub fn unblock_sends(source: &str, diags: &[Diag]) -> Option<(String, usize)> {
    let spans: Vec<Span> = diags
        .iter()
        .filter(|d| d.code == "deadlock")
        .flat_map(|d| d.primary.iter().chain(&d.secondary))
        .map(|l| l.span)
        .collect();
    if spans.is_empty() {
        return None;
    }
    let (mut program, parse_diags) = perfskel_grammar::parse(source);
    if parse_diags.iter().any(Diag::is_error) {
        return None;
    }
    let mut names = Names {
        source,
        next: 0,
        made: 0,
        sites: Vec::new(),
    };
    // A call site whose send relied on buffering once did so wherever the program
    // makes it (a token passed round a ring: every rank's send, one deadlock at a time).
    named_sites(&program.body, &spans, &mut names.sites);
    rewrite(&mut program.body, &spans, &mut names, Level::Keeps);
    (names.made > 0).then(|| (perfskel_grammar::printer::print(&program), names.made))
}

/// Fresh request names: `e0`, `e1`, ... that appear nowhere in the source.
struct Names<'a> {
    source: &'a str,
    next: usize,
    made: usize,
    /// Call sites of the named sends.
    sites: Vec<String>,
}

/// The call sites of the blocking sends at `spans`.
fn named_sites(block: &Block, spans: &[Span], out: &mut Vec<String>) {
    visit(block, &mut |stmt| match &stmt.kind {
        StmtKind::P2p(p)
            if p.op == P2pOp::Send
                && p.request.is_none()
                && stmt.pos.span().is_some_and(|s| spans.contains(&s)) =>
        {
            out.extend(stmt.site.as_ref().map(|s| s.text.clone()));
        }
        _ => {}
    });
}

impl Names<'_> {
    fn fresh(&mut self) -> String {
        loop {
            let name = format!("e{}", self.next);
            self.next += 1;
            let used = self.source.match_indices(&name).any(|(at, _)| {
                let before = self.source[..at].chars().next_back();
                let after = self.source[at + name.len()..].chars().next();
                let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                !word(before) && !word(after)
            });
            if !used {
                self.made += 1;
                return name;
            }
        }
    }
}

/// Where a block sits: the program or a loop body keep the waits of the sends in them;
/// an `if` branch whose condition reads only the rank (its value is the rank's for the
/// whole run) hands them to the block around it, under that condition.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    Keeps,
    RankBranch,
}

/// Rewrites the named sends of `block` and of the blocks in it; gives the waits that
/// belong to the block around it, each under the conditions of the branches it came out
/// of (outermost first).
fn rewrite(
    block: &mut Block,
    spans: &[Span],
    names: &mut Names<'_>,
    level: Level,
) -> Vec<(Vec<Expr>, Stmt)> {
    let mut waits: Vec<(Vec<Expr>, Stmt)> = Vec::new();
    for stmt in &mut block.stmts {
        let named = stmt.pos.span().is_some_and(|s| spans.contains(&s))
            || stmt
                .site
                .as_ref()
                .is_some_and(|s| names.sites.contains(&s.text));
        match &mut stmt.kind {
            StmtKind::P2p(p) if named && p.op == P2pOp::Send && p.request.is_none() => {
                let name = names.fresh();
                p.op = P2pOp::Isend;
                p.request = Some(Ident::new(name.clone()));
                stmt.trivia.trailing = Some(
                    "# MPI_Send in the application, buffered by MPI (eager) before its receiver posted the receive: completed at the end of the loop iteration (or program) it is in".into(),
                );
                let mut wait = Stmt::new(StmtKind::Wait(Wait {
                    op: WaitOp::Wait,
                    handles: vec![Ident::new(name)],
                }));
                wait.site = stmt.site.clone();
                waits.push((Vec::new(), wait));
            }
            StmtKind::Loop(l) => {
                let inner = rewrite(&mut l.body, spans, names, Level::Keeps);
                debug_assert!(inner.is_empty());
            }
            StmtKind::If(i) => {
                // Each branch's condition: its own and none of those before it. A
                // branch on the rank alone hands its waits out, under that condition.
                let mut before: Vec<Expr> = Vec::new();
                let mut take = |block: &mut Block, own: Expr, names: &mut Names<'_>| {
                    let hand = if reads_vars(&own, None) {
                        Level::Keeps
                    } else {
                        Level::RankBranch
                    };
                    for (mut conds, wait) in rewrite(block, spans, names, hand) {
                        conds.insert(0, own.clone());
                        waits.push((conds, wait));
                    }
                };
                let mut branch = Some(&mut **i);
                while let Some(b) = branch.take() {
                    let own = conjunction(&before, Some(&b.cond));
                    before.push(b.cond.clone());
                    take(&mut b.then_block, own, names);
                    match &mut b.else_branch {
                        Some(Else::Block(e)) => take(e, conjunction(&before, None), names),
                        Some(Else::If(next)) => branch = Some(&mut **next),
                        None => {}
                    }
                }
            }
            _ => {}
        }
    }
    if level == Level::RankBranch {
        return waits;
    }
    block
        .stmts
        .extend(waits.into_iter().map(|(conds, wait)| guarded(conds, wait)));
    Vec::new()
}

/// `wait` under every condition of `conds`, as one `if`.
fn guarded(conds: Vec<Expr>, wait: Stmt) -> Stmt {
    let Some(cond) = all(conds) else {
        return wait;
    };
    Stmt::new(StmtKind::If(Box::new(If {
        cond,
        then_block: Block {
            stmts: vec![wait],
            end_comments: Vec::new(),
        },
        else_branch: None,
    })))
}

/// `own and not b1 and not b2 ...` for the conditions `before` of the earlier branches
/// (`own` absent: an `else`).
fn conjunction(before: &[Expr], own: Option<&Expr>) -> Expr {
    let not = |e: &Expr| Expr::new(ExprKind::Unary(UnaryOp::Not, Box::new(e.clone())));
    all(own.cloned().into_iter().chain(before.iter().map(not)))
        .unwrap_or_else(|| Expr::new(ExprKind::Bool(true)))
}

/// `c1 and c2 and ...`, if any.
fn all(conds: impl IntoIterator<Item = Expr>) -> Option<Expr> {
    conds.into_iter().reduce(|a, b| bin(BinOp::And, a, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{check, Options};

    /// Every rank sends a small message to the next, broadcasts, and only then
    /// receives from the previous one. Every MPI runs it (the sends are buffered);
    /// `check` reports the deadlock the standard allows, and the rewritten skeleton
    /// checks clean.
    #[test]
    fn a_send_that_relied_on_buffering_completes_at_the_end_of_its_block() {
        let source = "skeleton eager\nranks 3\ntopology ring\napp_time 1 s\n\
                      loop 3 {\n    send next 8 B\n    bcast 8 B\n    recv prev 8 B\n}\n";
        let (program, diags) = perfskel_grammar::parse(source);
        assert!(diags.is_empty(), "{diags:?}");
        let checked = check(&program, source, Options::default());
        assert!(
            checked.diags.iter().any(|d| d.code == "deadlock"),
            "{:?}",
            checked.diags
        );
        let (text, n) = unblock_sends(source, &checked.diags).expect("rewritten");
        assert_eq!(n, 1);
        assert!(text.contains("req e0 = isend next 8 B"), "{text}");
        assert!(text.contains("wait e0"), "{text}");
        let (program, diags) = perfskel_grammar::parse(&text);
        assert!(diags.is_empty(), "{diags:?}");
        assert!(!text.contains(" send "), "{text}");
        let again = check(&program, &text, Options::default());
        assert!(again.diags.is_empty(), "{:?}\n{text}", again.diags);
        // Nothing to do without a deadlock.
        assert!(unblock_sends(&text, &again.diags).is_none());
    }

    /// A token handed round the ranks (HPCC's latency test): each rank in turn, in a
    /// branch of its own, sends the next one a 0-byte token and joins a broadcast the
    /// next one is already in; that one receives the token only after the broadcast.
    /// Every send of the call site is rewritten at once, each completed at the end of
    /// the program under its branch's condition, and the result checks clean.
    #[test]
    fn sends_in_rank_branches_complete_under_their_conditions() {
        let source = "skeleton token\nranks 3\ntopology ring\napp_time 1 s\n\
                      if rank == 0 {\n    send next 1 B @ \"t.c:9\"\n} else {\n    compute 1 ms\n}\n\
                      bcast 8 B\n\
                      if rank == 1 {\n    recv prev 1 B\n    send next 1 B @ \"t.c:9\"\n}\n\
                      bcast 8 B\n\
                      if rank == 2 {\n    recv prev 1 B\n    send next 1 B @ \"t.c:9\"\n}\n\
                      bcast 8 B\n\
                      if rank == 0 {\n    recv prev 1 B\n}\n";
        let (program, diags) = perfskel_grammar::parse(source);
        assert!(diags.is_empty(), "{diags:?}");
        let checked = check(&program, source, Options::default());
        assert!(
            checked.diags.iter().any(|d| d.code == "deadlock"),
            "{:?}",
            checked.diags
        );
        let (text, n) = unblock_sends(source, &checked.diags).expect("rewritten");
        assert_eq!(n, 3, "{text}");
        assert!(text.contains("if rank == 0 {\n    wait e0"), "{text}");
        assert!(text.contains("if rank == 1 {\n    wait e1"), "{text}");
        let (program, diags) = perfskel_grammar::parse(&text);
        assert!(diags.is_empty(), "{diags:?}");
        let again = check(&program, &text, Options::default());
        assert!(again.diags.is_empty(), "{:?}\n{text}", again.diags);
    }
}
