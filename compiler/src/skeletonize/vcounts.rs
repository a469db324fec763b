//! Vector collectives whose ranks meet at different statements, made to agree.
//!
//! Where ranks take different paths through the same collectives (LAMMPS's SHAKE set-up
//! runs its rendezvous once more on some ranks, through other call sites), the merge
//! writes their streams apart, and a rank's `alltoallv` can meet another rank's
//! `alltoallv` from another statement. Each statement's `per_rank` table holds what
//! the ranks contributed there, so the tables of two statements that meet disagree: a
//! receiver expects from a member the member's entry of its own statement, the member
//! sends the entry of its statement, and MPI fails (`MPI_ERR_TRUNCATE`). `check`
//! reports each such pair (`vector-counts`); here the statements of every group that
//! meets get one table, each rank's entry the mean of its entries in the group's
//! statements, so every meeting agrees and each rank's volume over the group is kept.

use std::collections::BTreeMap;

use perfskel_grammar::ast::{Block, Size, SizeSpec, Span, Spanned, StmtKind};
use perfskel_grammar::Diag;

/// The source with the tables of the statements `vector-counts` diagnostics pair made
/// one per group, and how many statements changed; `None` when there is none to change.
pub fn unify_vector_counts(source: &str, diags: &[Diag]) -> Option<(String, usize)> {
    let pairs: Vec<(Span, Span)> = diags
        .iter()
        .filter(|d| d.code == "vector-counts")
        .filter_map(|d| Some((d.primary.as_ref()?.span, d.secondary.first()?.span)))
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let (mut program, parse_diags) = perfskel_grammar::parse(source);
    if parse_diags.iter().any(Diag::is_error) {
        return None;
    }
    // Groups of statements (by the start of their span) that meet, by union-find.
    let mut parent: BTreeMap<usize, usize> = BTreeMap::new();
    fn root(parent: &mut BTreeMap<usize, usize>, x: usize) -> usize {
        let mut r = x;
        while let Some(&p) = parent.get(&r) {
            if p == r {
                break;
            }
            r = p;
        }
        parent.insert(x, r);
        r
    }
    for (a, b) in &pairs {
        parent.entry(a.start as usize).or_insert(a.start as usize);
        parent.entry(b.start as usize).or_insert(b.start as usize);
        let (ra, rb) = (
            root(&mut parent, a.start as usize),
            root(&mut parent, b.start as usize),
        );
        if ra != rb {
            parent.insert(ra.max(rb), ra.min(rb));
        }
    }
    // Statements with one table already are one group (an earlier round joined them:
    // they still meet, though `check` no longer reports them).
    let mut by_table: BTreeMap<Vec<u64>, Vec<usize>> = BTreeMap::new();
    each_table(&mut program.body, &mut |start, values| {
        let bytes = values
            .iter()
            .map(|v| v.value.bytes().unwrap_or(0))
            .collect();
        by_table.entry(bytes).or_default().push(start);
    });
    for starts in by_table.values() {
        if let Some(&joined) = starts.iter().find(|s| parent.contains_key(s)) {
            for &s in starts {
                parent.entry(s).or_insert(s);
                let (ra, rb) = (root(&mut parent, joined), root(&mut parent, s));
                if ra != rb {
                    parent.insert(ra.max(rb), ra.min(rb));
                }
            }
        }
    }
    // Each group's tables, entry by entry.
    let mut tables: BTreeMap<usize, Vec<Vec<u64>>> = BTreeMap::new();
    each_table(&mut program.body, &mut |start, values| {
        if parent.contains_key(&start) {
            let r = root(&mut parent, start);
            let bytes = values
                .iter()
                .map(|v| v.value.bytes().unwrap_or(0))
                .collect();
            tables.entry(r).or_default().push(bytes);
        }
    });
    let means: BTreeMap<usize, Vec<u64>> = tables
        .into_iter()
        .filter_map(|(r, group)| {
            let n = group.iter().map(Vec::len).min()?;
            let mean = (0..n)
                .map(|i| {
                    let sum: u64 = group.iter().map(|t| t[i]).sum();
                    sum.div_ceil(group.len() as u64)
                })
                .collect();
            Some((r, mean))
        })
        .collect();
    let mut changed = 0;
    each_table(&mut program.body, &mut |start, values| {
        if !parent.contains_key(&start) {
            return;
        }
        let r = root(&mut parent, start);
        let Some(mean) = means.get(&r) else {
            return;
        };
        let new: Vec<Spanned<Size>> = mean
            .iter()
            .map(|&b| Spanned::derived(Size::bytes_exact(b)))
            .collect();
        let same = values.len() == new.len()
            && values
                .iter()
                .zip(&new)
                .all(|(a, b)| a.value.bytes() == b.value.bytes());
        if !same {
            *values = new;
            changed += 1;
        }
    });
    (changed > 0).then(|| (perfskel_grammar::printer::print(&program), changed))
}

/// Calls `f` with the span start and the `per_rank` table of every vector collective.
fn each_table(block: &mut Block, f: &mut dyn FnMut(usize, &mut Vec<Spanned<Size>>)) {
    for stmt in &mut block.stmts {
        let start = stmt.pos.span().map(|s| s.start as usize);
        match &mut stmt.kind {
            StmtKind::Collective(c) if c.op.is_vector() => {
                if let (Some(start), Some(SizeSpec::PerRank(values))) = (start, &mut c.size) {
                    f(start, values);
                }
            }
            StmtKind::Loop(l) => each_table(&mut l.body, f),
            StmtKind::If(i) => {
                each_table(&mut i.then_block, f);
                let mut next = &mut i.else_branch;
                while let Some(e) = next {
                    match e {
                        perfskel_grammar::ast::Else::Block(b) => {
                            each_table(b, f);
                            break;
                        }
                        perfskel_grammar::ast::Else::If(inner) => {
                            each_table(&mut inner.then_block, f);
                            next = &mut inner.else_branch;
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diags(source: &str) -> Vec<Diag> {
        let (program, parse) = perfskel_grammar::parse(source);
        assert!(parse.is_empty(), "{parse:#?}");
        crate::check::check(&program, source, crate::check::Options::default()).diags
    }

    #[test]
    fn statements_that_meet_get_one_table_each_ranks_entry_the_mean() {
        // Ranks 0-1 run the exchange twice in a loop where ranks 2-3 run it once and
        // then from another statement (a merge that wrote their streams apart).
        let source = "skeleton t\nranks 4\ntopology ring\napp_time 1 s\n\
            if rank < 2 {\n    loop 2 {\n        alltoallv per_rank(10 B, 20 B, 30 B, 40 B)\n    }\n} else {\n    \
            alltoallv per_rank(10 B, 20 B, 30 B, 40 B)\n    alltoallv per_rank(12 B, 22 B, 34 B, 44 B)\n}\n\
            alltoallv per_rank(1 B, 2 B, 3 B, 4 B)\n";
        let before = diags(source);
        assert!(
            before.iter().any(|d| d.code == "vector-counts"),
            "{before:#?}"
        );
        let (text, changed) = unify_vector_counts(source, &before).expect("a change");
        assert_eq!(changed, 3, "{text}");
        assert!(diags(&text).is_empty(), "{text}");
        // The mean of the three statements' entries, rounded up; the statement no
        // other met keeps its table.
        assert_eq!(
            text.matches("per_rank(11 B, 21 B, 32 B, 42 B)").count(),
            3,
            "{text}"
        );
        assert!(
            text.contains("alltoallv per_rank(1 B, 2 B, 3 B, 4 B)"),
            "{text}"
        );
        // Nothing to do on a clean program.
        assert!(unify_vector_counts(&text, &diags(&text)).is_none());
    }
}
