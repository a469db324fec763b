//! Property tests: for random programs, parse ∘ print is the identity (up to positions)
//! and print is idempotent; for random text, the parser neither panics nor loses the
//! ability to print what it understood.

use proptest::prelude::*;

use crate::ast::*;
use crate::parser::{cut_candidates, parse_in_parts, parse_parts};
use crate::{parse, print};

fn name() -> impl Strategy<Value = Ident> {
    "[a-z][a-z0-9_]{0,7}"
        .prop_filter("not a keyword", |s| !crate::KEYWORDS.contains(&s.as_str()))
        .prop_map(Ident::new)
}

/// Comment lines as the parser produces them: `#` text without trailing space.
fn comment() -> impl Strategy<Value = String> {
    "[ a-zA-Z0-9.,:()`'=+-]{0,20}".prop_map(|t| format!("#{}", t.trim_end()))
}

/// Leading trivia: comments with single blank lines between, never two blanks in a
/// row; `allow_leading_blank` is false where the parser drops a first blank line.
fn leading(allow_leading_blank: bool) -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(prop_oneof![3 => comment(), 1 => Just(String::new())], 0..3).prop_map(
        move |mut lines| {
            lines.dedup_by(|a, b| a.is_empty() && b.is_empty());
            if !allow_leading_blank && lines.first().is_some_and(String::is_empty) {
                lines.remove(0);
            }
            lines
        },
    )
}

fn trivia(allow_leading_blank: bool) -> impl Strategy<Value = Trivia> {
    (leading(allow_leading_blank), prop::option::of(comment()))
        .prop_map(|(leading, trailing)| Trivia { leading, trailing })
}

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        (0u32..100_000).prop_map(f64::from),
        (0u32..100_000).prop_map(|v| f64::from(v) / 1000.0),
        (0.0f64..1e9),
        (1e-12f64..1e-3),
    ]
}

fn duration() -> impl Strategy<Value = Spanned<Duration>> {
    (number(), prop::sample::select(TimeUnit::ALL.to_vec()))
        .prop_map(|(value, unit)| Spanned::derived(Duration { value, unit }))
}

fn size() -> impl Strategy<Value = Spanned<Size>> {
    (
        0u32..1_000_000,
        prop::sample::select(SizeUnit::ALL.to_vec()),
    )
        .prop_map(|(value, unit)| Spanned::derived(Size::new(f64::from(value), unit)))
}

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        (0i64..1_000_000).prop_map(Expr::int),
        any::<bool>().prop_map(|b| Expr::new(ExprKind::Bool(b))),
        Just(Expr::new(ExprKind::Rank)),
        Just(Expr::new(ExprKind::NRanks)),
        (0u32..4).prop_map(|d| Expr::new(ExprKind::Coord(d))),
        prop::collection::vec(-5i64..100, 1..5).prop_map(|v| Expr::new(ExprKind::PerRank(v))),
        prop::sample::select(vec!["i", "step", "j2"])
            .prop_map(|v| Expr::new(ExprKind::Var(Ident::new(v)))),
    ];
    let binops = vec![
        BinOp::Or,
        BinOp::And,
        BinOp::Eq,
        BinOp::Ne,
        BinOp::Lt,
        BinOp::Le,
        BinOp::Gt,
        BinOp::Ge,
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Rem,
        BinOp::Xor,
    ];
    leaf.prop_recursive(4, 24, 2, move |inner| {
        prop_oneof![
            (
                prop::sample::select(vec![UnaryOp::Neg, UnaryOp::Not]),
                inner.clone()
            )
                .prop_map(|(op, x)| Expr::new(ExprKind::Unary(op, Box::new(x)))),
            (
                prop::sample::select(binops.clone()),
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(op, l, r)| {
                    Expr::new(ExprKind::Binary(op, Box::new(l), Box::new(r)))
                }),
            (prop::collection::vec(-5i64..100, 1..5), inner)
                .prop_map(|(v, i)| Expr::new(ExprKind::Pick(v, Box::new(i)))),
        ]
    })
}

fn direction() -> impl Strategy<Value = Direction> {
    prop_oneof![
        (
            0u32..3,
            any::<bool>(),
            prop::sample::select(vec![AxisSpelling::Compass, AxisSpelling::Letter])
        )
            .prop_map(|(dim, forward, spelling)| Direction::Axis(AxisDir {
                dim,
                forward,
                spelling
            })),
        (0u32..12, any::<bool>()).prop_map(|(dim, forward)| Direction::Axis(AxisDir {
            dim,
            forward,
            spelling: AxisSpelling::Numbered
        })),
        prop::collection::vec(-100i64..100, 1..4).prop_map(Direction::Offset),
        Just(Direction::Next),
        Just(Direction::Prev),
        Just(Direction::Parent),
        Just(Direction::Hub),
        expr().prop_map(Direction::Child),
        expr().prop_map(Direction::Leaf),
        expr().prop_map(Direction::Bit),
        expr().prop_map(Direction::Neighbor),
        (expr(), any::<bool>()).prop_map(|(dim, forward)| Direction::AxisOf { dim, forward }),
        (expr(), expr()).prop_map(|(dim, disp)| Direction::Shift { dim, disp }),
    ]
}

fn msg_size() -> impl Strategy<Value = MsgSize> {
    prop_oneof![
        3 => size().prop_map(MsgSize::Fixed),
        1 => (prop::collection::vec(size(), 1..4), expr())
            .prop_map(|(values, index)| MsgSize::Pick(Box::new(Pick { values, index }))),
    ]
}

fn peer(receive: bool) -> impl Strategy<Value = Spanned<Peer>> {
    let any_weight = if receive { 1 } else { 0 };
    prop_oneof![
        4 => direction().prop_map(Peer::Dir),
        1 => expr().prop_map(Peer::Rank),
        any_weight => Just(Peer::Any),
        1 => Just(Peer::Source),
    ]
    .prop_map(Spanned::derived)
}

fn p2p() -> impl Strategy<Value = StmtKind> {
    let ops = vec![
        P2pOp::Send,
        P2pOp::Recv,
        P2pOp::Isend,
        P2pOp::Irecv,
        P2pOp::Sendrecv,
    ];
    (
        prop::sample::select(ops),
        name(),
        peer(false),
        peer(true),
        msg_size(),
        (peer(true), msg_size()),
        (prop::option::of(any::<u32>()), prop::option::of(name())),
        prop::option::of(1u64..10_000),
    )
        .prop_map(
            |(op, req, send_peer, recv_peer, size, recv, (tag, comm), window)| {
                StmtKind::P2p(Box::new(P2p {
                    op,
                    request: op.is_nonblocking().then_some(req),
                    peer: if op.receives() { recv_peer } else { send_peer },
                    size,
                    recv: (op == P2pOp::Sendrecv).then(|| Box::new(recv)),
                    tag: tag.map(Spanned::derived),
                    comm,
                    window: window.filter(|_| op.is_nonblocking()).map(Spanned::derived),
                }))
            },
        )
}

fn collective() -> impl Strategy<Value = StmtKind> {
    (
        prop::sample::select(CollOp::ALL.to_vec()),
        any::<bool>(),
        name(),
        size(),
        prop::collection::vec(size(), 1..4),
        any::<bool>(),
        prop::option::of(expr()),
        prop::option::of(name()),
    )
        .prop_map(
            |(op, nonblocking, req, fixed, list, per_rank, root, comm)| {
                let size = op.has_size().then(|| {
                    if op.is_vector() && per_rank {
                        SizeSpec::PerRank(list)
                    } else {
                        SizeSpec::Fixed(fixed)
                    }
                });
                StmtKind::Collective(Box::new(Collective {
                    op,
                    nonblocking,
                    request: nonblocking.then_some(req),
                    size,
                    root: if op.has_root() { root } else { None },
                    comm,
                }))
            },
        )
}

fn simple() -> impl Strategy<Value = StmtKind> {
    let plain = prop_oneof![
        duration().prop_map(TimeSpec::Fixed),
        prop::collection::vec(duration(), 1..4).prop_map(TimeSpec::PerRank),
        (duration(), duration()).prop_map(|(mean, stddev)| TimeSpec::Normal { mean, stddev }),
        (duration(), duration()).prop_map(|(low, high)| TimeSpec::Uniform { low, high }),
    ];
    let compute = (
        prop_oneof![
            4 => plain.clone(),
            1 => (prop::collection::vec(plain, 1..4), expr())
                .prop_map(|(values, index)| TimeSpec::Pick(Box::new(Pick { values, index }))),
        ],
        prop::option::of(size()),
        prop::option::of((0u64..5000).prop_map(Spanned::derived)),
        prop::option::of(duration()),
    )
        .prop_map(|(time, working_set, polls, poll_cost)| {
            StmtKind::Compute(Box::new(Compute {
                time,
                working_set,
                poll_cost: poll_cost.filter(|_| polls.is_some()),
                polls,
            }))
        });
    let wait = (
        prop::sample::select(vec![
            WaitOp::Wait,
            WaitOp::Waitall,
            WaitOp::Waitany,
            WaitOp::Test,
        ]),
        prop::collection::vec(name(), 1..4),
    )
        .prop_map(|(op, mut handles)| {
            if matches!(op, WaitOp::Wait | WaitOp::Test) {
                handles.truncate(1);
            }
            StmtKind::Wait(Wait { op, handles })
        });
    let comm = (
        name(),
        name(),
        prop_oneof![
            (expr(), prop::option::of(expr())).prop_map(|(color, key)| (
                0,
                Some(color),
                key,
                Vec::new()
            )),
            Just((1, None, None, Vec::new())),
            prop::collection::vec(0u32..4, 1..3).prop_map(|keep| (2, None, None, keep)),
        ],
    )
        .prop_map(|(name, parent, (kind, color, key, keep))| {
            let def = match (kind, color) {
                (0, Some(color)) => CommDef::Split { parent, color, key },
                (1, _) => CommDef::Dup { parent },
                _ => CommDef::CartSub {
                    parent,
                    keep: keep.into_iter().map(Spanned::derived).collect(),
                },
            };
            StmtKind::CommDecl(Box::new(CommDecl { name, def }))
        });
    prop_oneof![
        compute.boxed(),
        p2p().boxed(),
        collective().boxed(),
        wait.boxed(),
        comm.boxed()
    ]
}

fn stmt_with(kind: impl Strategy<Value = StmtKind>, first: bool) -> impl Strategy<Value = Stmt> {
    (kind, prop::option::of("[ -~]{0,12}"), trivia(!first)).prop_map(|(kind, site, trivia)| Stmt {
        kind,
        site: site.map(|text| Site {
            text,
            pos: Pos::Derived,
        }),
        pos: Pos::Derived,
        trivia,
    })
}

/// Blocks of statements with nested loops and conditionals.
fn block(depth: u32) -> BoxedStrategy<Block> {
    let stmt_kind: BoxedStrategy<StmtKind> = if depth == 0 {
        simple().boxed()
    } else {
        prop_oneof![
            4 => simple(),
            1 => (expr(), prop::option::of(prop::sample::select(vec!["i", "step", "j2"])), block(depth - 1))
                .prop_map(|(count, var, body)| StmtKind::Loop(Box::new(Loop { count, var: var.map(Ident::new), body }))),
            1 => (peer(true), msg_size(), any::<u32>(), prop::option::of(name()), block(depth - 1))
                .prop_map(|(peer, size, tag, comm, body)| StmtKind::While(Box::new(While {
                    recv: P2p {
                        op: P2pOp::Recv,
                        request: None,
                        peer,
                        size,
                        recv: None,
                        tag: Some(Spanned::derived(tag)),
                        comm,
                        window: None,
                    },
                    body,
                }))),
            1 => (expr(), block(depth - 1), prop::option::of((prop::option::of(expr()), block(depth - 1))))
                .prop_map(|(cond, then_block, else_part)| {
                    let else_branch = else_part.map(|(cond2, b)| match cond2 {
                        Some(c) => Else::If(Box::new(If { cond: c, then_block: b, else_branch: None })),
                        None => Else::Block(b),
                    });
                    StmtKind::If(Box::new(If { cond, then_block, else_branch }))
                }),
        ]
        .boxed()
    };
    (
        stmt_with(stmt_kind.clone(), true),
        prop::collection::vec(stmt_with(stmt_kind, false), 0..4),
        any::<bool>(),
        leading(true),
    )
        .prop_map(|(first, rest, has_any, mut end_comments)| {
            let mut stmts = Vec::new();
            if has_any {
                stmts.push(first);
                stmts.extend(rest);
            }
            if stmts.is_empty() && end_comments.first().is_some_and(String::is_empty) {
                end_comments.remove(0);
            }
            if end_comments.last().is_some_and(String::is_empty) {
                end_comments.pop();
            }
            Block {
                stmts,
                end_comments,
            }
        })
        .boxed()
}

fn topology() -> impl Strategy<Value = Topology> {
    prop_oneof![
        Just(Topology::Ring),
        Just(Topology::Chain),
        Just(Topology::Hypercube),
        Just(Topology::Star),
        Just(Topology::Complete),
        (1u64..5).prop_map(|arity| Topology::Tree { arity }),
        prop::collection::vec((1u64..9, any::<bool>()), 1..4).prop_map(|d| Topology::Grid {
            dims: d.iter().map(|x| x.0).collect(),
            periodic: d.iter().map(|x| x.1).collect(),
        }),
        prop::collection::vec((0u64..8, prop::collection::vec(0u64..8, 0..3)), 1..4)
            .prop_map(|neighbors| Topology::Graph { neighbors }),
    ]
}

fn program() -> impl Strategy<Value = Program> {
    (
        (name(), trivia(false)),
        (1u64..100_000, trivia(true)),
        (topology(), trivia(true)),
        (duration(), trivia(true)),
        prop::option::of(((size(), size()), trivia(true))),
        block(2),
    )
        .prop_map(|(n, r, t, a, m, body)| Program {
            name: decl(n.0, n.1),
            ranks: decl(r.0, r.1),
            topology: decl(t.0, t.1),
            app_time: decl(a.0.value, a.1),
            memory: m
                .map(|((working_set, rate), trivia)| decl(Memory { working_set, rate }, trivia)),
            body,
        })
}

fn decl<T>(value: T, trivia: Trivia) -> Decl<T> {
    Decl {
        value,
        pos: Pos::Derived,
        trivia,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn parse_of_print_is_the_identity(program in program()) {
        let text = print(&program);
        let (parsed, diags) = parse(&text);
        prop_assert!(diags.is_empty(), "{text}\n{diags:#?}");
        prop_assert_eq!(&parsed, &program, "{}", text);
    }

    #[test]
    fn print_is_idempotent(program in program()) {
        let once = print(&program);
        let (parsed, _) = parse(&once);
        prop_assert_eq!(print(&parsed), once);
    }

    #[test]
    fn parsing_in_parts_gives_the_one_pass_result(program in program()) {
        let text = print(&program);
        let one_pass = parse_parts(&text, 1);
        // Every place the top level can be cut, alone, then cuts into 2..=4 parts.
        let lexed = crate::lexer::lex(&text);
        for at in cut_candidates(&text, &lexed) {
            if let Some(parts) = parse_in_parts(&text, &lexed, &[at]) {
                prop_assert_eq!(&parts, &one_pass.0, "cut at token {}:\n{}", at, text);
                prop_assert!(one_pass.1.is_empty());
            }
        }
        for parts in 2..=4 {
            prop_assert_eq!(&parse_parts(&text, parts), &one_pass, "{} parts:\n{}", parts, text);
        }
    }

    #[test]
    fn text_parsed_in_parts_gives_the_one_pass_result(text in "(([ -~]{0,30}|compute 1 us|loop 2 \\{|\\}|# c)\n){0,30}") {
        let one_pass = parse_parts(&text, 1);
        for parts in 2..=4 {
            prop_assert_eq!(&parse_parts(&text, parts), &one_pass, "{} parts:\n{}", parts, text);
        }
    }

    #[test]
    fn any_text_parses_to_diagnostics_or_a_program(text in "[ -~\n]{0,200}") {
        let (program, diags) = parse(&text);
        let printed = print(&program);
        if diags.is_empty() {
            let (again, diags) = parse(&printed);
            prop_assert!(diags.is_empty());
            prop_assert_eq!(print(&again), printed);
        }
    }
}
