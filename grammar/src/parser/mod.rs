//! Parser: source text → [`Program`] plus diagnostics. It never gives up: after an error
//! it skips to the next statement and goes on, so one run reports every independent
//! mistake, and it always returns a program (with placeholders where the text was
//! unusable) so that tools can still show what they understood.
//!
//! Leaf syntax (expressions, peers, sizes, clauses, simple statements, topologies) is
//! written with nom combinators over the token stream (`tokens.rs`, `expr.rs`,
//! `stmt.rs`); blocks, header lines, error recovery and the attachment of comments to
//! statements are driven by hand here, because they need state nom does not carry.

mod expr;
mod stmt;
mod tokens;

use nom::Err;

use crate::ast::*;
use crate::diagnostic::Diag;
use crate::lexer::{lex, Tok, TokKind};
use stmt::{simple_stmt, site_clause, starts_statement, HEADER_WORDS, STATEMENT_WORDS};
use tokens::{kw, name, punct, uint, PErr, PResult, Tokens};

pub use expr::{MAX_EXPR_COMPLEXITY, MAX_EXPR_NESTING};
pub use stmt::collective_op;
pub use tokens::KEYWORDS;

/// How deeply `loop` and `if` blocks may nest. Every pass over a program walks blocks
/// recursively, so deeper nesting is a syntax error rather than a stack overflow.
pub const MAX_BLOCK_DEPTH: usize = 32;

/// How many `else if` branches one `if` may have (the chain is nested in the IR).
pub const MAX_ELSE_IF: usize = 1024;

/// Parses a whole skeleton file. The program is meaningful only when no diagnostic is an
/// error.
///
/// Large files are parsed in parts on several threads, split between top-level
/// statements; when any part reports a problem, or a comment would land elsewhere than
/// in one pass, the file is parsed again in one pass, so the result (program and
/// diagnostics) is always the one-pass result.
pub fn parse(source: &str) -> (Program, Vec<Diag>) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    parse_parts(source, threads.min(source.len() / PARALLEL_PART_BYTES))
}

/// Parses in up to `parts` parts on as many threads (one pass for `parts` ≤ 1),
/// whatever the file's size: [`parse`] with the number of parts chosen by the caller,
/// for tests and fuzzing of the parallel parse. Gives the same result as [`parse`].
pub fn parse_parts(source: &str, parts: usize) -> (Program, Vec<Diag>) {
    let lexed = lex(source);
    if parts > 1 {
        let splits = split_points(&cut_candidates(source, &lexed), lexed.tokens.len(), parts);
        if let Some(program) = parse_in_parts(source, &lexed, &splits) {
            return (program, Vec::new());
        }
    }
    parse_tokens(source, &lexed.tokens, &lexed.comments)
}

/// Each thread gets at least this many bytes of source (smaller files are parsed in one
/// pass: a thread costs about as much as parsing 10 KiB).
const PARALLEL_PART_BYTES: usize = 256 * 1024;

/// Parses in one pass.
fn parse_tokens(source: &str, toks: &[Tok], comments: &[Span]) -> (Program, Vec<Diag>) {
    let mut parser = Parser::new(source, toks, comments, 0, source.len() as u32);
    let program = parser.program();
    let mut diags = parser.diags;
    crate::diagnostic::sort(&mut diags);
    (program, diags)
}

/// Token indices where the top level can be cut: top-level statements that start a
/// line, with no comment between them and the token before (so every comment stays
/// with the part that would attach it). None when a `}` closes nothing.
pub(crate) fn cut_candidates(source: &str, lexed: &crate::lexer::Lexed) -> Vec<usize> {
    let toks = &lexed.tokens;
    let mut candidates = Vec::new();
    let mut depth = 0usize;
    let mut comment = 0usize;
    for (i, tok) in toks.iter().enumerate() {
        if depth == 0 && i > 0 && tok.kind == TokKind::Word {
            let prev_end = toks[i - 1].span.end;
            while lexed
                .comments
                .get(comment)
                .is_some_and(|c| c.start < prev_end)
            {
                comment += 1;
            }
            let no_comment = lexed
                .comments
                .get(comment)
                .is_none_or(|c| c.start >= tok.span.start);
            let gap = source.get(prev_end as usize..tok.span.start as usize);
            let word = source.get(tok.span.range());
            if no_comment
                && gap.is_some_and(|g| g.contains('\n'))
                && word.is_some_and(|w| starts_statement(w) && !HEADER_WORDS.contains(&w))
            {
                candidates.push(i);
            }
        }
        match tok.kind {
            TokKind::LBrace => depth += 1,
            TokKind::RBrace => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return Vec::new(),
            },
            _ => {}
        }
    }
    candidates
}

/// Up to `parts - 1` of the `candidates` that cut `n_toks` tokens into parts of about
/// equal length.
fn split_points(candidates: &[usize], n_toks: usize, parts: usize) -> Vec<usize> {
    let mut splits: Vec<usize> = (1..parts)
        .filter_map(|k| {
            let target = k * n_toks / parts;
            let at = candidates.partition_point(|&c| c < target);
            candidates.get(at).copied()
        })
        .collect();
    splits.dedup();
    splits
}

/// Parses the parts between `splits` on one thread each; `None` when the parts do not
/// give the one-pass result for sure (a diagnostic in any part, or comments left at the
/// end of a part that one pass would attach to the next statement).
pub(crate) fn parse_in_parts(
    source: &str,
    lexed: &crate::lexer::Lexed,
    splits: &[usize],
) -> Option<Program> {
    if splits.is_empty() {
        return None;
    }
    let toks = &lexed.tokens;
    let comments = &lexed.comments;
    // Part k covers tokens bounds[k]..bounds[k + 1].
    let mut bounds = vec![0];
    bounds.extend_from_slice(splits);
    bounds.push(toks.len());
    let part = |k: usize| -> Parser<'_> {
        let (from, to) = (bounds[k], bounds[k + 1]);
        let end = toks.get(to).map_or(source.len() as u32, |t| t.span.start);
        let first_comment = match toks.get(from) {
            Some(t) if from > 0 => comments.partition_point(|c| c.start < t.span.start),
            _ => 0,
        };
        let last_end = if from > 0 { toks[from - 1].span.end } else { 0 };
        Parser::new(
            source,
            &toks[from..to],
            &comments[first_comment..],
            last_end,
            end,
        )
    };
    let (first, rest) = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..bounds.len() - 1)
            .map(|k| {
                let mut parser = part(k);
                scope.spawn(move || {
                    let block = parser.block(None);
                    (block, parser.diags.is_empty())
                })
            })
            .collect();
        let mut parser = part(0);
        let program = parser.program();
        let first = (program, parser.diags.is_empty());
        let rest: Vec<_> = handles.into_iter().map(|h| h.join().ok()).collect();
        (first, rest)
    });
    let (mut program, clean) = first;
    if !clean || !program.body.end_comments.is_empty() {
        return None;
    }
    let last = rest.len() - 1;
    for (k, part) in rest.into_iter().enumerate() {
        let (block, clean) = part?;
        if !clean || (k < last && !block.end_comments.is_empty()) {
            return None;
        }
        program.body.stmts.extend(block.stmts);
        program.body.end_comments = block.end_comments;
    }
    Some(program)
}

#[derive(Default)]
struct Header {
    name: Option<Decl<Ident>>,
    ranks: Option<Decl<u64>>,
    topology: Option<Decl<Topology>>,
    app_time: Option<Decl<Duration>>,
    memory: Option<Decl<Memory>>,
}

struct Parser<'a> {
    src: &'a str,
    toks: &'a [Tok],
    comments: &'a [Span],
    /// Where the text this parser reads ends: the end of the file, or the start of the
    /// next part's first token.
    end: u32,
    next_comment: usize,
    /// Index of the next token.
    pos: usize,
    /// End of the last token or comment consumed, for blank-line detection.
    last_end: u32,
    diags: Vec<Diag>,
    header: Header,
    /// Header keywords seen, parsed or not, so a broken line is not also "missing".
    header_seen: Vec<&'static str>,
    /// Token index of the last syntax error, where recovery starts.
    error_at: Option<usize>,
    /// How many blocks enclose the current position.
    depth: usize,
    /// Statements of the blocks being parsed, innermost last: each block takes its own
    /// off the end when it closes, into a vector of exactly their number (no regrowing
    /// and copying of large statements while a block is read).
    pending: Vec<Stmt>,
}

impl<'a> Parser<'a> {
    /// A parser of `toks`, reading comments from `comments[0]` on, after text that ended
    /// at `last_end`, up to `end`.
    fn new(
        src: &'a str,
        toks: &'a [Tok],
        comments: &'a [Span],
        last_end: u32,
        end: u32,
    ) -> Parser<'a> {
        Parser {
            src,
            toks,
            comments,
            end,
            next_comment: 0,
            pos: 0,
            last_end,
            diags: Vec::new(),
            header: Header::default(),
            header_seen: Vec::new(),
            error_at: None,
            depth: 0,
            pending: Vec::new(),
        }
    }

    fn input(&self) -> Tokens<'_> {
        Tokens {
            toks: self.toks.get(self.pos..).unwrap_or(&[]),
            src: self.src,
            offset: self.pos,
        }
    }

    fn peek(&self) -> Option<Tok> {
        self.toks.get(self.pos).copied()
    }

    fn peek_word(&self) -> Option<&'a str> {
        let src = self.src;
        self.peek()
            .filter(|t| t.kind == TokKind::Word)
            .and_then(|t| src.get(t.span.range()))
    }

    fn at(&self, kind: TokKind) -> bool {
        self.peek().is_some_and(|t| t.kind == kind)
    }

    /// Runs a nom parser at the current token; on success moves past what it consumed,
    /// on failure records a diagnostic.
    fn run<T>(&mut self, parser: impl FnOnce(Tokens) -> PResult<T>) -> Option<T> {
        let result = parser(self.input()).map(|(rest, value)| (rest.offset, value));
        match result {
            Ok((next, value)) => {
                self.advance_to(next);
                Some(value)
            }
            Err(Err::Error(e) | Err::Failure(e)) => {
                self.report(e);
                None
            }
            Err(Err::Incomplete(_)) => {
                let e = PErr::expected(&self.input(), "more input");
                self.report(e);
                None
            }
        }
    }

    fn advance_to(&mut self, next: usize) {
        if next > self.pos {
            if let Some(last) = self.toks.get(next - 1) {
                self.last_end = self.last_end.max(last.span.end);
            }
            self.pos = next;
        }
    }

    fn report(&mut self, e: PErr) {
        self.error_at = Some(e.at);
        let found = self.toks.get(e.at).copied();
        let span = e.span.unwrap_or_else(|| match found {
            Some(tok) => tok.span,
            None => Span::new(self.src.len(), self.src.len()),
        });
        let expected = e.expected_text();
        let message = e
            .message
            .clone()
            .unwrap_or_else(|| format!("expected {expected}, found {}", self.describe(found)));
        let label = if e.message.is_some() {
            "here".to_string()
        } else {
            format!("expected {expected}")
        };
        let mut diag = Diag::error("syntax", message).at_span(span, label);
        if let Some(hint) = e.hint {
            diag = diag.with_note(format!("hint: {hint}"));
        }
        self.diags.push(diag);
    }

    fn describe(&self, tok: Option<Tok>) -> String {
        match tok {
            None => "the end of the file".into(),
            Some(t) if matches!(t.kind, TokKind::Word | TokKind::Number | TokKind::Error) => {
                format!("`{}`", self.src.get(t.span.range()).unwrap_or(""))
            }
            Some(t) => t.kind.describe().into(),
        }
    }

    /// Skips the rest of a broken statement: at least one token, then up to the next
    /// statement keyword or a closing brace of the current block. Braced groups
    /// opened while skipping are skipped whole.
    fn recover(&mut self) {
        // Resume where the error was found, unless that is a statement on a line of its
        // own: then the broken statement simply ended early.
        if let Some(at) = self.error_at.take() {
            if at > self.pos {
                let starts_line = self.toks.get(at).is_some_and(|t| {
                    let before = self.toks.get(at - 1).map_or(0, |p| p.span.end);
                    self.src
                        .get(before as usize..t.span.start as usize)
                        .is_some_and(|gap| gap.contains('\n'))
                });
                let is_statement = self.toks.get(at).is_some_and(|t| {
                    t.kind == TokKind::RBrace
                        || (t.kind == TokKind::Word
                            && self.src.get(t.span.range()).is_some_and(starts_statement))
                });
                if starts_line && is_statement {
                    self.advance_to(at);
                    return;
                }
                self.advance_to(at);
            }
        }
        let mut depth = 0usize;
        let mut first = true;
        while let Some(tok) = self.peek() {
            if !first && depth == 0 {
                if tok.kind == TokKind::RBrace {
                    break;
                }
                if self.peek_word().is_some_and(starts_statement) {
                    break;
                }
            }
            match tok.kind {
                TokKind::LBrace => depth += 1,
                TokKind::RBrace if depth > 0 => depth -= 1,
                TokKind::RBrace if first => {}
                _ => {}
            }
            first = false;
            self.advance_to(self.pos + 1);
        }
    }

    /// Takes the comments that end before `before`, with blank lines between them kept
    /// as empty strings (at most one in a row).
    fn leading_trivia(&mut self, before: u32) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(&comment) = self.comments.get(self.next_comment) {
            if comment.end > before {
                break;
            }
            if self.blank_between(self.last_end, comment.start) && self.last_end > 0 {
                lines.push(String::new());
            }
            lines.push(self.comment_text(comment));
            self.last_end = comment.end;
            self.next_comment += 1;
        }
        if self.blank_between(self.last_end, before) && self.last_end > 0 {
            lines.push(String::new());
        }
        lines
    }

    /// Takes a comment that starts on the line `after` ends on.
    fn trailing_comment(&mut self, after: u32) -> Option<String> {
        let comment = *self.comments.get(self.next_comment)?;
        let between = self.src.get(after as usize..comment.start as usize)?;
        if comment.start < after || between.contains('\n') {
            return None;
        }
        self.next_comment += 1;
        self.last_end = comment.end;
        Some(self.comment_text(comment))
    }

    fn comment_text(&self, span: Span) -> String {
        self.src
            .get(span.range())
            .unwrap_or("#")
            .trim_end()
            .to_string()
    }

    fn blank_between(&self, from: u32, to: u32) -> bool {
        self.src
            .get(from as usize..to as usize)
            .is_some_and(|gap| gap.bytes().filter(|&b| b == b'\n').nth(1).is_some())
    }

    fn next_start(&self) -> u32 {
        self.peek().map_or(self.end, |t| t.span.start)
    }

    fn program(&mut self) -> Program {
        // Header lines come first, in any order.
        while let Some(word) = self.peek_word() {
            if !HEADER_WORDS.contains(&word) {
                break;
            }
            self.header_line(word);
        }
        let body = self.block(None);
        let header = std::mem::take(&mut self.header);
        let file_start = Span::new(0, 0);
        let seen = std::mem::take(&mut self.header_seen);
        let mut missing = |what: &str, example: &str| {
            if seen.contains(&what) {
                return;
            }
            self.diags.push(
                Diag::error(
                    "missing-header",
                    format!("the skeleton has no `{what}` line"),
                )
                .at_span(file_start, format!("`{what}` is missing"))
                .with_note(format!(
                    "hint: skeletons start with a header such as `{example}`"
                )),
            );
        };
        let name = header.name.unwrap_or_else(|| {
            missing("skeleton", "skeleton my_app");
            Decl::new(Ident::new("unnamed"))
        });
        let ranks = header.ranks.unwrap_or_else(|| {
            missing("ranks", "ranks 16");
            Decl::new(1)
        });
        let topology = header.topology.unwrap_or_else(|| {
            missing("topology", "topology grid(4, 4)");
            Decl::new(Topology::Complete)
        });
        let app_time = header.app_time.unwrap_or_else(|| {
            missing("app_time", "app_time 120 s");
            Decl::new(Duration::new(0.0, TimeUnit::S))
        });
        Program {
            name,
            ranks,
            topology,
            app_time,
            memory: header.memory,
            body,
        }
    }

    fn header_line(&mut self, word: &str) {
        if let Some(&w) = HEADER_WORDS.iter().find(|&&w| w == word) {
            self.header_seen.push(w);
        }
        let start = self.next_start();
        let mut leading = self.leading_trivia(start);
        if self.header.name.is_none()
            && self.header.ranks.is_none()
            && self.header.topology.is_none()
            && self.header.app_time.is_none()
            && self.header.memory.is_none()
            && leading.first().is_some_and(String::is_empty)
        {
            leading.remove(0);
        }
        let first_span = self.peek().map(|t| t.span).unwrap_or_default();
        let parsed: Option<HeaderValue> = match word {
            "skeleton" => self.run(|i| {
                header_value(i, |r| {
                    name("the skeleton")(r).map(|(r, n)| (r, HeaderValue::Name(n)))
                })
            }),
            "ranks" => self.run(|i| {
                header_value(i, |r| {
                    uint(r).map(|(r, n)| (r, HeaderValue::Ranks(n.value)))
                })
            }),
            "topology" => self.run(|i| {
                header_value(i, |r| {
                    stmt::topology(r).map(|(r, t)| (r, HeaderValue::Topology(t)))
                })
            }),
            "memory" => self.run(|i| header_value(i, memory_value)),
            _ => self.run(|i| {
                header_value(i, |r| {
                    tokens::duration(r).map(|(r, d)| (r, HeaderValue::AppTime(d.value)))
                })
            }),
        };
        let end = self.last_end;
        let Some(value) = parsed else {
            self.recover();
            return;
        };
        let trivia = Trivia {
            leading,
            trailing: self.trailing_comment(end),
        };
        let pos = Pos::Source(first_span.to(Span { start: end, end }));
        let duplicate = |previous: Pos| {
            Diag::error("duplicate-header", format!("`{word}` is declared twice"))
                .at(pos, "declared again here")
                .with_secondary(previous, "first declared here")
        };
        // A header line declared twice keeps its first value; gives the first one's
        // position.
        fn once<T>(slot: &mut Option<Decl<T>>, value: T, pos: Pos, trivia: Trivia) -> Option<Pos> {
            match slot {
                Some(prev) => Some(prev.pos),
                None => {
                    *slot = Some(Decl { value, pos, trivia });
                    None
                }
            }
        }
        let h = &mut self.header;
        let previous = match value {
            HeaderValue::Name(v) => once(&mut h.name, v, pos, trivia),
            HeaderValue::Ranks(v) => once(&mut h.ranks, v, pos, trivia),
            HeaderValue::Topology(v) => once(&mut h.topology, v, pos, trivia),
            HeaderValue::AppTime(v) => once(&mut h.app_time, v, pos, trivia),
            HeaderValue::Memory(v) => once(&mut h.memory, v, pos, trivia),
        };
        if let Some(previous) = previous {
            self.diags.push(duplicate(previous));
        }
    }

    /// Parses statements up to the closing brace (not consumed) or the end of the file.
    /// `open` is the span of the opening brace, `None` at the top level.
    fn block(&mut self, open: Option<Span>) -> Block {
        let mut block = Block::default();
        let first = self.pending.len();
        loop {
            let Some(tok) = self.peek() else {
                if let Some(open) = open {
                    self.diags.push(
                        Diag::error("syntax", "this `{` is never closed")
                            .at_span(open, "opened here")
                            .with_note("hint: add a `}` at the end of the block"),
                    );
                }
                break;
            };
            if tok.kind == TokKind::RBrace {
                if open.is_some() {
                    break;
                }
                self.diags.push(
                    Diag::error("syntax", "unmatched `}`").at_span(tok.span, "no block to close"),
                );
                self.advance_to(self.pos + 1);
                continue;
            }
            let first_in_block = self.pending.len() == first && open.is_some();
            if let Some(stmt) = self.statement(first_in_block) {
                self.pending.push(stmt);
            }
        }
        block.stmts = self.pending.drain(first..).collect();
        let mut end = self.leading_trivia(self.next_start());
        if block.stmts.is_empty() && end.first().is_some_and(String::is_empty) {
            end.remove(0);
        }
        if end.last().is_some_and(String::is_empty) {
            end.pop();
        }
        block.end_comments = end;
        block
    }

    fn statement(&mut self, first_in_block: bool) -> Option<Stmt> {
        let start_tok = self.peek()?;
        let mut leading = self.leading_trivia(start_tok.span.start);
        if first_in_block && leading.first().is_some_and(String::is_empty) {
            leading.remove(0);
        }
        let word = self.peek_word();
        let kind_and_site = match word {
            Some("loop") => self.loop_stmt(),
            Some("while") => self.while_stmt(),
            Some("if") => self.if_stmt().and_then(|i| {
                let site = self.run(site_clause)?;
                Some((StmtKind::If(Box::new(i)), site))
            }),
            Some(w) if HEADER_WORDS.contains(&w) => {
                self.diags.push(
                    Diag::error("syntax", format!("`{w}` belongs in the header"))
                        .at_span(start_tok.span, "after the first statement")
                        .with_note("hint: header lines (`skeleton`, `ranks`, `topology`, `app_time`) come before all statements"),
                );
                self.header_line(w);
                return None;
            }
            Some(w) if starts_statement(w) => self.run(simple_stmt).map(|s| (s.kind, s.site)),
            _ => {
                self.unknown_statement(start_tok);
                None
            }
        };
        let Some((kind, site)) = kind_and_site else {
            self.recover();
            return None;
        };
        let end = self.last_end;
        let trailing = self.trailing_comment(end);
        // Anything left on the statement's line is a mistake in the statement.
        if let Some(tok) = self.peek() {
            let same_line = self
                .src
                .get(end as usize..tok.span.start as usize)
                .is_some_and(|gap| !gap.contains('\n'));
            let continues = matches!(tok.kind, TokKind::RBrace)
                || self.peek_word().is_some_and(starts_statement);
            if same_line && trailing.is_none() && !continues {
                let found = self.describe(Some(tok));
                self.diags.push(
                    Diag::error("syntax", format!("unexpected {found} after the statement"))
                        .at_span(tok.span, "not part of the statement")
                        .with_note("hint: statements end with optional clauses `tag N`, `root EXPR`, `on COMM` and `@ \"site\"`"),
                );
                self.recover();
            }
        }
        Some(Stmt {
            kind,
            site,
            pos: Pos::Source(Span {
                start: start_tok.span.start,
                end,
            }),
            trivia: Trivia { leading, trailing },
        })
    }

    fn unknown_statement(&mut self, tok: Tok) {
        let found = self.describe(Some(tok));
        let mut diag = Diag::error("syntax", format!("expected a statement, found {found}"))
            .at_span(tok.span, "not a statement");
        if let Some(word) = self.peek_word() {
            let candidates = STATEMENT_WORDS
                .iter()
                .chain(HEADER_WORDS)
                .copied()
                .chain(crate::ast::CollOp::ALL.iter().map(|op| op.keyword()));
            if let Some(best) = closest(word, candidates) {
                diag = diag.with_note(format!("hint: did you mean `{best}`?"));
            }
        }
        self.diags.push(diag);
    }

    /// `loop COUNT [as NAME] { ... } [@ "site"]`
    fn loop_stmt(&mut self) -> Option<(StmtKind, Option<Site>)> {
        let (count, var) = self.run(|i| {
            let (rest, _) = kw("loop")(i)?;
            let (rest, count) = nom::Parser::parse(&mut nom::combinator::cut(expr::expr), rest)?;
            match kw("as")(rest) {
                Ok((rest, _)) => {
                    let (rest, var) = nom::Parser::parse(
                        &mut nom::combinator::cut(name("a loop variable")),
                        rest,
                    )?;
                    Ok((rest, (count, Some(var))))
                }
                Err(_) => Ok((rest, (count, None))),
            }
        })?;
        let body = self.braced_block()?;
        let site = self.run(site_clause)?;
        Some((StmtKind::Loop(Box::new(Loop { count, var, body })), site))
    }

    /// `while recv PEER SIZE tag T [on COMM] [@ "site"] { ... }`: the site is the
    /// receive's.
    fn while_stmt(&mut self) -> Option<(StmtKind, Option<Site>)> {
        let (head, recv, site) = self.run(|i| {
            let (rest, head) = kw("while")(i)?;
            let (rest, _) = nom::Parser::parse(&mut nom::combinator::cut(kw("recv")), rest)?;
            let (rest, simple) = stmt::while_recv(rest)?;
            match simple.kind {
                StmtKind::P2p(p) => Ok((rest, (head, *p, simple.site))),
                _ => Err(nom::Err::Failure(PErr::expected(&i, "a receive"))),
            }
        })?;
        let body = self.braced_block()?;
        if recv.tag.is_none() {
            // Reported once the block is read, so that it is not read as statements
            // (the statement is kept: the file has an error, nothing runs it).
            self.diags.push(
                Diag::error("syntax", "`while recv` needs the tag that keeps the loop going")
                    .at_span(head, "no `tag` clause")
                    .with_note("hint: write `while recv hub 16 B tag 1 { ... }`: a message with another tag ends the loop"),
            );
        }
        Some((StmtKind::While(Box::new(While { recv, body })), site))
    }

    /// `if COND { ... } [else if ... | else { ... }]`. An `else if` chain is read in a
    /// loop, not by recursion, so its length costs no stack.
    fn if_stmt(&mut self) -> Option<If> {
        let mut links: Vec<(Expr, Block)> = Vec::new();
        let last_else = loop {
            let cond = self.run(|i| {
                let (rest, _) = kw("if")(i)?;
                nom::Parser::parse(&mut nom::combinator::cut(expr::expr), rest)
            })?;
            let then_block = self.braced_block()?;
            links.push((cond, then_block));
            if self.peek_word() != Some("else") {
                break None;
            }
            self.advance_to(self.pos + 1);
            if self.peek_word() != Some("if") {
                break Some(Else::Block(self.braced_block()?));
            }
            if links.len() > MAX_ELSE_IF {
                let at = self.peek().map(|t| t.span).unwrap_or_default();
                self.report(PErr::invalid(
                    &self.input(),
                    at,
                    format!("this `if` has too many `else if` branches (at most {MAX_ELSE_IF})"),
                ));
                return None;
            }
        };
        // Build the chain from its end: `if a {} else if b {} else {}` is
        // `If(a, else: If(b, else: Block))`.
        let mut else_branch = last_else;
        while let Some((cond, then_block)) = links.pop() {
            let link = If {
                cond,
                then_block,
                else_branch,
            };
            if links.is_empty() {
                return Some(link);
            }
            else_branch = Some(Else::If(Box::new(link)));
        }
        None
    }

    fn braced_block(&mut self) -> Option<Block> {
        if self.depth >= MAX_BLOCK_DEPTH && self.at(TokKind::LBrace) {
            let at = self.peek().map(|t| t.span).unwrap_or_default();
            self.report(
                PErr::invalid(
                    &self.input(),
                    at,
                    format!("blocks are nested too deeply (at most {MAX_BLOCK_DEPTH} levels)"),
                )
                .with_hint(
                    "merge nested loops: `loop a { loop b { ... } }` is `loop a * b { ... }`",
                ),
            );
            return None;
        }
        let open = self.run(|i| punct(TokKind::LBrace)(i))?;
        self.depth += 1;
        let block = self.block(Some(open));
        self.depth -= 1;
        if self.at(TokKind::RBrace) {
            self.advance_to(self.pos + 1);
        }
        Some(block)
    }
}

enum HeaderValue {
    Name(Ident),
    Ranks(u64),
    Topology(Topology),
    AppTime(Duration),
    Memory(Memory),
}

/// `SIZE at SIZE / s`, the value of the `memory` header line.
fn memory_value(input: Tokens) -> PResult<HeaderValue> {
    const HINT: &str = "the line reads `memory 31364 KiB at 26727 MB/s`: the working set, then the probe's rate in bytes per second";
    let hint = |e: Err<PErr>| e.map(|e| e.with_hint(HINT));
    let (rest, working_set) = tokens::size(input)?;
    let (rest, _) = kw("at")(rest).map_err(hint)?;
    let (rest, rate) = tokens::size(rest).map_err(hint)?;
    let (rest, _) = punct(TokKind::Slash)(rest).map_err(hint)?;
    let (rest, end) = kw("s")(rest).map_err(hint)?;
    let rate = Spanned {
        value: rate.value,
        pos: match rate.pos {
            Pos::Source(span) => Pos::Source(span.to(end)),
            derived => derived,
        },
    };
    Ok((rest, HeaderValue::Memory(Memory { working_set, rate })))
}

/// Skips the header keyword, then parses its value.
fn header_value<'t>(
    input: Tokens<'t>,
    value: impl FnOnce(Tokens<'t>) -> PResult<'t, HeaderValue>,
) -> PResult<'t, HeaderValue> {
    let rest = nom::Input::take_from(&input, 1);
    value(rest).map_err(|e| match e {
        Err::Error(e) => Err::Failure(e),
        other => other,
    })
}

/// The candidate closest to `word` by edit distance, if close enough to be a typo.
fn closest<'c>(word: &str, candidates: impl Iterator<Item = &'c str>) -> Option<&'c str> {
    candidates
        .map(|c| (strsim::levenshtein(word, c), c))
        .filter(|&(d, c)| d > 0 && d <= 2 && d < c.len())
        .min()
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Top-level statements with comments, blank lines, nested blocks and sites, as in
    /// generated skeletons.
    fn phases(n: usize) -> String {
        let mut text = String::from("skeleton s\nranks 4\ntopology ring\napp_time 1 s\n\n");
        for i in 0..n {
            text.push_str(&format!(
                "# phase {i}\nloop 2 {{\n    compute {i} us # work\n    send +x 1 KiB @ \"a.f:{i}\"\n    recv -x 1 KiB\n}}\n\nbarrier\nif rank == 0 {{\n    compute 1 us\n}} else {{\n    compute 2 us\n}}\n"
            ));
        }
        text.push_str("# the end\n");
        text
    }

    #[test]
    fn large_files_are_parsed_in_parts_to_the_one_pass_result() {
        let text = phases(50);
        let lexed = lex(&text);
        let candidates = cut_candidates(&text, &lexed);
        // `barrier` and `if` of each phase (`loop` follows a comment).
        assert_eq!(candidates.len(), 2 * 50, "{candidates:?}");
        let one_pass = parse_parts(&text, 1);
        assert!(one_pass.1.is_empty(), "{:?}", one_pass.1);
        let mut cut = 0;
        for &at in &candidates {
            if let Some(program) = parse_in_parts(&text, &lexed, &[at]) {
                assert_eq!(program, one_pass.0, "cut at token {at}");
                cut += 1;
            }
        }
        assert_eq!(cut, candidates.len());
        for parts in 2..=8 {
            let splits = split_points(&candidates, lexed.tokens.len(), parts);
            assert_eq!(splits.len(), parts - 1);
            assert_eq!(
                parse_in_parts(&text, &lexed, &splits).as_ref(),
                Some(&one_pass.0)
            );
        }
    }

    #[test]
    fn a_part_with_a_problem_is_parsed_again_in_one_pass() {
        // A header line in the second half: reported once, as in one pass.
        let text = format!(
            "{}ranks 8\n{}",
            phases(10),
            phases(10).replace("skeleton s\nranks 4\ntopology ring\napp_time 1 s\n", "")
        );
        let one_pass = parse_parts(&text, 1);
        assert!(!one_pass.1.is_empty());
        assert_eq!(parse_parts(&text, 2), one_pass);
        // A `}` that closes nothing: nowhere to cut.
        let text = format!("{}}}\n{}", phases(10), phases(10));
        assert!(cut_candidates(&text, &lex(&text)).is_empty());
        assert_eq!(parse_parts(&text, 4), parse_parts(&text, 1));
    }

    /// Call sites named from symbols (objects without debug information) carry `::`,
    /// `<>`, `()`, `#`, `+` and spaces: they print and parse back unchanged.
    #[test]
    fn sites_named_by_symbols_print_and_parse_back() {
        let sites = [
            "LAMMPS_NS::CommBrick::reverse_comm+0x1a4",
            "LAMMPS_NS::FixNH<double>::compute+0x3c",
            "A::f()::{lambda(int)#1}::operator()+0x5",
            "std::operator<< <char>+0x12",
            "(anonymous namespace)::pack.cold+0x8",
            "liblammps.so.0+0x359bb6",
            r#"a "quoted" \ name+0x1"#,
        ];
        let literals = [
            r#""LAMMPS_NS::CommBrick::reverse_comm+0x1a4""#,
            r#""LAMMPS_NS::FixNH<double>::compute+0x3c""#,
            r#""A::f()::{lambda(int)#1}::operator()+0x5""#,
            r#""std::operator<< <char>+0x12""#,
            r#""(anonymous namespace)::pack.cold+0x8""#,
            r#""liblammps.so.0+0x359bb6""#,
            r#""a \"quoted\" \\ name+0x1""#,
        ];
        let mut text = String::from("skeleton s\nranks 2\ntopology ring\napp_time 1 s\n\n");
        for literal in literals {
            text.push_str(&format!("barrier @ {literal}\n"));
        }
        let (program, diags) = crate::parse(&text);
        assert!(diags.is_empty(), "{diags:?}");
        let parsed: Vec<&str> = program
            .body
            .stmts
            .iter()
            .filter_map(|s| s.site.as_ref().map(|site| site.text.as_str()))
            .collect();
        assert_eq!(parsed, sites);
        assert_eq!(crate::printer::print(&program), text);
    }
}

#[cfg(test)]
mod peer_hint_tests {
    use super::parse;

    /// The hints of the diagnostics of `peer` written where a send's peer goes.
    fn hints(peer: &str) -> Vec<String> {
        let text = format!("skeleton s\nranks 4\ntopology ring\napp_time 1 s\nsend {peer} 8 B\n");
        let (_, diags) = parse(&text);
        diags.into_iter().flat_map(|d| d.notes).collect()
    }

    #[test]
    fn a_misspelt_direction_gets_the_one_it_is_near() {
        assert_eq!(hints("nxet"), ["hint: did you mean `next`?"]);
        assert_eq!(hints("prve"), ["hint: did you mean `prev`?"]);
        assert_eq!(hints("suoth"), ["hint: did you mean `south`?"]);
        assert_eq!(hints("East"), ["hint: did you mean `east`?"]);
        assert_eq!(hints("chld(1)"), ["hint: did you mean `child(...)`?"]);
        assert_eq!(hints("parnet"), ["hint: did you mean `parent`?"]);
    }

    #[test]
    fn other_tools_words_get_their_directions_here() {
        assert_eq!(
            hints("left"),
            ["hint: did you mean `prev` (a ring or chain) or `west` (a grid)?"]
        );
        assert_eq!(hints("previous"), ["hint: did you mean `prev`?"]);
        assert_eq!(hints("neighbour(0)"), ["hint: did you mean `neighbor(i)`?"]);
    }

    #[test]
    fn a_word_far_from_every_peer_gets_no_guess() {
        assert!(hints("banana").is_empty(), "{:?}", hints("banana"));
    }
}
