//! Simple statements (everything but `loop` and `if`, whose blocks the recovering driver
//! in `mod.rs` parses) and the header's topology.

use nom::branch::alt;
use nom::combinator::{cut, map, opt, value};
use nom::multi::separated_list1;
use nom::sequence::{delimited, preceded};
use nom::{Err, Parser};

use super::expr::expr;
use super::tokens::{
    duration, error, failure, kw, name, punct, size, small_uint, string, uint, word, PErr, PResult,
    Tokens,
};
use crate::ast::*;
use crate::lexer::TokKind;

/// A simple statement and its call-site annotation.
pub struct Simple {
    pub kind: StmtKind,
    pub site: Option<Site>,
}

/// Parses one simple statement starting with the keyword at `input`.
pub fn simple_stmt(input: Tokens) -> PResult<Simple> {
    let Some((head, head_span)) = word(input).ok().map(|(_, w)| w) else {
        return error(PErr::expected(&input, "a statement"));
    };
    let after_head = input.take_from_word();
    match head {
        "compute" => compute(after_head),
        "send" => p2p(P2pOp::Send, None)(after_head),
        "recv" => p2p(P2pOp::Recv, None)(after_head),
        "sendrecv" => p2p(P2pOp::Sendrecv, None)(after_head),
        "req" => request_stmt(after_head),
        "isend" | "irecv" => failure(
            PErr::invalid(
                &input,
                head_span,
                format!("`{head}` must bind a request handle"),
            )
            .with_hint(format!(
                "write `req r = {head} ...` and complete it with `wait r`"
            )),
        ),
        "wait" | "waitall" | "waitany" | "test" => wait(head)(after_head),
        "comm" => comm_decl(after_head),
        _ => match collective_op(head) {
            Some((op, false)) => collective(op, false, None)(after_head),
            Some((_, true)) => failure(
                PErr::invalid(
                    &input,
                    head_span,
                    format!("`{head}` must bind a request handle"),
                )
                .with_hint(format!(
                    "write `req r = {head} ...` and complete it with `wait r`"
                )),
            ),
            None => error(PErr::expected(&input, "a statement")),
        },
    }
}

impl<'a> Tokens<'a> {
    fn take_from_word(&self) -> Tokens<'a> {
        nom::Input::take_from(self, 1)
    }
}

/// `op` and whether it is the nonblocking (`i`-prefixed) form.
pub fn collective_op(word: &str) -> Option<(CollOp, bool)> {
    let (base, nonblocking) = match word.strip_prefix('i') {
        Some(base) if CollOp::ALL.iter().any(|op| op.keyword() == base) => (base, true),
        _ => (word, false),
    };
    CollOp::ALL
        .iter()
        .find(|op| op.keyword() == base)
        .map(|&op| (op, nonblocking))
}

fn compute(input: Tokens) -> PResult<Simple> {
    let (rest, time) = cut(time_spec).parse(input)?;
    let (rest, working_set) = opt(preceded(kw("working_set"), cut(size))).parse(rest)?;
    let (rest, polls) = opt(preceded(kw("polls"), cut(uint))).parse(rest)?;
    let (rest, poll_cost) = match polls {
        Some(_) => opt(preceded(kw("each"), cut(duration))).parse(rest)?,
        None => (rest, None),
    };
    let (rest, clauses) = clauses(Allowed::NONE)(rest)?;
    Ok((
        rest,
        Simple {
            kind: StmtKind::Compute(Box::new(Compute {
                time,
                working_set,
                polls,
                poll_cost,
            })),
            site: clauses.site,
        },
    ))
}

fn time_spec(input: Tokens) -> PResult<TimeSpec> {
    time_spec_in(input, true)
}

/// A time that is not a pick (the options of a pick).
fn plain_time_spec(input: Tokens) -> PResult<TimeSpec> {
    time_spec_in(input, false)
}

/// `[V, V, ...][EXPR]`: one of the values, by index.
fn pick<'a, T>(
    mut item: impl FnMut(Tokens<'a>) -> PResult<'a, T>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, Pick<T>> {
    move |input: Tokens<'a>| {
        let (rest, _) = punct(TokKind::LBracket)(input)?;
        let (rest, values) = cut(separated_list1(punct(TokKind::Comma), &mut item)).parse(rest)?;
        let (rest, _) = cut(punct(TokKind::RBracket)).parse(rest)?;
        let (rest, index) = cut(delimited(
            punct(TokKind::LBracket),
            expr,
            punct(TokKind::RBracket),
        ))
        .parse(rest)?;
        Ok((rest, Pick { values, index }))
    }
}

/// A message size: `8 KiB` or a pick `[8 KiB, 16 KiB][dim]`.
fn msg_size(input: Tokens) -> PResult<MsgSize> {
    alt((
        map(size, MsgSize::Fixed),
        map(pick(size), |p| MsgSize::Pick(Box::new(p))),
    ))
    .parse(input)
}

fn time_spec_in(input: Tokens, picks: bool) -> PResult<TimeSpec> {
    if !picks && input.first().is_some_and(|t| t.kind == TokKind::LBracket) {
        let span = input.first().map(|t| t.span).unwrap_or_default();
        return failure(PErr::invalid(
            &input,
            span,
            "the options of a pick `[...][index]` cannot be picks themselves",
        ));
    }
    let list = |i| {
        delimited(
            punct(TokKind::LParen),
            cut(separated_list1(punct(TokKind::Comma), duration)),
            cut(punct(TokKind::RParen)),
        )
        .parse(i)
    };
    let pair = |i| {
        delimited(
            punct(TokKind::LParen),
            cut((duration, punct(TokKind::Comma), duration)),
            cut(punct(TokKind::RParen)),
        )
        .map(|(a, _, b)| (a, b))
        .parse(i)
    };
    let result = alt((
        map(duration, TimeSpec::Fixed),
        map(pick(plain_time_spec), |p| TimeSpec::Pick(Box::new(p))),
        map(preceded(kw("per_rank"), cut(list)), TimeSpec::PerRank),
        map(preceded(kw("normal"), cut(pair)), |(mean, stddev)| {
            TimeSpec::Normal { mean, stddev }
        }),
        map(preceded(kw("uniform"), cut(pair)), |(low, high)| {
            TimeSpec::Uniform { low, high }
        }),
    ))
    .parse(input);
    match result {
        Err(Err::Error(e)) if e.at == input.offset => error(PErr::expected(
            &input,
            "a time such as `2 ms`, `per_rank(...)`, `normal(mean, stddev)` or `uniform(low, high)`",
        )),
        other => other,
    }
}

fn size_spec(input: Tokens) -> PResult<SizeSpec> {
    alt((
        map(size, SizeSpec::Fixed),
        map(
            preceded(
                kw("per_rank"),
                cut(delimited(
                    punct(TokKind::LParen),
                    separated_list1(punct(TokKind::Comma), size),
                    punct(TokKind::RParen),
                )),
            ),
            SizeSpec::PerRank,
        ),
    ))
    .parse(input)
}

/// The receive of `while recv ...`, after `recv`.
pub fn while_recv(input: Tokens) -> PResult<Simple> {
    p2p(P2pOp::Recv, None)(input)
}

fn p2p(op: P2pOp, request: Option<Ident>) -> impl FnOnce(Tokens) -> PResult<Simple> {
    move |input| {
        let (rest, peer, size, recv) = if op == P2pOp::Sendrecv {
            let (rest, (_, peer, size, _, rpeer, rsize)) = cut((
                kw("to"),
                spanned_peer,
                msg_size,
                kw("from"),
                spanned_peer,
                msg_size,
            ))
            .parse(input)?;
            (rest, peer, size, Some(Box::new((rpeer, rsize))))
        } else {
            let (rest, (peer, size)) = cut((spanned_peer, msg_size)).parse(input)?;
            (rest, peer, size, None)
        };
        if !op.receives() && peer.value == Peer::Any {
            return failure(PErr::invalid(
                &input,
                peer.pos.span().unwrap_or_default(),
                "`any` can only be the source of a receive",
            ));
        }
        let allowed = if request.is_some() && op != P2pOp::Sendrecv {
            Allowed::REQ_P2P
        } else {
            Allowed::P2P
        };
        let (rest, clauses) = clauses(allowed)(rest)?;
        Ok((
            rest,
            Simple {
                kind: StmtKind::P2p(Box::new(P2p {
                    op,
                    request,
                    peer,
                    size,
                    recv,
                    tag: clauses.tag,
                    comm: clauses.comm,
                    window: clauses.window,
                })),
                site: clauses.site,
            },
        ))
    }
}

fn collective(
    op: CollOp,
    nonblocking: bool,
    request: Option<Ident>,
) -> impl FnOnce(Tokens) -> PResult<Simple> {
    move |input| {
        let (rest, size) = if op.has_size() {
            let (rest, spec) = size_spec(input).map_err(|e| match e {
                Err::Error(_) => Err::Failure(PErr::expected(
                    &input,
                    if op.is_vector() {
                        "a size such as `8 KiB` or `per_rank(...)`"
                    } else {
                        "a size such as `8 KiB`"
                    },
                )),
                other => other,
            })?;
            if let (SizeSpec::PerRank(sizes), false) = (&spec, op.is_vector()) {
                let span = sizes.first().and_then(|s| s.pos.span()).unwrap_or_default();
                let err = PErr::invalid(
                    &input,
                    span,
                    format!("`{}` takes the same size on every rank", op.keyword()),
                );
                let vector = format!("{}v", op.keyword());
                return failure(if collective_op(&vector).is_some() {
                    err.with_hint(format!("per-rank sizes need the vector form `{vector}`"))
                } else {
                    err
                });
            }
            (rest, Some(spec))
        } else {
            (input, None)
        };
        let allowed = if op.has_root() {
            Allowed::ROOTED
        } else {
            Allowed::COLLECTIVE
        };
        let (rest, clauses) = clauses(allowed)(rest)?;
        Ok((
            rest,
            Simple {
                kind: StmtKind::Collective(Box::new(Collective {
                    op,
                    nonblocking,
                    request,
                    size,
                    root: clauses.root,
                    comm: clauses.comm,
                })),
                site: clauses.site,
            },
        ))
    }
}

/// `req NAME = isend ... | irecv ... | iCOLLECTIVE ...`
fn request_stmt(input: Tokens) -> PResult<Simple> {
    let (rest, (handle, _)) = cut((name("a request"), punct(TokKind::Assign))).parse(input)?;
    let Ok((after, (op_word, op_span))) = word(rest) else {
        return failure(PErr::expected(
            &rest,
            "a nonblocking operation (`isend`, `irecv`, `iallreduce`, ...)",
        ));
    };
    match op_word {
        "isend" => p2p(P2pOp::Isend, Some(handle))(after),
        "irecv" => p2p(P2pOp::Irecv, Some(handle))(after),
        _ => match collective_op(op_word) {
            Some((op, true)) => collective(op, true, Some(handle))(after),
            Some((op, false)) => failure(
                PErr::invalid(
                    &rest,
                    op_span,
                    format!("`{op_word}` is blocking and returns no request"),
                )
                .with_hint(format!("the nonblocking form is `i{}`", op.keyword())),
            ),
            None => match op_word {
                "send" | "recv" => failure(
                    PErr::invalid(
                        &rest,
                        op_span,
                        format!("`{op_word}` is blocking and returns no request"),
                    )
                    .with_hint(format!("the nonblocking form is `i{op_word}`")),
                ),
                _ => failure(PErr::expected(
                    &rest,
                    "a nonblocking operation (`isend`, `irecv`, `iallreduce`, ...)",
                )),
            },
        },
    }
}

fn wait(head: &str) -> impl FnOnce(Tokens) -> PResult<Simple> + '_ {
    move |input| {
        let op = match head {
            "wait" => WaitOp::Wait,
            "waitall" => WaitOp::Waitall,
            "waitany" => WaitOp::Waitany,
            _ => WaitOp::Test,
        };
        let (rest, handles) = match op {
            WaitOp::Wait | WaitOp::Test => map(cut(name("a request")), |h| vec![h]).parse(input)?,
            WaitOp::Waitall | WaitOp::Waitany => {
                cut(separated_list1(punct(TokKind::Comma), name("a request"))).parse(input)?
            }
        };
        let (rest, clauses) = clauses(Allowed::NONE)(rest)?;
        Ok((
            rest,
            Simple {
                kind: StmtKind::Wait(Wait { op, handles }),
                site: clauses.site,
            },
        ))
    }
}

/// `comm NAME = split(PARENT, color = EXPR[, key = EXPR]) | dup(PARENT) |
/// cart_sub(PARENT, keep = [DIMS])`
fn comm_decl(input: Tokens) -> PResult<Simple> {
    let (rest, (comm_name, _)) =
        cut((name("a communicator"), punct(TokKind::Assign))).parse(input)?;
    let parent = || name("a communicator");
    let keyword_arg = |key: &'static str| preceded((kw(key), punct(TokKind::Assign)), cut(expr));
    let split = preceded(
        kw("split"),
        cut(delimited(
            punct(TokKind::LParen),
            (
                parent(),
                preceded(punct(TokKind::Comma), keyword_arg("color")),
                opt(preceded(punct(TokKind::Comma), keyword_arg("key"))),
            ),
            punct(TokKind::RParen),
        )),
    )
    .map(|(parent, color, key)| CommDef::Split { parent, color, key });
    let dup = preceded(
        kw("dup"),
        cut(delimited(
            punct(TokKind::LParen),
            parent(),
            punct(TokKind::RParen),
        )),
    )
    .map(|parent| CommDef::Dup { parent });
    let cart_sub = preceded(
        kw("cart_sub"),
        cut(delimited(
            punct(TokKind::LParen),
            (
                parent(),
                preceded(
                    (punct(TokKind::Comma), kw("keep"), punct(TokKind::Assign)),
                    delimited(
                        punct(TokKind::LBracket),
                        separated_list1(punct(TokKind::Comma), small_uint),
                        punct(TokKind::RBracket),
                    ),
                ),
            ),
            punct(TokKind::RParen),
        )),
    )
    .map(|(parent, keep)| CommDef::CartSub { parent, keep });
    let (rest, def) = alt((split, dup, cart_sub))
        .parse(rest)
        .map_err(|e| match e {
            Err::Error(e) if e.at == rest.offset => Err::Failure(PErr::expected(
                &rest,
                "`split(...)`, `dup(...)` or `cart_sub(...)`",
            )),
            other => other,
        })?;
    let (rest, clauses) = clauses(Allowed::NONE)(rest)?;
    Ok((
        rest,
        Simple {
            kind: StmtKind::CommDecl(Box::new(CommDecl {
                name: comm_name,
                def,
            })),
            site: clauses.site,
        },
    ))
}

fn spanned_peer(input: Tokens) -> PResult<Spanned<Peer>> {
    let start = input.first().map(|t| t.span);
    let (rest, peer) = peer(input)?;
    let end = input
        .toks
        .get(rest.offset.saturating_sub(input.offset).saturating_sub(1))
        .map(|t| t.span);
    let pos = match (start, end) {
        (Some(a), Some(b)) => Pos::Source(a.to(b)),
        _ => Pos::Derived,
    };
    Ok((rest, Spanned { value: peer, pos }))
}

/// `any`, `source`, `rank(EXPR)` or a direction.
fn peer(input: Tokens) -> PResult<Peer> {
    // The common argument-free words, without trying every alternative first (the
    // alternatives before them all fail on a word that is neither `any` nor `rank`).
    if let Some(tok) = input.first().filter(|t| t.kind == TokKind::Word) {
        let axis = |dim, forward| {
            Peer::Dir(Direction::Axis(AxisDir {
                dim,
                forward,
                spelling: AxisSpelling::Compass,
            }))
        };
        let fast = match input.text(tok) {
            "any" => Some(Peer::Any),
            "source" => Some(Peer::Source),
            "east" => Some(axis(0, true)),
            "west" => Some(axis(0, false)),
            "north" => Some(axis(1, true)),
            "south" => Some(axis(1, false)),
            "up" => Some(axis(2, true)),
            "down" => Some(axis(2, false)),
            "next" => Some(Peer::Dir(Direction::Next)),
            "prev" => Some(Peer::Dir(Direction::Prev)),
            "parent" => Some(Peer::Dir(Direction::Parent)),
            "hub" => Some(Peer::Dir(Direction::Hub)),
            _ => None,
        };
        if let Some(peer) = fast {
            return Ok((nom::Input::take_from(&input, 1), peer));
        }
    }
    let arg = |i| {
        delimited(
            punct(TokKind::LParen),
            cut(expr),
            cut(punct(TokKind::RParen)),
        )
        .parse(i)
    };
    let signed_axis = |i| {
        let (rest, forward) = alt((
            value(true, punct(TokKind::Plus)),
            value(false, punct(TokKind::Minus)),
        ))
        .parse(i)?;
        let (after, (text, span)) = cut(word).parse(rest)?;
        if text == "d" {
            // `+d(EXPR)`: the dimension an expression gives.
            let (after, dim) = cut(arg).parse(after)?;
            return Ok((after, Peer::Dir(Direction::AxisOf { dim, forward })));
        }
        let (dim, spelling) = match text {
            "x" => (0, AxisSpelling::Letter),
            "y" => (1, AxisSpelling::Letter),
            "z" => (2, AxisSpelling::Letter),
            _ => match text.strip_prefix('d').and_then(|n| n.parse::<u32>().ok()) {
                Some(n) if text.len() > 1 && !text[1..].starts_with('+') => {
                    (n, AxisSpelling::Numbered)
                }
                _ => {
                    return failure(
                        PErr::invalid(&rest, span, format!("`{text}` is not a grid axis"))
                            .with_hint(
                                "axes are `x`, `y`, `z`, `d0`, `d1`, ... or `d(EXPR)`, as in `+x`, `-d3` or `+d(dim)`",
                            ),
                    )
                }
            },
        };
        Ok((
            after,
            Peer::Dir(Direction::Axis(AxisDir {
                dim,
                forward,
                spelling,
            })),
        ))
    };
    let compass = |i| {
        let (rest, (text, _)) = word(i)?;
        let (dim, forward) = match text {
            "east" => (0, true),
            "west" => (0, false),
            "north" => (1, true),
            "south" => (1, false),
            "up" => (2, true),
            "down" => (2, false),
            _ => return error(PErr::expected(&i, "a peer")),
        };
        Ok((
            rest,
            Peer::Dir(Direction::Axis(AxisDir {
                dim,
                forward,
                spelling: AxisSpelling::Compass,
            })),
        ))
    };
    let signed_int = |i| {
        let (rest, sign) = opt(alt((
            value(1i64, punct(TokKind::Plus)),
            value(-1i64, punct(TokKind::Minus)),
        )))
        .parse(i)?;
        let (rest, n) = uint(rest)?;
        match i64::try_from(n.value) {
            Ok(v) => Ok((rest, sign.unwrap_or(1) * v)),
            Err(_) => failure(PErr::invalid(
                &i,
                n.pos.span().unwrap_or_default(),
                "offset is too large",
            )),
        }
    };
    let result = alt((
        value(Peer::Any, kw("any")),
        value(Peer::Source, kw("source")),
        map(preceded(kw("rank"), cut(arg)), Peer::Rank),
        signed_axis,
        compass,
        value(Peer::Dir(Direction::Next), kw("next")),
        value(Peer::Dir(Direction::Prev), kw("prev")),
        value(Peer::Dir(Direction::Parent), kw("parent")),
        value(Peer::Dir(Direction::Hub), kw("hub")),
        map(preceded(kw("child"), cut(arg)), |e| {
            Peer::Dir(Direction::Child(e))
        }),
        map(preceded(kw("leaf"), cut(arg)), |e| {
            Peer::Dir(Direction::Leaf(e))
        }),
        map(preceded(kw("bit"), cut(arg)), |e| {
            Peer::Dir(Direction::Bit(e))
        }),
        map(preceded(kw("neighbor"), cut(arg)), |e| {
            Peer::Dir(Direction::Neighbor(e))
        }),
        map(
            preceded(
                kw("shift"),
                cut(delimited(
                    punct(TokKind::LParen),
                    (expr, punct(TokKind::Comma), expr),
                    punct(TokKind::RParen),
                )),
            ),
            |(dim, _, disp)| Peer::Dir(Direction::Shift { dim, disp }),
        ),
        map(
            preceded(
                kw("offset"),
                cut(delimited(
                    punct(TokKind::LParen),
                    separated_list1(punct(TokKind::Comma), signed_int),
                    punct(TokKind::RParen),
                )),
            ),
            |v| Peer::Dir(Direction::Offset(v)),
        ),
    ))
    .parse(input);
    match result {
        Err(Err::Error(e)) if e.at <= input.offset + 1 => {
            let err = PErr::expected(
                &input,
                "a peer: a direction (`east`, `+x`, `next`, `parent`, `child(i)`, ...), `rank(EXPR)` or `any`",
            );
            let found = input.first().filter(|t| t.kind == TokKind::Word);
            match found.and_then(|t| peer_hint(input.text(t))) {
                Some(hint) => failure(err.with_hint(hint)),
                None => failure(err),
            }
        }
        other => other,
    }
}

/// The words that begin a peer, for "did you mean".
const PEER_WORDS: &[&str] = &[
    "any", "source", "rank", "east", "west", "north", "south", "up", "down", "next", "prev",
    "parent", "hub", "child", "leaf", "bit", "neighbor", "shift", "offset",
];

/// A hint for a word that is no peer: the peer it is a near miss of, or, for words
/// other tools use, the directions that mean them here.
fn peer_hint(word: &str) -> Option<String> {
    let lower = word.to_ascii_lowercase();
    let synonym = match lower.as_str() {
        "left" => Some("`prev` (a ring or chain) or `west` (a grid)"),
        "right" => Some("`next` (a ring or chain) or `east` (a grid)"),
        "previous" | "pred" | "predecessor" => Some("`prev`"),
        "succ" | "successor" => Some("`next`"),
        "top" => Some("`north` (a grid) or `parent` (a tree)"),
        "bottom" => Some("`south` (a grid)"),
        "root" => Some("`parent` (a tree), or `rank(0)`"),
        "children" | "kid" => Some("`child(i)`"),
        "neighbour" | "neighbours" | "neighbors" => Some("`neighbor(i)`"),
        "anysource" | "any_source" | "wildcard" => Some("`any`"),
        _ => None,
    };
    if let Some(s) = synonym {
        return Some(format!("did you mean {s}?"));
    }
    // A peer in other case (`East`) first, then the nearest spelling.
    let best = PEER_WORDS
        .iter()
        .copied()
        .find(|w| *w == lower)
        .or_else(|| super::closest(&lower, PEER_WORDS.iter().copied()))?;
    let call = matches!(
        best,
        "rank" | "child" | "leaf" | "bit" | "neighbor" | "shift" | "offset"
    );
    Some(if call {
        format!("did you mean `{best}(...)`?")
    } else {
        format!("did you mean `{best}`?")
    })
}

/// Which trailing clauses a statement accepts.
#[derive(Clone, Copy)]
struct Allowed {
    tag: bool,
    root: bool,
    comm: bool,
    window: bool,
}

impl Allowed {
    const NONE: Allowed = Allowed {
        tag: false,
        root: false,
        comm: false,
        window: false,
    };
    const P2P: Allowed = Allowed {
        tag: true,
        root: false,
        comm: true,
        window: false,
    };
    /// A nonblocking point-to-point operation (`req NAME = isend/irecv`).
    const REQ_P2P: Allowed = Allowed {
        tag: true,
        root: false,
        comm: true,
        window: true,
    };
    const COLLECTIVE: Allowed = Allowed {
        tag: false,
        root: false,
        comm: true,
        window: false,
    };
    const ROOTED: Allowed = Allowed {
        tag: false,
        root: true,
        comm: true,
        window: false,
    };
}

#[derive(Default)]
struct Clauses {
    tag: Option<Spanned<u32>>,
    root: Option<Expr>,
    comm: Option<Ident>,
    window: Option<Spanned<u64>>,
    site: Option<Site>,
}

/// `tag N`, `root EXPR`, `on COMM`, `window N` in any order, then `@ "site"`.
fn clauses(allowed: Allowed) -> impl Fn(Tokens) -> PResult<Clauses> {
    move |mut input| {
        let mut out = Clauses::default();
        while let Some(tok) = input.first() {
            let text = input.text(tok);
            let (is_allowed, already) = match text {
                "tag" => (allowed.tag, out.tag.is_some()),
                "root" => (allowed.root, out.root.is_some()),
                "on" => (allowed.comm, out.comm.is_some()),
                "window" => (allowed.window, out.window.is_some()),
                _ if tok.kind == TokKind::At => (true, out.site.is_some()),
                _ => break,
            };
            if tok.kind != TokKind::Word && tok.kind != TokKind::At {
                break;
            }
            if !is_allowed {
                let hint = match text {
                    "tag" => "only point-to-point operations have tags",
                    "root" => "only bcast, reduce, gather(v) and scatter(v) have a root",
                    "window" => "only `req NAME = isend ...` and `req NAME = irecv ...` keep a window of operations in flight",
                    _ => "only communication operations run on a communicator",
                };
                return failure(
                    PErr::invalid(
                        &input,
                        tok.span,
                        format!("this statement takes no `{text}`"),
                    )
                    .with_hint(hint),
                );
            }
            if already {
                return failure(PErr::invalid(
                    &input,
                    tok.span,
                    format!(
                        "`{}` is given twice",
                        if text == "@" { "@ site" } else { text }
                    ),
                ));
            }
            let rest = nom::Input::take_from(&input, 1);
            input = match text {
                "tag" => {
                    let (rest, tag) = cut(small_uint).parse(rest)?;
                    out.tag = Some(tag);
                    rest
                }
                "root" => {
                    let (rest, root) = cut(expr).parse(rest)?;
                    out.root = Some(root);
                    rest
                }
                "on" => {
                    let (rest, comm) = cut(name("a communicator")).parse(rest)?;
                    out.comm = Some(comm);
                    rest
                }
                "window" => {
                    let (rest, w) = cut(uint).parse(rest)?;
                    out.window = Some(w);
                    rest
                }
                _ => {
                    let (rest, (text, span)) = cut(string).parse(rest)?;
                    out.site = Some(Site {
                        text,
                        pos: Pos::Source(tok.span.to(span)),
                    });
                    rest
                }
            };
        }
        Ok((input, out))
    }
}

/// A call-site annotation alone, after a loop's closing brace.
pub fn site_clause(input: Tokens) -> PResult<Option<Site>> {
    let (rest, clauses) = clauses(Allowed::NONE)(input)?;
    Ok((rest, clauses.site))
}

/// `ring`, `chain`, `grid(4, 4[, periodic = [true, false]])`, `torus(4, 4)`,
/// `hypercube`, `tree(2)`, `star`, `complete`, `graph(0: [1], 1: [0])`.
pub fn topology(input: Tokens) -> PResult<Topology> {
    let dims = |i| separated_list1(punct(TokKind::Comma), uint).parse(i);
    let bool_lit = |i| alt((value(true, kw("true")), value(false, kw("false")))).parse(i);
    let grid = preceded(
        kw("grid"),
        cut(delimited(
            punct(TokKind::LParen),
            (
                dims,
                opt(preceded(
                    (
                        punct(TokKind::Comma),
                        kw("periodic"),
                        punct(TokKind::Assign),
                    ),
                    cut(delimited(
                        punct(TokKind::LBracket),
                        separated_list1(punct(TokKind::Comma), bool_lit),
                        punct(TokKind::RBracket),
                    )),
                )),
            ),
            punct(TokKind::RParen),
        )),
    );
    let torus = preceded(
        kw("torus"),
        cut(delimited(
            punct(TokKind::LParen),
            dims,
            punct(TokKind::RParen),
        )),
    );
    let entry = (
        uint,
        cut(punct(TokKind::Colon)),
        cut(delimited(
            punct(TokKind::LBracket),
            opt(separated_list1(punct(TokKind::Comma), uint)),
            punct(TokKind::RBracket),
        )),
    );
    let graph = preceded(
        kw("graph"),
        cut(delimited(
            punct(TokKind::LParen),
            separated_list1(punct(TokKind::Comma), entry),
            punct(TokKind::RParen),
        )),
    );
    let start = input;
    let result = alt((
        value(Topology::Ring, kw("ring")),
        value(Topology::Chain, kw("chain")),
        value(Topology::Hypercube, kw("hypercube")),
        value(Topology::Star, kw("star")),
        value(Topology::Complete, kw("complete")),
        map(
            preceded(
                kw("tree"),
                cut(delimited(
                    punct(TokKind::LParen),
                    uint,
                    punct(TokKind::RParen),
                )),
            ),
            |k| Topology::Tree { arity: k.value },
        ),
        map(grid, |(dims, periodic)| {
            let dims: Vec<u64> = dims.iter().map(|d| d.value).collect();
            let periodic = periodic.unwrap_or_else(|| vec![false; dims.len()]);
            Topology::Grid { dims, periodic }
        }),
        map(torus, |dims| {
            let dims: Vec<u64> = dims.iter().map(|d| d.value).collect();
            let periodic = vec![true; dims.len()];
            Topology::Grid { dims, periodic }
        }),
        map(graph, |entries| Topology::Graph {
            neighbors: entries
                .into_iter()
                .map(|(r, _, list)| {
                    (
                        r.value,
                        list.unwrap_or_default().iter().map(|n| n.value).collect(),
                    )
                })
                .collect(),
        }),
    ))
    .parse(input);
    match result {
        Err(Err::Error(e)) if e.at == start.offset => failure(PErr::expected(
            &start,
            "a topology: `ring`, `chain`, `grid(...)`, `torus(...)`, `hypercube`, `tree(k)`, `star`, `complete` or `graph(...)`",
        )),
        other => other,
    }
}

/// Header and statement keywords, for recovery and "did you mean" hints.
pub const STATEMENT_WORDS: &[&str] = &[
    "compute", "send", "recv", "sendrecv", "isend", "irecv", "req", "wait", "waitall", "waitany",
    "test", "comm", "loop", "if", "while",
];

pub const HEADER_WORDS: &[&str] = &["skeleton", "ranks", "topology", "app_time", "memory"];

/// Whether `word` can start a statement or header line.
pub fn starts_statement(word: &str) -> bool {
    STATEMENT_WORDS.contains(&word) || HEADER_WORDS.contains(&word) || collective_op(word).is_some()
}
