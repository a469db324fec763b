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
//!
//! Two limits keep every input from overflowing the stack; beyond them an expression is
//! a syntax error. Parentheses, `not` and `-` may nest at most [`MAX_EXPR_NESTING`]
//! deep, which bounds the parser's recursion; and one expression may hold at most
//! [`MAX_EXPR_COMPLEXITY`] operators and parentheses, which bounds the depth of the tree
//! it builds (a chain `1 + 1 + ...` is as deep as it is long) that every later pass
//! walks recursively. Both leave room within a 2 MiB thread stack in a debug build.

use nom::branch::alt;
use nom::combinator::{cut, map, opt, value};
use nom::multi::separated_list1;
use std::cell::Cell;

use nom::{Err, Parser};

use super::tokens::{
    error, failure, is_keyword, kw, punct, small_uint, uint, PErr, PResult, Tokens,
};
use crate::ast::{BinOp, Expr, ExprKind, Ident, Pos, Span, UnaryOp};
use crate::lexer::TokKind;

/// The most operators, `not`s, negations and parenthesis pairs one expression may hold.
pub const MAX_EXPR_COMPLEXITY: u32 = 128;

/// How deeply parentheses, `not` and `-` may nest in one expression.
pub const MAX_EXPR_NESTING: u32 = 16;

thread_local! {
    /// What the expression being parsed may still spend of [`MAX_EXPR_COMPLEXITY`].
    static BUDGET: Cell<u32> = const { Cell::new(MAX_EXPR_COMPLEXITY) };
    /// How many parentheses, `not`s and `-`s enclose the current position.
    static NESTING: Cell<u32> = const { Cell::new(0) };
}

/// A whole expression, with a fresh complexity budget.
pub fn expr(input: Tokens) -> PResult<Expr> {
    let outer = (BUDGET.replace(MAX_EXPR_COMPLEXITY), NESTING.replace(0));
    let result = or_expr(input);
    BUDGET.set(outer.0);
    NESTING.set(outer.1);
    result
}

/// Runs `inner` one nesting level deeper, for the parenthesis, `not` or `-` at `span`.
fn nested<'a>(
    input: &Tokens<'a>,
    span: Span,
    inner: impl FnOnce() -> PResult<'a, Expr>,
) -> PResult<'a, Expr> {
    let depth = NESTING.get();
    if depth >= MAX_EXPR_NESTING {
        return failure(
            PErr::invalid(
                input,
                span,
                format!(
                    "this expression is nested too deeply (at most {MAX_EXPR_NESTING} levels of parentheses, `not` and `-`)"
                ),
            )
            .with_hint("simplify the expression"),
        );
    }
    NESTING.set(depth + 1);
    let result = inner();
    NESTING.set(depth);
    result
}

/// Spends one unit of the budget for the operator or parenthesis at `span`.
fn spend<'a>(input: &Tokens<'a>, span: Span) -> Result<(), Err<PErr>> {
    let left = BUDGET.get();
    if left == 0 {
        return failure(
            PErr::invalid(
                input,
                span,
                format!(
                    "this expression is too complex (more than {MAX_EXPR_COMPLEXITY} operators and parentheses)"
                ),
            )
            .with_hint("split the computation, or use `per_rank(...)` lists for per-rank values"),
        );
    }
    BUDGET.set(left - 1);
    Ok(())
}

fn or_expr(input: Tokens) -> PResult<Expr> {
    left_assoc(
        input,
        and_expr,
        |t, i| t.kind == TokKind::Word && i.text(t) == "or",
        |i| value(BinOp::Or, kw("or")).parse(i),
    )
}

fn and_expr(input: Tokens) -> PResult<Expr> {
    left_assoc(
        input,
        not_expr,
        |t, i| t.kind == TokKind::Word && i.text(t) == "and",
        |i| value(BinOp::And, kw("and")).parse(i),
    )
}

fn not_expr(input: Tokens) -> PResult<Expr> {
    let is_not = input
        .first()
        .is_some_and(|t| t.kind == TokKind::Word && input.text(t) == "not");
    if let Some(Ok((rest, start))) = is_not.then(|| kw("not")(input)) {
        spend(&input, start)?;
        let (rest, operand) = nested(&input, start, || cut(not_expr).parse(rest))?;
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
    let (rest, lhs) = xor_expr(input)?;
    let is_cmp = rest.first().is_some_and(|t| {
        matches!(
            t.kind,
            TokKind::EqEq | TokKind::Ne | TokKind::Lt | TokKind::Le | TokKind::Gt | TokKind::Ge
        )
    });
    if !is_cmp {
        return Ok((rest, lhs));
    }
    let op = alt((
        value(BinOp::Eq, punct(TokKind::EqEq)),
        value(BinOp::Ne, punct(TokKind::Ne)),
        value(BinOp::Le, punct(TokKind::Le)),
        value(BinOp::Lt, punct(TokKind::Lt)),
        value(BinOp::Ge, punct(TokKind::Ge)),
        value(BinOp::Gt, punct(TokKind::Gt)),
    ));
    let (rest, op) = match opt(op).parse(rest)? {
        (after_op, Some(op)) => {
            spend(&rest, op_span(&rest))?;
            (after_op, op)
        }
        (rest, None) => return Ok((rest, lhs)),
    };
    let (rest, rhs) = cut(xor_expr).parse(rest)?;
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

fn xor_expr(input: Tokens) -> PResult<Expr> {
    left_assoc(
        input,
        sum_expr,
        |t, _| t.kind == TokKind::Caret,
        |i| value(BinOp::Xor, punct(TokKind::Caret)).parse(i),
    )
}

fn sum_expr(input: Tokens) -> PResult<Expr> {
    left_assoc(
        input,
        term_expr,
        |t, _| matches!(t.kind, TokKind::Plus | TokKind::Minus),
        |i| {
            alt((
                value(BinOp::Add, punct(TokKind::Plus)),
                value(BinOp::Sub, punct(TokKind::Minus)),
            ))
            .parse(i)
        },
    )
}

fn term_expr(input: Tokens) -> PResult<Expr> {
    left_assoc(
        input,
        unary_expr,
        |t, _| matches!(t.kind, TokKind::Star | TokKind::Slash | TokKind::Percent),
        |i| {
            alt((
                value(BinOp::Mul, punct(TokKind::Star)),
                value(BinOp::Div, punct(TokKind::Slash)),
                value(BinOp::Rem, punct(TokKind::Percent)),
            ))
            .parse(i)
        },
    )
}

fn unary_expr(input: Tokens) -> PResult<Expr> {
    let minus = input.first().is_some_and(|t| t.kind == TokKind::Minus);
    if let Some(Ok((rest, start))) = minus.then(|| punct(TokKind::Minus)(input)) {
        spend(&input, start)?;
        let (rest, operand) = nested(&input, start, || cut(unary_expr).parse(rest))?;
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
    // `per_rank(3, -1, 0)`: whole numbers, one per rank.
    // A whole number of a list, perhaps negative.
    let signed_int = |i| {
        let (rest, minus) = opt(punct(TokKind::Minus)).parse(i)?;
        let (rest, n) = uint(rest)?;
        let bad = || {
            PErr::invalid(
                &i,
                n.pos.span().unwrap_or_default(),
                format!("`{}` is too large (at most {})", n.value, i64::MAX),
            )
        };
        let v = i64::try_from(n.value).map_err(|_| Err::Failure(bad()))?;
        Ok((rest, if minus.is_some() { -v } else { v }))
    };
    let per_rank = |i| {
        let (rest, start) = kw("per_rank")(i)?;
        let (rest, (_, values, end)) = cut((
            punct(TokKind::LParen),
            separated_list1(punct(TokKind::Comma), signed_int),
            punct(TokKind::RParen),
        ))
        .parse(rest)?;
        Ok((rest, leaf(ExprKind::PerRank(values), start.to(end))))
    };
    // `[1, 1, 2][dim]`: the value at an index of a list of whole numbers.
    let int_pick = |i| {
        let (rest, start) = punct(TokKind::LBracket)(i)?;
        let (rest, values) = cut(separated_list1(punct(TokKind::Comma), signed_int)).parse(rest)?;
        let (rest, _) = cut(punct(TokKind::RBracket)).parse(rest)?;
        let (rest, _) = cut(punct(TokKind::LBracket)).parse(rest)?;
        spend(&i, start)?;
        let (rest, index) = nested(&i, start, || cut(or_expr).parse(rest))?;
        let (rest, end) = cut(punct(TokKind::RBracket)).parse(rest)?;
        Ok((
            rest,
            leaf(ExprKind::Pick(values, Box::new(index)), start.to(end)),
        ))
    };
    let parens = |i| {
        let (rest, start) = punct(TokKind::LParen)(i)?;
        spend(&i, start)?;
        let (rest, mut inner) = nested(&i, start, || cut(or_expr).parse(rest))?;
        let (rest, end) = cut(punct(TokKind::RParen)).parse(rest)?;
        // Parentheses are not kept in the IR; the span grows to cover them.
        inner.pos = Pos::Source(start.to(end));
        Ok((rest, inner))
    };
    // The alternative the first token selects; the others would fail on it.
    if let Some(tok) = input.first() {
        let fast = match (tok.kind, input.text(tok)) {
            (TokKind::Number, _) => Some(int(input)),
            (TokKind::Word, "true") => Some(Ok((
                input_after(&input),
                leaf(ExprKind::Bool(true), tok.span),
            ))),
            (TokKind::Word, "false") => Some(Ok((
                input_after(&input),
                leaf(ExprKind::Bool(false), tok.span),
            ))),
            (TokKind::Word, "rank") => {
                Some(Ok((input_after(&input), leaf(ExprKind::Rank, tok.span))))
            }
            (TokKind::Word, "nranks") => {
                Some(Ok((input_after(&input), leaf(ExprKind::NRanks, tok.span))))
            }
            (TokKind::Word, "coord") => Some(coord(input)),
            (TokKind::Word, "per_rank") => Some(per_rank(input)),
            (TokKind::LBracket, _) => Some(int_pick(input)),
            (TokKind::Word, text) if !is_keyword(text) && !RESERVED.contains(&text) => Some(Ok((
                input_after(&input),
                leaf(
                    ExprKind::Var(Ident {
                        name: text.to_string(),
                        pos: Pos::Source(tok.span),
                    }),
                    tok.span,
                ),
            ))),
            _ => None,
        };
        if let Some(result) = fast {
            return result;
        }
    }
    let result = alt((
        int,
        map(kw("true"), |s| leaf(ExprKind::Bool(true), s)),
        map(kw("false"), |s| leaf(ExprKind::Bool(false), s)),
        map(kw("rank"), |s| leaf(ExprKind::Rank, s)),
        map(kw("nranks"), |s| leaf(ExprKind::NRanks, s)),
        coord,
        parens,
        int_pick,
    ))
    .parse(input);
    match result {
        Err(Err::Error(e)) if e.at == input.offset => error(
            PErr::expected(
                &input,
                "an expression (a number, `rank`, `nranks`, `coord(i)`, a loop variable, ...)",
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

/// Words of expressions that are not keywords of statements: never a loop variable.
const RESERVED: &[&str] = &[
    "true", "false", "rank", "nranks", "coord", "not", "and", "or",
];

/// The input after its first token.
fn input_after<'a>(input: &Tokens<'a>) -> Tokens<'a> {
    nom::Input::take_from(input, 1)
}

/// `operand (op operand)*`; `could_be_op` rules out tokens `op` cannot start with.
fn left_assoc<'a>(
    input: Tokens<'a>,
    operand: fn(Tokens<'a>) -> PResult<'a, Expr>,
    could_be_op: fn(crate::lexer::Tok, &Tokens<'a>) -> bool,
    op: impl Fn(Tokens<'a>) -> PResult<'a, BinOp>,
) -> PResult<'a, Expr> {
    let (mut rest, mut lhs) = operand(input)?;
    loop {
        if !rest.first().is_some_and(|t| could_be_op(t, &rest)) {
            return Ok((rest, lhs));
        }
        match op(rest) {
            Ok((after_op, bin)) => {
                spend(&rest, op_span(&rest))?;
                let (after_rhs, rhs) = cut(operand).parse(after_op)?;
                lhs = binary(bin, lhs, rhs);
                rest = after_rhs;
            }
            Err(Err::Error(_)) => return Ok((rest, lhs)),
            Err(other) => return Err(other),
        }
    }
}

/// The span of the operator token that `input` starts with.
fn op_span(input: &Tokens) -> Span {
    input.first().map(|t| t.span).unwrap_or_default()
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
