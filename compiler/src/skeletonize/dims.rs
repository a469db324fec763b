//! Loops over a grid's dimensions: takes the built statements, gives them with every
//! run of blocks that make the same calls along successive dimensions of a grid written
//! as one loop whose variable names the dimension:
//! `loop 3 as dim { ... send +d(dim) [16 KiB, 21 KiB, 28 KiB][dim] ... }`.
//!
//! Halo codes exchange along one dimension after another (LAMMPS's `CommBrick` swaps x,
//! then y, then z, forward and reverse, at set-up, every step and at every
//! re-neighbouring). The faces of a sub-domain differ in size, so the blocks of the three
//! dimensions differ in their message sizes and packing times, and the compressor, which
//! finds loops of equal tokens, leaves them apart: three copies of every exchange.
//!
//! A run qualifies when at least two blocks of up to [`MAX_BLOCK`] statements in a row
//! are the same statements (operations, communicators, call sites, loops, conditions)
//! but for the dimension of their grid directions, which moves by the same step from
//! one block to the next for every direction, and for their message sizes and compute
//! times: sizes and times that differ become picks `[v0, v1, ...][dim]`, one value per
//! dimension. Comments the blocks share are kept; those that differ are left out and the
//! loop says what it stands for.

use perfskel_grammar::ast::{
    BinOp, Block, Compute, Direction, Duration, Else, Expr, ExprKind, Ident, Loop, MsgSize, Peer,
    Pick, Size, Spanned, Stmt, StmtKind, TimeSpec, TimeUnit, Trivia,
};

use super::comms::bin;
use super::count_statements;

/// Blocks of at most this many statements are tried (counting the compute before each
/// other statement, see [`with_gaps`]).
const MAX_BLOCK: usize = 32;

/// A run is folded when it saves at least this many statements.
const MIN_SAVING: usize = 2;

/// The statements with their runs over dimensions folded, and how many loops that made.
pub(crate) fn dimension_loops(stmts: Vec<Stmt>) -> (Vec<Stmt>, usize) {
    let mut made = 0;
    let mut scope = Vec::new();
    let stmts = fold_block(with_gaps(stmts), &mut scope, &mut made);
    (without_gaps(stmts), made)
}

/// The statements with a compute before every other statement, of zero time where the
/// application computed too little to write one (the builder leaves those out), so that
/// blocks whose compute differs only in where it was negligible have the same shape.
fn with_gaps(stmts: Vec<Stmt>) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(2 * stmts.len());
    let mut pending: Option<Stmt> = None;
    for mut stmt in stmts {
        if matches!(stmt.kind, StmtKind::Compute(_)) {
            out.extend(pending.replace(stmt));
            continue;
        }
        match &mut stmt.kind {
            StmtKind::Loop(l) => {
                l.body.stmts = with_gaps(std::mem::take(&mut l.body.stmts));
            }
            StmtKind::If(_) => each_branch(&mut stmt, &mut |b| {
                *b = with_gaps(std::mem::take(b));
            }),
            _ => {}
        }
        out.push(pending.take().unwrap_or_else(gap));
        out.push(stmt);
    }
    out.extend(pending);
    out
}

/// A compute of no time: a place holder [`without_gaps`] removes.
fn gap() -> Stmt {
    Stmt::new(StmtKind::Compute(Box::new(Compute {
        time: TimeSpec::Fixed(Spanned::derived(Duration::new(0.0, TimeUnit::Ns))),
        working_set: None,
    })))
}

fn is_gap(stmt: &Stmt) -> bool {
    matches!(&stmt.kind, StmtKind::Compute(c)
        if matches!(&c.time, TimeSpec::Fixed(d) if d.value.value == 0.0))
}

/// The statements without the zero computes of [`with_gaps`].
fn without_gaps(stmts: Vec<Stmt>) -> Vec<Stmt> {
    stmts
        .into_iter()
        .filter(|s| !is_gap(s))
        .map(|mut stmt| {
            match &mut stmt.kind {
                StmtKind::Loop(l) => {
                    l.body.stmts = without_gaps(std::mem::take(&mut l.body.stmts));
                }
                StmtKind::If(_) => each_branch(&mut stmt, &mut |b| {
                    *b = without_gaps(std::mem::take(b));
                }),
                _ => {}
            }
            stmt
        })
        .collect()
}

/// Applies `f` to the statement list of every branch of an `if` chain.
fn each_branch(stmt: &mut Stmt, f: &mut dyn FnMut(&mut Vec<Stmt>)) {
    let StmtKind::If(i) = &mut stmt.kind else {
        return;
    };
    let mut arm = &mut **i;
    loop {
        f(&mut arm.then_block.stmts);
        match &mut arm.else_branch {
            Some(Else::If(next)) => arm = next,
            Some(Else::Block(b)) => {
                f(&mut b.stmts);
                break;
            }
            None => break,
        }
    }
}

fn fold_block(stmts: Vec<Stmt>, scope: &mut Vec<String>, made: &mut usize) -> Vec<Stmt> {
    // Inner blocks first, so that a block's statements are final when runs are sought.
    let stmts: Vec<Stmt> = stmts
        .into_iter()
        .map(|mut stmt| {
            match &mut stmt.kind {
                StmtKind::Loop(l) => {
                    let pushed = l.var.as_ref().map(|v| scope.push(v.name.clone()));
                    let body = std::mem::take(&mut l.body.stmts);
                    l.body.stmts = fold_block(body, scope, made);
                    if pushed.is_some() {
                        scope.pop();
                    }
                }
                StmtKind::If(_) => each_branch(&mut stmt, &mut |b| {
                    *b = fold_block(std::mem::take(b), scope, made);
                }),
                _ => {}
            }
            stmt
        })
        .collect();
    let mut out = Vec::with_capacity(stmts.len());
    let mut i = 0;
    while i < stmts.len() {
        let best = (1..=MAX_BLOCK)
            .filter_map(|len| run_at(&stmts, i, len).map(|run| (run, len)))
            .max_by_key(|(run, len)| (run.saving, std::cmp::Reverse(*len)));
        match best {
            Some((run, len)) => {
                let var = fresh_var(scope, &stmts[i..i + len]);
                out.push(fold_run(&stmts, i, len, &run, &var));
                *made += 1;
                i += run.blocks * len;
            }
            None => {
                out.push(stmts[i].clone());
                i += 1;
            }
        }
    }
    out
}

/// A run of blocks that differ in the dimension they step along.
struct Run {
    blocks: usize,
    /// The dimension step from one block to the next.
    stride: i64,
    saving: usize,
}

/// The run of blocks of `len` statements at `at`, if one qualifies.
fn run_at(stmts: &[Stmt], at: usize, len: usize) -> Option<Run> {
    let block = |t: usize| stmts.get(at + t * len..at + (t + 1) * len);
    let first = block(0)?;
    let (shape0, leaves0) = parts(first)?;
    let dims0: Vec<i64> = axis_dims(&leaves0);
    if dims0.is_empty() {
        return None;
    }
    let (shape1, leaves1) = parts(block(1)?)?;
    if shape1 != shape0 {
        return None;
    }
    let stride = axis_dims(&leaves1)[0] - dims0[0];
    if stride == 0 {
        return None;
    }
    let mut blocks = 1;
    while let Some(next) = block(blocks) {
        let Some((shape, leaves)) = parts(next) else {
            break;
        };
        let t = blocks as i64;
        if shape != shape0
            || !axis_dims(&leaves)
                .iter()
                .zip(&dims0)
                .all(|(d, d0)| *d == d0 + stride * t)
        {
            break;
        }
        blocks += 1;
    }
    if blocks < 2 {
        return None;
    }
    let size = count_statements(&without_gaps(first.to_vec()));
    let saving = ((blocks - 1) * size).checked_sub(1)?;
    (saving >= MIN_SAVING).then_some(Run {
        blocks,
        stride,
        saving,
    })
}

/// What a block's statements hold that may differ per dimension.
#[derive(Clone, Debug, PartialEq)]
enum Leaf {
    /// A grid direction: its dimension.
    Axis(i64),
    Size(MsgSize),
    Time(TimeSpec),
}

fn axis_dims(leaves: &[Leaf]) -> Vec<i64> {
    leaves
        .iter()
        .filter_map(|l| match l {
            Leaf::Axis(d) => Some(*d),
            _ => None,
        })
        .collect()
}

/// A leaf slot in a statement, for reading and for rewriting.
enum Slot<'a> {
    Peer(&'a mut Peer),
    Size(&'a mut MsgSize),
    Time(&'a mut TimeSpec),
}

/// Visits the slots of `stmts` in program order (the same order on blocks of the same
/// shape), and clears or keeps trivia as `f` wants.
fn walk(stmts: &mut [Stmt], f: &mut dyn FnMut(Slot)) {
    for stmt in stmts {
        match &mut stmt.kind {
            StmtKind::Compute(c) => f(Slot::Time(&mut c.time)),
            StmtKind::P2p(p) => {
                f(Slot::Peer(&mut p.peer.value));
                f(Slot::Size(&mut p.size));
                if let Some((peer, size)) = p.recv.as_deref_mut() {
                    f(Slot::Peer(&mut peer.value));
                    f(Slot::Size(size));
                }
            }
            StmtKind::Loop(l) => walk(&mut l.body.stmts, f),
            StmtKind::If(i) => {
                let mut arm = &mut **i;
                loop {
                    walk(&mut arm.then_block.stmts, f);
                    match &mut arm.else_branch {
                        Some(Else::If(next)) => arm = next,
                        Some(Else::Block(b)) => {
                            walk(&mut b.stmts, f);
                            break;
                        }
                        None => break,
                    }
                }
            }
            _ => {}
        }
    }
}

/// Applies `f` to every statement of `stmts`, nested ones included.
fn each_stmt(stmts: &mut [Stmt], f: &mut dyn FnMut(&mut Stmt)) {
    for stmt in stmts {
        f(stmt);
        match &mut stmt.kind {
            StmtKind::Loop(l) => each_stmt(&mut l.body.stmts, f),
            StmtKind::If(i) => {
                let mut arm = &mut **i;
                loop {
                    each_stmt(&mut arm.then_block.stmts, f);
                    match &mut arm.else_branch {
                        Some(Else::If(next)) => arm = next,
                        Some(Else::Block(b)) => {
                            each_stmt(&mut b.stmts, f);
                            break;
                        }
                        None => break,
                    }
                }
            }
            _ => {}
        }
    }
}

/// A block's shape (a copy with its leaves set to neutral values and no comments) and
/// its leaves; `None` when it holds something a fold cannot write (a pick already, a
/// direction along a computed dimension).
fn parts(block: &[Stmt]) -> Option<(Vec<Stmt>, Vec<Leaf>)> {
    let mut shape = block.to_vec();
    let mut leaves = Vec::new();
    let mut ok = true;
    walk(&mut shape, &mut |slot| match slot {
        Slot::Peer(Peer::Dir(Direction::Axis(a))) => {
            leaves.push(Leaf::Axis(i64::from(a.dim)));
            a.dim = 0;
        }
        Slot::Peer(Peer::Dir(Direction::AxisOf { .. })) => ok = false,
        Slot::Peer(_) => {}
        Slot::Size(s) => {
            if matches!(s, MsgSize::Pick(_)) {
                ok = false;
            }
            leaves.push(Leaf::Size(s.clone()));
            *s = MsgSize::Fixed(Spanned::derived(Size::bytes_exact(0)));
        }
        Slot::Time(t) => {
            if matches!(t, TimeSpec::Pick(_)) {
                ok = false;
            }
            leaves.push(Leaf::Time(t.clone()));
            *t = TimeSpec::Fixed(Spanned::derived(Duration::new(0.0, TimeUnit::Ns)));
        }
    });
    each_stmt(&mut shape, &mut |s| s.trivia = Trivia::default());
    ok.then_some((shape, leaves))
}

/// The loop that stands for the run at `at`.
fn fold_run(stmts: &[Stmt], at: usize, len: usize, run: &Run, var: &str) -> Stmt {
    let blocks: Vec<&[Stmt]> = (0..run.blocks)
        .map(|t| &stmts[at + t * len..at + (t + 1) * len])
        .collect();
    let leaves: Vec<Vec<Leaf>> = blocks
        .iter()
        .map(|b| parts(b).map(|(_, l)| l).unwrap_or_default())
        .collect();
    let index = || Expr::new(ExprKind::Var(Ident::new(var)));
    let mut body = blocks[0].to_vec();
    let mut j = 0;
    walk(&mut body, &mut |slot| {
        let column: Vec<&Leaf> = leaves.iter().filter_map(|l| l.get(j)).collect();
        match slot {
            Slot::Peer(Peer::Dir(dir @ Direction::Axis(_))) => {
                let (Direction::Axis(a), Some(Leaf::Axis(d0))) = (&*dir, column.first()) else {
                    return;
                };
                *dir = Direction::AxisOf {
                    dim: affine(*d0, run.stride, index()),
                    forward: a.forward,
                };
                j += 1;
            }
            Slot::Peer(_) => {}
            Slot::Size(s) => {
                let values: Vec<Spanned<Size>> = column
                    .iter()
                    .filter_map(|l| match l {
                        Leaf::Size(MsgSize::Fixed(v)) => Some(*v),
                        _ => None,
                    })
                    .collect();
                if values.iter().any(|v| v.value != values[0].value) {
                    *s = MsgSize::Pick(Box::new(Pick {
                        values,
                        index: index(),
                    }));
                }
                j += 1;
            }
            Slot::Time(t) => {
                let values: Vec<TimeSpec> = column
                    .iter()
                    .filter_map(|l| match l {
                        Leaf::Time(t) => Some(t.clone()),
                        _ => None,
                    })
                    .collect();
                if values.iter().any(|v| *v != values[0]) {
                    *t = TimeSpec::Pick(Box::new(Pick {
                        values,
                        index: index(),
                    }));
                }
                j += 1;
            }
        }
    });
    // Comments the blocks share stay; the others go (the loop's comment says why).
    let mut others: Vec<Vec<Trivia>> = blocks[1..]
        .iter()
        .map(|b| {
            let mut b = b.to_vec();
            let mut list = Vec::new();
            each_stmt(&mut b, &mut |s| list.push(s.trivia.clone()));
            list
        })
        .collect();
    let mut k = 0;
    each_stmt(&mut body, &mut |s| {
        let shared =
            |get: &dyn Fn(&Trivia) -> bool| others.iter().all(|o| o.get(k).is_some_and(get));
        let leading = s.trivia.leading.clone();
        if !shared(&|t: &Trivia| t.leading == leading) {
            s.trivia.leading.clear();
        }
        let trailing = s.trivia.trailing.clone();
        if !shared(&|t: &Trivia| t.trailing == trailing) {
            s.trivia.trailing = None;
        }
        k += 1;
    });
    others.clear();
    let dims: Vec<String> = (0..run.blocks as i64)
        .map(|t| {
            leaves[0].iter().find_map(|l| match l {
                Leaf::Axis(d) => Some(d + run.stride * t),
                _ => None,
            })
        })
        .map(|d| d.map_or_else(String::new, |d| d.to_string()))
        .collect();
    let mut stmt = Stmt::new(StmtKind::Loop(Box::new(Loop {
        count: Expr::int(run.blocks as i64),
        var: Some(Ident::new(var)),
        body: Block {
            stmts: body,
            end_comments: Vec::new(),
        },
    })));
    stmt.trivia.leading.push(format!(
        "# The same calls along grid dimensions {} in turn: `{var}` numbers them; sizes and compute that differ are per dimension.",
        dims.join(", ")
    ));
    stmt
}

/// `d0 + stride * var`, written plainly.
fn affine(d0: i64, stride: i64, var: Expr) -> Expr {
    let scaled = match stride {
        1 => var,
        -1 => return bin(BinOp::Sub, Expr::int(d0), var),
        s => bin(BinOp::Mul, Expr::int(s), var),
    };
    if d0 == 0 {
        scaled
    } else {
        bin(BinOp::Add, scaled, Expr::int(d0))
    }
}

/// `dim`, or `dim2`, ... when an enclosing loop or one inside the block has that name.
fn fresh_var(scope: &[String], block: &[Stmt]) -> String {
    let mut inner = Vec::new();
    let mut block = block.to_vec();
    each_stmt(&mut block, &mut |s| {
        if let StmtKind::Loop(l) = &s.kind {
            if let Some(v) = &l.var {
                inner.push(v.name.clone());
            }
        }
    });
    let taken = |name: &str| scope.iter().chain(&inner).any(|v| v == name);
    let mut name = "dim".to_string();
    let mut n = 2;
    while taken(&name) {
        name = format!("dim{n}");
        n += 1;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "skeleton t\nranks 8\ntopology torus(2, 2, 2)\napp_time 1 s\n";

    /// The body of `HEADER` + `body` after the fold, printed, without the header.
    fn folded(body: &str) -> (String, usize) {
        let (mut program, diags) = perfskel_grammar::parse(&format!("{HEADER}{body}"));
        assert!(diags.is_empty(), "{diags:?}");
        let (stmts, made) = dimension_loops(std::mem::take(&mut program.body.stmts));
        program.body.stmts = stmts;
        let text = perfskel_grammar::print(&program);
        (text.trim_start_matches(HEADER).to_string(), made)
    }

    #[test]
    fn blocks_along_successive_dimensions_are_one_loop_with_picks() {
        let (text, made) = folded(
            "compute 2 ms\n\
             req r0 = irecv east 4 KiB @ \"a\"\nsend east 3 KiB @ \"b\"\nwait r0 @ \"c\"\n\
             compute 10 us\n\
             req r0 = irecv north 4 KiB @ \"a\"\nsend north 5 KiB @ \"b\"\nwait r0 @ \"c\"\n\
             compute 7 us\n\
             req r0 = irecv up 4 KiB @ \"a\"\nsend up 6 KiB @ \"b\"\nwait r0 @ \"c\"\n\
             allreduce 8 B\n",
        );
        assert_eq!(made, 1);
        assert!(
            text.contains(
                "loop 3 as dim {\n    compute [2 ms, 10 us, 7 us][dim]\n    \
                 req r0 = irecv +d(dim) 4 KiB @ \"a\"\n    \
                 send +d(dim) [3 KiB, 5 KiB, 6 KiB][dim] @ \"b\"\n    \
                 wait r0 @ \"c\"\n}\nallreduce 8 B\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn dimensions_in_reverse_order_count_down_and_missing_compute_is_zero() {
        let (text, made) = folded(
            "loop 2 {\n compute 3 ms\n sendrecv to up 1 KiB from down 1 KiB @ \"s\"\n compute 5 us\n}\n\
             loop 2 {\n sendrecv to north 1 KiB from south 1 KiB @ \"s\"\n compute 6 us\n}\n\
             loop 2 {\n sendrecv to east 1 KiB from west 1 KiB @ \"s\"\n compute 7 us\n}\n",
        );
        assert_eq!(made, 1);
        assert!(
            text.contains(
                "loop 3 as dim {\n    loop 2 {\n        compute [3 ms, 0 ns, 0 ns][dim]\n        \
                 sendrecv to +d(2 - dim) 1 KiB from -d(2 - dim) 1 KiB @ \"s\"\n        \
                 compute [5 us, 6 us, 7 us][dim]\n    }\n}\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn blocks_with_other_call_sites_or_counts_stay_apart() {
        let sites = "sendrecv to east 1 KiB from west 1 KiB @ \"x\"\nallreduce 8 B\n\
                     sendrecv to north 1 KiB from south 1 KiB @ \"y\"\nallreduce 8 B\n";
        assert_eq!(folded(sites).1, 0);
        let counts = "loop 2 { send east 1 KiB\n recv west 1 KiB }\n\
                      loop 3 { send north 1 KiB\n recv south 1 KiB }\n";
        assert_eq!(folded(counts).1, 0);
        // One statement per block saves nothing worth a loop.
        let single = "send east 1 KiB\nsend north 1 KiB\n";
        assert_eq!(folded(single).1, 0);
    }

    #[test]
    fn the_variable_does_not_shadow_an_enclosing_one() {
        let (text, made) = folded(
            "loop 4 as dim {\n\
             compute 1 ms\nsend east 1 KiB\nrecv west 1 KiB\n\
             compute 1 ms\nsend north 2 KiB\nrecv south 2 KiB\n}\n",
        );
        assert_eq!(made, 1);
        assert!(text.contains("loop 2 as dim2 {"), "{text}");
        assert!(
            text.contains("send +d(dim2) [1 KiB, 2 KiB][dim2]"),
            "{text}"
        );
    }
}
