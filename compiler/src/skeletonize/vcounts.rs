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
//! Collectives of one size on every rank meet the same way (Quantum ESPRESSO's BLACS
//! broadcasts, whose sizes follow the data): `check` reports a `collective-mismatch`
//! of size only, and the statements of each group that meets get the mean size.

use std::collections::BTreeMap;

use perfskel_grammar::ast::{Block, Size, SizeSpec, Spanned, StmtKind};
use perfskel_grammar::Diag;

use super::dims::each_stmt;

/// The source with the tables of the statements `vector-counts` diagnostics pair made
/// one per group, and how many statements changed; `None` when there is none to change.
pub fn unify_vector_counts(source: &str, diags: &[Diag]) -> Option<(String, usize)> {
    let (pairs, mut program) = paired(source, diags, "vector-counts")?;
    // Groups of statements (by the start of their span) that meet, by union-find.
    let mut parent: BTreeMap<usize, usize> = BTreeMap::new();
    for (a, b) in pairs {
        join(&mut parent, a, b);
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
                join(&mut parent, joined, s);
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

/// The statements (by the start of their span) that the diagnostics of `code` pair,
/// and the parsed program; `None` when there is no such pair or the source does not
/// parse.
fn paired(
    source: &str,
    diags: &[Diag],
    code: &str,
) -> Option<(Vec<(usize, usize)>, perfskel_grammar::ast::Program)> {
    let pairs: Vec<(usize, usize)> = diags
        .iter()
        .filter(|d| d.code == code)
        .filter_map(|d| {
            Some((
                d.primary.as_ref()?.span.start as usize,
                d.secondary.first()?.span.start as usize,
            ))
        })
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let (program, parse_diags) = perfskel_grammar::parse(source);
    if parse_diags.iter().any(Diag::is_error) {
        return None;
    }
    Some((pairs, program))
}

/// The root of `x`'s group (`x` itself where it has none yet).
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

/// Puts `a` and `b` in one group.
fn join(parent: &mut BTreeMap<usize, usize>, a: usize, b: usize) {
    let (ra, rb) = (root(parent, a), root(parent, b));
    if ra != rb {
        parent.insert(ra.max(rb), ra.min(rb));
    }
}

/// The same for collectives of one size on every rank (`bcast`, `allreduce`, ...):
/// where the merge wrote ranks' streams apart, a rank's call can meet another rank's
/// at a statement whose size, a mean over other calls of data-dependent sizes, differs
/// (Quantum ESPRESSO's BLACS broadcasts), which `check` reports as a
/// `collective-mismatch` of size only. The statements of each group that meets get
/// one size, the mean of theirs. Gives the source and how many statements changed.
pub fn unify_collective_sizes(source: &str, diags: &[Diag]) -> Option<(String, usize)> {
    let (pairs, mut program) = paired(source, diags, "collective-mismatch")?;
    // What must agree (operation, root, communicator, blocking) and the size, by
    // statement.
    let mut sizes: BTreeMap<usize, (String, u64)> = BTreeMap::new();
    each_sized(&mut program.body, &mut |start, head, size| {
        if let Some(b) = size.value.bytes() {
            sizes.insert(start, (head, b));
        }
    });
    let mut parent: BTreeMap<usize, usize> = BTreeMap::new();
    for (a, b) in pairs {
        match (sizes.get(&a), sizes.get(&b)) {
            (Some((ha, sa)), Some((hb, sb))) if ha == hb && sa != sb => join(&mut parent, a, b),
            _ => {}
        }
    }
    let mut groups: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for (&start, (_, b)) in &sizes {
        if parent.contains_key(&start) {
            let r = root(&mut parent, start);
            groups.entry(r).or_default().push(*b);
        }
    }
    let mut changed = 0;
    each_sized(&mut program.body, &mut |start, _, size| {
        if !parent.contains_key(&start) {
            return;
        }
        let r = root(&mut parent, start);
        let Some(group) = groups.get(&r) else {
            return;
        };
        let mean = group.iter().sum::<u64>().div_ceil(group.len() as u64);
        if size.value.bytes() != Some(mean) {
            *size = Spanned::derived(Size::bytes_exact(mean));
            changed += 1;
        }
    });
    (changed > 0).then(|| (perfskel_grammar::printer::print(&program), changed))
}

/// Calls `f` with the span start, what must agree (the statement without its size) and
/// the size of every collective with one size on every rank.
fn each_sized(block: &mut Block, f: &mut dyn FnMut(usize, String, &mut Spanned<Size>)) {
    each_stmt(&mut block.stmts, &mut |stmt| {
        let start = stmt.pos.span().map(|s| s.start as usize);
        let StmtKind::Collective(c) = &stmt.kind else {
            return;
        };
        if c.op.is_vector() || !matches!(c.size, Some(SizeSpec::Fixed(_))) {
            return;
        }
        // Printed without its size (positions aside).
        let mut bare = stmt.clone();
        if let StmtKind::Collective(c) = &mut bare.kind {
            c.size = None;
        }
        let head = perfskel_grammar::printer::stmt_head(&bare);
        if let (Some(start), StmtKind::Collective(c)) = (start, &mut stmt.kind) {
            if let Some(SizeSpec::Fixed(size)) = &mut c.size {
                f(start, head, size);
            }
        }
    });
}

/// Calls `f` with the span start and the `per_rank` table of every vector collective.
fn each_table(block: &mut Block, f: &mut dyn FnMut(usize, &mut Vec<Spanned<Size>>)) {
    each_stmt(&mut block.stmts, &mut |stmt| {
        let start = stmt.pos.span().map(|s| s.start as usize);
        if let StmtKind::Collective(c) = &mut stmt.kind {
            if let (true, Some(start), Some(SizeSpec::PerRank(values))) =
                (c.op.is_vector(), start, &mut c.size)
            {
                f(start, values);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diags(source: &str) -> Vec<Diag> {
        let (program, parse) = perfskel_grammar::parse(source);
        assert!(parse.is_empty(), "{parse:#?}");
        crate::check::check(&program, source, crate::check::Options::default()).diags
    }

    /// `check`'s diagnostics of `source`, which must include one of `code`.
    fn reported(source: &str, code: &str) -> Vec<Diag> {
        let found = diags(source);
        assert!(found.iter().any(|d| d.code == code), "{found:#?}");
        found
    }

    #[test]
    fn broadcasts_that_meet_at_statements_of_other_sizes_get_one_size() {
        // Ranks 0-1 and ranks 2-3 were written apart; their broadcasts meet, each
        // statement's size the mean of other calls.
        let source = "skeleton t\nranks 4\ntopology ring\napp_time 1 s\n\
            if rank < 2 {\n    bcast 256 B\n    barrier\n} else {\n    bcast 192 B\n    barrier\n}\n\
            bcast 8 B\nallreduce 16 B\n";
        let before = reported(source, "collective-mismatch");
        let (text, changed) = unify_collective_sizes(source, &before).expect("a change");
        assert_eq!(changed, 2, "{text}");
        assert!(diags(&text).is_empty(), "{text}");
        assert_eq!(text.matches("bcast 224 B").count(), 2, "{text}");
        // Statements no other met keep their sizes; nothing to do on a clean program.
        assert!(text.contains("bcast 8 B\nallreduce 16 B\n"), "{text}");
        assert!(unify_collective_sizes(&text, &diags(&text)).is_none());
        // Collectives that differ in more than their size are not made alike.
        let other = source.replace("bcast 192 B", "bcast 192 B root 1");
        assert!(unify_collective_sizes(&other, &diags(&other)).is_none());
    }

    #[test]
    fn statements_that_meet_get_one_table_each_ranks_entry_the_mean() {
        // Ranks 0-1 run the exchange twice in a loop where ranks 2-3 run it once and
        // then from another statement (a merge that wrote their streams apart).
        let source = "skeleton t\nranks 4\ntopology ring\napp_time 1 s\n\
            if rank < 2 {\n    loop 2 {\n        alltoallv per_rank(10 B, 20 B, 30 B, 40 B)\n    }\n} else {\n    \
            alltoallv per_rank(10 B, 20 B, 30 B, 40 B)\n    alltoallv per_rank(12 B, 22 B, 34 B, 44 B)\n}\n\
            alltoallv per_rank(1 B, 2 B, 3 B, 4 B)\n";
        let before = reported(source, "vector-counts");
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
