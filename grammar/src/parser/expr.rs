//! Expressions over the rank: precedence climbing built from nom combinators.
//!
//! ```text
//! expr  := and ("or" and)*
//! and   := not ("and" not)*
//! not   := "not" not | cmp
//! cmp   := sum (("==" | "!=" | "<" | "<=" | ">" | ">=") sum)?
//! sum   := term (("+" | "-") term)*
//! term  := unary (("*" | "/" | "%") unary)*
//! unary := "-" unary | atom
//! atom  := INT | "true" | "false" | "rank" | "nranks" | "coord" "(" INT ")" | "(" expr ")"
//! ```

use nom::branch::alt;
use nom::combinator::{cut, map, opt, value};
use nom::{Err, Parser};

use super::tokens::{error, failure, kw, punct, small_uint, uint, PErr, PResult, Tokens};
use crate::ast::{BinOp, Expr, ExprKind, Pos, Span, UnaryOp};
use crate::lexer::TokKind;

pub fn expr(input: Tokens) -> PResult<Expr> {
    left_assoc(input, and_expr, |i| value(BinOp::Or, kw("or")).parse(i))
}

fn and_expr(input: Tokens) -> PResult<Expr> {
    left_assoc(input, not_expr, |i| value(BinOp::And, kw("and")).parse(i))
}

fn not_expr(input: Tokens) -> PResult<Expr> {
    if let Ok((rest, start)) = kw("not")(input) {
        let (rest, operand) = cut(not_expr).parse(rest)?;
        let pos = join(Pos::Source(start), operand.pos);
        return Ok((
            rest,
            Expr {
                kind: ExprKind::Unary(UnaryOp::Not, Box::new(operand)),
                pos,
            },
        ));
    }
    cmp_expr(input)
}

fn cmp_expr(input: Tokens) -> PResult<Expr> {
    let (rest, lhs) = sum_expr(input)?;
    let op = alt((
        value(BinOp::Eq, punct(TokKind::EqEq)),
        value(BinOp::Ne, punct(TokKind::Ne)),
        value(BinOp::Le, punct(TokKind::Le)),
        value(BinOp::Lt, punct(TokKind::Lt)),
        value(BinOp::Ge, punct(TokKind::Ge)),
        value(BinOp::Gt, punct(TokKind::Gt)),
    ));
    let (rest, tail) = opt((op, cut(sum_expr))).parse(rest)?;
    let Some((op, rhs)) = tail else {
        return Ok((rest, lhs));
    };
    // Comparisons do not chain: `a < b < c` is almost always a mistake.
    if let Some(tok) = rest.first() {
        if matches!(
            tok.kind,
            TokKind::EqEq | TokKind::Ne | TokKind::Lt | TokKind::Le | TokKind::Gt | TokKind::Ge
        ) {
            return failure(
                PErr::invalid(&rest, tok.span, "comparisons cannot be chained")
                    .with_hint("combine comparisons with `and`, e.g. `0 < rank and rank < 4`"),
            );
        }
    }
    Ok((rest, binary(op, lhs, rhs)))
}

fn sum_expr(input: Tokens) -> PResult<Expr> {
    left_assoc(input, term_expr, |i| {
        alt((
            value(BinOp::Add, punct(TokKind::Plus)),
            value(BinOp::Sub, punct(TokKind::Minus)),
        ))
        .parse(i)
    })
}

fn term_expr(input: Tokens) -> PResult<Expr> {
    left_assoc(input, unary_expr, |i| {
        alt((
            value(BinOp::Mul, punct(TokKind::Star)),
            value(BinOp::Div, punct(TokKind::Slash)),
            value(BinOp::Rem, punct(TokKind::Percent)),
        ))
        .parse(i)
    })
}

fn unary_expr(input: Tokens) -> PResult<Expr> {
    if let Ok((rest, start)) = punct(TokKind::Minus)(input) {
        let (rest, operand) = cut(unary_expr).parse(rest)?;
        let pos = join(Pos::Source(start), operand.pos);
        return Ok((
            rest,
            Expr {
                kind: ExprKind::Unary(UnaryOp::Neg, Box::new(operand)),
                pos,
            },
        ));
    }
    atom(input)
}

fn atom(input: Tokens) -> PResult<Expr> {
    let leaf = |kind: ExprKind, span: Span| Expr {
        kind,
        pos: Pos::Source(span),
    };
    let int = |i| {
        let (rest, n) = uint(i)?;
        match i64::try_from(n.value) {
            Ok(v) => Ok((
                rest,
                Expr {
                    kind: ExprKind::Int(v),
                    pos: n.pos,
                },
            )),
            Err(_) => failure(PErr::invalid(
                &i,
                n.pos.span().unwrap_or_default(),
                format!("`{}` is too large (at most {})", n.value, i64::MAX),
            )),
        }
    };
    let coord = |i| {
        let (rest, start) = kw("coord")(i)?;
        let (rest, (_, dim, end)) =
            cut((punct(TokKind::LParen), small_uint, punct(TokKind::RParen))).parse(rest)?;
        Ok((rest, leaf(ExprKind::Coord(dim.value), start.to(end))))
    };
    let parens = |i| {
        let (rest, start) = punct(TokKind::LParen)(i)?;
        let (rest, mut inner) = cut(expr).parse(rest)?;
        let (rest, end) = cut(punct(TokKind::RParen)).parse(rest)?;
        // Parentheses are not kept in the IR; the span grows to cover them.
        inner.pos = Pos::Source(start.to(end));
        Ok((rest, inner))
    };
    let result = alt((
        int,
        map(kw("true"), |s| leaf(ExprKind::Bool(true), s)),
        map(kw("false"), |s| leaf(ExprKind::Bool(false), s)),
        map(kw("rank"), |s| leaf(ExprKind::Rank, s)),
        map(kw("nranks"), |s| leaf(ExprKind::NRanks, s)),
        coord,
        parens,
    ))
    .parse(input);
    match result {
        Err(Err::Error(e)) if e.at == input.offset => error(
            PErr::expected(
                &input,
                "an expression (a number, `rank`, `nranks`, `coord(i)`, ...)",
            )
            .with_hint_if(e.hint),
        ),
        other => other,
    }
}

impl PErr {
    fn with_hint_if(mut self, hint: Option<String>) -> PErr {
        if hint.is_some() {
            self.hint = hint;
        }
        self
    }
}

fn left_assoc<'a>(
    input: Tokens<'a>,
    operand: fn(Tokens<'a>) -> PResult<'a, Expr>,
    op: impl Fn(Tokens<'a>) -> PResult<'a, BinOp>,
) -> PResult<'a, Expr> {
    let (mut rest, mut lhs) = operand(input)?;
    loop {
        match op(rest) {
            Ok((after_op, bin)) => {
                let (after_rhs, rhs) = cut(operand).parse(after_op)?;
                lhs = binary(bin, lhs, rhs);
                rest = after_rhs;
            }
            Err(Err::Error(_)) => return Ok((rest, lhs)),
            Err(other) => return Err(other),
        }
    }
}

fn binary(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
    let pos = join(lhs.pos, rhs.pos);
    Expr {
        kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
        pos,
    }
}

fn join(a: Pos, b: Pos) -> Pos {
    match (a, b) {
        (Pos::Source(a), Pos::Source(b)) => Pos::Source(a.to(b)),
        (Pos::Source(a), Pos::Derived) | (Pos::Derived, Pos::Source(a)) => Pos::Source(a),
        (Pos::Derived, Pos::Derived) => Pos::Derived,
    }
}
