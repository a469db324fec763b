//! The token stream as a nom input, the parse error type, and primitive parsers
//! (keywords, names, punctuation, numbers with units) that the grammar is built from.

use std::borrow::Cow;
use std::iter::{Copied, Enumerate};
use std::slice::Iter;

use nom::error::{ErrorKind, ParseError};
use nom::{Err, IResult, Input, Needed};

use crate::ast::{Duration, Ident, Pos, Size, SizeUnit, Span, Spanned, TimeUnit};
use crate::lexer::{Tok, TokKind};

/// A window on the token list. `offset` is the index of `toks[0]` in the whole file, so
/// errors can say where they happened.
#[derive(Clone, Copy, Debug)]
pub struct Tokens<'a> {
    pub toks: &'a [Tok],
    pub src: &'a str,
    pub offset: usize,
}

impl<'a> Tokens<'a> {
    pub fn first(&self) -> Option<Tok> {
        self.toks.first().copied()
    }

    pub fn text(&self, tok: Tok) -> &'a str {
        self.src.get(tok.span.range()).unwrap_or("")
    }

    fn advance(&self, n: usize) -> Tokens<'a> {
        Tokens {
            toks: &self.toks[n.min(self.toks.len())..],
            src: self.src,
            offset: self.offset + n.min(self.toks.len()),
        }
    }
}

impl<'a> Input for Tokens<'a> {
    type Item = Tok;
    type Iter = Copied<Iter<'a, Tok>>;
    type IterIndices = Enumerate<Self::Iter>;

    fn input_len(&self) -> usize {
        self.toks.len()
    }

    fn take(&self, index: usize) -> Self {
        Tokens {
            toks: &self.toks[..index.min(self.toks.len())],
            ..*self
        }
    }

    fn take_from(&self, index: usize) -> Self {
        self.advance(index)
    }

    fn take_split(&self, index: usize) -> (Self, Self) {
        (self.take_from(index), self.take(index))
    }

    fn position<P>(&self, predicate: P) -> Option<usize>
    where
        P: Fn(Self::Item) -> bool,
    {
        self.toks.iter().position(|t| predicate(*t))
    }

    fn iter_elements(&self) -> Self::Iter {
        self.toks.iter().copied()
    }

    fn iter_indices(&self) -> Self::IterIndices {
        self.iter_elements().enumerate()
    }

    fn slice_index(&self, count: usize) -> Result<usize, Needed> {
        if count <= self.toks.len() {
            Ok(count)
        } else {
            Err(Needed::new(count - self.toks.len()))
        }
    }
}

/// A parse failure at token `at` (an index into the file's tokens).
#[derive(Clone, Debug, PartialEq)]
pub struct PErr {
    pub at: usize,
    /// What would have been accepted there ("a size such as `8 KiB`").
    pub expected: Cow<'static, str>,
    /// A complete message replacing "expected ..., found ..." when set.
    pub message: Option<String>,
    /// Where to point when not at token `at` (a value that parsed but is invalid).
    pub span: Option<Span>,
    pub hint: Option<String>,
    /// Whether `expected` is a bare keyword.
    pub is_keyword: bool,
}

impl PErr {
    pub fn expected(input: &Tokens, expected: impl Into<Cow<'static, str>>) -> PErr {
        PErr {
            at: input.offset,
            expected: expected.into(),
            message: None,
            span: None,
            hint: None,
            is_keyword: false,
        }
    }

    /// An error about a token that was read but is not acceptable.
    pub fn invalid(input: &Tokens, span: Span, message: impl Into<String>) -> PErr {
        PErr {
            span: Some(span),
            message: Some(message.into()),
            ..PErr::expected(input, "")
        }
    }

    /// Marks `expected` as a keyword, quoted when the message is built.
    fn keyword(mut self) -> PErr {
        self.is_keyword = true;
        self
    }

    /// What was expected, as a message fragment.
    pub fn expected_text(&self) -> Cow<'static, str> {
        if self.is_keyword {
            format!("`{}`", self.expected).into()
        } else {
            self.expected.clone()
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> PErr {
        self.hint = Some(hint.into());
        self
    }
}

impl<'a> ParseError<Tokens<'a>> for PErr {
    fn from_error_kind(input: Tokens<'a>, kind: ErrorKind) -> Self {
        PErr::expected(&input, format!("input accepted by {}", kind.description()))
    }

    fn append(_input: Tokens<'a>, _kind: ErrorKind, other: Self) -> Self {
        other
    }

    /// Of two alternatives that failed, report the one that got further. At the same
    /// place keep the one with a specific message, else the later one: callers that try
    /// alternatives replace the message with a description of all of them, and building
    /// "a or b" strings here would cost an allocation on every failed alternative.
    fn or(self, other: Self) -> Self {
        match self.at.cmp(&other.at) {
            std::cmp::Ordering::Greater => self,
            std::cmp::Ordering::Less => other,
            std::cmp::Ordering::Equal if self.message.is_some() => self,
            std::cmp::Ordering::Equal => other,
        }
    }
}

pub type PResult<'a, T> = IResult<Tokens<'a>, T, PErr>;

/// A recoverable error: the caller may try another alternative.
pub fn error<T>(err: PErr) -> Result<T, Err<PErr>> {
    Err(Err::Error(err))
}

/// An unrecoverable error: this construct was recognised but is malformed.
pub fn failure<T>(err: PErr) -> Result<T, Err<PErr>> {
    Err(Err::Failure(err))
}

/// Words the language uses for itself; they cannot name communicators or requests.
pub const KEYWORDS: &[&str] = &[
    "skeleton",
    "ranks",
    "topology",
    "app_time",
    "memory",
    "compute",
    "working_set",
    "polls",
    "each",
    "window",
    "per_rank",
    "normal",
    "uniform",
    "send",
    "recv",
    "isend",
    "irecv",
    "sendrecv",
    "to",
    "from",
    "tag",
    "on",
    "root",
    "req",
    "wait",
    "waitall",
    "waitany",
    "test",
    "comm",
    "split",
    "dup",
    "cart_sub",
    "color",
    "key",
    "keep",
    "loop",
    "while",
    "if",
    "as",
    "else",
    "rank",
    "nranks",
    "coord",
    "true",
    "false",
    "and",
    "or",
    "not",
    "any",
    "barrier",
    "bcast",
    "reduce",
    "allreduce",
    "gather",
    "gatherv",
    "scatter",
    "scatterv",
    "allgather",
    "allgatherv",
    "alltoall",
    "alltoallv",
    "reduce_scatter",
    "scan",
    "ibarrier",
    "ibcast",
    "ireduce",
    "iallreduce",
    "igather",
    "igatherv",
    "iscatter",
    "iscatterv",
    "iallgather",
    "iallgatherv",
    "ialltoall",
    "ialltoallv",
    "ireduce_scatter",
    "iscan",
];

/// Whether `text` is one of [`KEYWORDS`]. Names are checked on every use, so the list is
/// split by length once and a word is compared only with keywords as long as it.
pub fn is_keyword(text: &str) -> bool {
    static BY_LEN: std::sync::OnceLock<Vec<Vec<&'static str>>> = std::sync::OnceLock::new();
    let by_len = BY_LEN.get_or_init(|| {
        let longest = KEYWORDS.iter().map(|k| k.len()).max().unwrap_or(0);
        let mut by_len = vec![Vec::new(); longest + 1];
        for k in KEYWORDS {
            by_len[k.len()].push(*k);
        }
        by_len
    });
    by_len
        .get(text.len())
        .is_some_and(|same| same.contains(&text))
}

/// The punctuation token `kind`.
pub fn punct(kind: TokKind) -> impl Fn(Tokens) -> PResult<Span> {
    move |input| match input.first() {
        Some(tok) if tok.kind == kind => Ok((input.advance(1), tok.span)),
        _ => error(PErr::expected(&input, kind.describe())),
    }
}

/// The keyword `word`.
pub fn kw(word: &'static str) -> impl Fn(Tokens) -> PResult<Span> {
    move |input| match input.first() {
        Some(tok) if tok.kind == TokKind::Word && input.text(tok) == word => {
            Ok((input.advance(1), tok.span))
        }
        _ => error(PErr::expected(&input, Cow::Borrowed(word)).keyword()),
    }
}

/// Any word, keyword or not, with its span.
pub fn word(input: Tokens<'_>) -> PResult<'_, (&str, Span)> {
    match input.first() {
        Some(tok) if tok.kind == TokKind::Word => {
            Ok((input.advance(1), (input.text(tok), tok.span)))
        }
        _ => error(PErr::expected(&input, "a name")),
    }
}

/// A user-chosen name (not a keyword); `what` says what it names, for messages.
pub fn name(what: &'static str) -> impl Fn(Tokens) -> PResult<Ident> {
    move |input| {
        let (rest, (text, span)) = word(input)
            .map_err(|_| Err::Error(PErr::expected(&input, format!("the name of {what}"))))?;
        if is_keyword(text) {
            return failure(PErr::invalid(
                &input,
                span,
                format!("`{text}` is a keyword and cannot be the name of {what}"),
            ));
        }
        Ok((
            rest,
            Ident {
                name: text.to_string(),
                pos: Pos::Source(span),
            },
        ))
    }
}

/// A number token as written.
pub fn number(input: Tokens<'_>) -> PResult<'_, (&str, Span)> {
    match input.first() {
        Some(tok) if tok.kind == TokKind::Number => {
            Ok((input.advance(1), (input.text(tok), tok.span)))
        }
        _ => error(PErr::expected(&input, "a number")),
    }
}

/// A non-negative integer that fits in `u64`.
pub fn uint(input: Tokens) -> PResult<Spanned<u64>> {
    let (rest, (text, span)) =
        number(input).map_err(|_| Err::Error(PErr::expected(&input, "a whole number")))?;
    match text.parse::<u64>() {
        Ok(value) => Ok((
            rest,
            Spanned {
                value,
                pos: Pos::Source(span),
            },
        )),
        Err(_) if text.bytes().all(|b| b.is_ascii_digit()) => failure(PErr::invalid(
            &input,
            span,
            format!("`{text}` is too large (at most {})", u64::MAX),
        )),
        Err(_) => failure(PErr::invalid(
            &input,
            span,
            format!("expected a whole number, found `{text}`"),
        )),
    }
}

/// A whole number that fits in `u32` (tags, dimensions).
pub fn small_uint(input: Tokens) -> PResult<Spanned<u32>> {
    let (rest, n) = uint(input)?;
    match u32::try_from(n.value) {
        Ok(value) => Ok((rest, Spanned { value, pos: n.pos })),
        Err(_) => failure(PErr::invalid(
            &input,
            n.pos.span().unwrap_or_default(),
            format!("`{}` is too large here (at most {})", n.value, u32::MAX),
        )),
    }
}

/// A finite non-negative decimal number.
fn decimal(input: Tokens) -> PResult<(f64, Span)> {
    let (rest, (text, span)) = number(input)?;
    // Whole numbers below 2^53 convert exactly; only others need the float parser.
    if text.len() <= 15 && text.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(whole) = text.parse::<u64>() {
            return Ok((rest, (whole as f64, span)));
        }
    }
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() => Ok((rest, (value, span))),
        _ => failure(PErr::invalid(
            &input,
            span,
            format!("`{text}` is not a usable number"),
        )),
    }
}

/// A unit word looked up in `units`; suggests the right spelling of a near miss.
fn unit<U: Copy>(
    units: &'static [U],
    spell: fn(U) -> &'static str,
    expected: &'static str,
) -> impl Fn(Tokens) -> PResult<(U, Span)> {
    move |input| {
        let Some(tok) = input.first().filter(|t| t.kind == TokKind::Word) else {
            return failure(PErr::expected(&input, expected));
        };
        let text = input.text(tok);
        if let Some(&u) = units.iter().find(|&&u| spell(u) == text) {
            return Ok((input.advance(1), (u, tok.span)));
        }
        let err = PErr::expected(&input, expected);
        match units.iter().find(|&&u| spell(u).eq_ignore_ascii_case(text)) {
            Some(&u) => failure(err.with_hint(format!("did you mean `{}`?", spell(u)))),
            None => failure(err),
        }
    }
}

/// `1.5 ms`
pub fn duration(input: Tokens) -> PResult<Spanned<Duration>> {
    let (rest, (value, start)) =
        decimal(input).map_err(|e| e.map(|_| PErr::expected(&input, "a time such as `2 ms`")))?;
    let (rest, (unit, end)) = unit(
        &TimeUnit::ALL,
        TimeUnit::as_str,
        "a time unit (`ns`, `us`, `ms` or `s`)",
    )(rest)?;
    Ok((
        rest,
        Spanned {
            value: Duration { value, unit },
            pos: Pos::Source(start.to(end)),
        },
    ))
}

/// `8 KiB`; must be a whole number of bytes.
pub fn size(input: Tokens) -> PResult<Spanned<Size>> {
    let (rest, (value, start)) =
        decimal(input).map_err(|e| e.map(|_| PErr::expected(&input, "a size such as `8 KiB`")))?;
    let (rest, (unit, end)) = unit(
        &SizeUnit::ALL,
        SizeUnit::as_str,
        "a size unit (`B`, `KiB`, `MiB`, `GiB`, `KB`, `MB` or `GB`)",
    )(rest)?;
    let span = start.to(end);
    let size = Size { value, unit };
    if size.bytes().is_none() {
        return failure(PErr::invalid(
            &input,
            span,
            format!(
                "`{}` is not a whole number of bytes",
                input.src.get(span.range()).unwrap_or("")
            ),
        ));
    }
    Ok((
        rest,
        Spanned {
            value: size,
            pos: Pos::Source(span),
        },
    ))
}

/// A string literal's contents with escapes resolved.
pub fn string(input: Tokens) -> PResult<(String, Span)> {
    match input.first() {
        Some(tok) if tok.kind == TokKind::Str => {
            let raw = input.text(tok);
            let inner = raw.get(1..raw.len().saturating_sub(1)).unwrap_or("");
            if !inner.contains('\\') {
                return Ok((input.advance(1), (inner.to_string(), tok.span)));
            }
            let mut out = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    out.push(c);
                    continue;
                }
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(other @ ('"' | '\\')) => out.push(other),
                    Some(other) => {
                        return failure(
                            PErr::invalid(
                                &input,
                                tok.span,
                                format!("unknown escape `\\{other}` in string"),
                            )
                            .with_hint("strings may use `\\\"`, `\\\\`, `\\n` and `\\t`"),
                        )
                    }
                    None => out.push('\\'),
                }
            }
            Ok((input.advance(1), (out, tok.span)))
        }
        Some(tok) if tok.kind == TokKind::UnterminatedStr => failure(
            PErr::invalid(&input, tok.span, "this string has no closing `\"`")
                .with_hint("strings end on the line they start"),
        ),
        _ => error(PErr::expected(&input, "a string such as `\"solver.c:42\"`")),
    }
}
