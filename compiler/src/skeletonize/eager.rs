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
//! end of the block it is in (the loop body, the branch, or the program), so the rank
//! goes on at once and completes the send later, as the buffered send completed. A send
//! inside an `if` branch is completed at the end of that branch, which helps only when
//! what the receiver waits for lies in the branch too (the CLI keeps a rewrite only when
//! it leaves fewer errors).

use perfskel_grammar::ast::{Block, Else, Ident, P2pOp, Span, Stmt, StmtKind, Wait, WaitOp};
use perfskel_grammar::Diag;

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
    };
    rewrite(&mut program.body, &spans, &mut names);
    (names.made > 0).then(|| (perfskel_grammar::printer::print(&program), names.made))
}

/// Fresh request names: `e0`, `e1`, ... that appear nowhere in the source.
struct Names<'a> {
    source: &'a str,
    next: usize,
    made: usize,
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

fn rewrite(block: &mut Block, spans: &[Span], names: &mut Names<'_>) {
    let mut waits = Vec::new();
    for stmt in &mut block.stmts {
        let named = stmt.pos.span().is_some_and(|s| spans.contains(&s));
        match &mut stmt.kind {
            StmtKind::P2p(p) if named && p.op == P2pOp::Send && p.request.is_none() => {
                let name = names.fresh();
                p.op = P2pOp::Isend;
                p.request = Some(Ident::new(name.clone()));
                stmt.trivia.trailing = Some(
                    "# MPI_Send in the application, buffered by MPI (eager) before its receiver posted the receive: completed at the end of this block".into(),
                );
                let mut wait = Stmt::new(StmtKind::Wait(Wait {
                    op: WaitOp::Wait,
                    handles: vec![Ident::new(name)],
                }));
                wait.site = stmt.site.clone();
                waits.push(wait);
            }
            StmtKind::Loop(l) => rewrite(&mut l.body, spans, names),
            StmtKind::If(i) => {
                let mut branch = Some(&mut **i);
                while let Some(b) = branch.take() {
                    rewrite(&mut b.then_block, spans, names);
                    match &mut b.else_branch {
                        Some(Else::Block(e)) => rewrite(e, spans, names),
                        Some(Else::If(next)) => branch = Some(&mut **next),
                        None => {}
                    }
                }
            }
            _ => {}
        }
    }
    block.stmts.extend(waits);
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
}
