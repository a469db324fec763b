//! Lexer: source text → tokens (with spans) and comments. Built with logos.
//!
//! Keywords are not distinct tokens: words are [`TokKind::Word`] and the parser decides
//! from context, which keeps the lexer small and lets error messages say "found `foo`".
//! Whitespace is skipped; comments are returned separately so the parser can attach
//! them to statements as trivia. Bytes that start no token become [`TokKind::Error`]
//! tokens, so lexing never fails.

use logos::Logos;

use crate::ast::Span;

#[derive(Logos, Clone, Copy, Debug, PartialEq, Eq)]
#[logos(skip r"[ \t\r\n\f]+")]
enum RawTok {
    #[regex(r"#[^\n]*", allow_greedy = true)]
    Comment,
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*")]
    Word,
    #[regex(r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")]
    Number,
    #[regex(r#""([^"\\\n]|\\[^\n])*""#)]
    Str,
    #[regex(r#""([^"\\\n]|\\[^\n])*"#)]
    UnterminatedStr,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token(",")]
    Comma,
    #[token(":")]
    Colon,
    #[token("@")]
    At,
    #[token("=")]
    Assign,
    #[token("==")]
    EqEq,
    #[token("!=")]
    Ne,
    #[token("<")]
    Lt,
    #[token("<=")]
    Le,
    #[token(">")]
    Gt,
    #[token(">=")]
    Ge,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    #[token("%")]
    Percent,
    #[token("^")]
    Caret,
}

/// The kinds of token the parser sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokKind {
    Word,
    Number,
    Str,
    UnterminatedStr,
    LBrace,
    RBrace,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Colon,
    At,
    Assign,
    EqEq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Caret,
    /// Bytes that start no token.
    Error,
}

impl TokKind {
    /// How the token is shown in "expected ..., found ..." messages.
    pub fn describe(self) -> &'static str {
        match self {
            TokKind::Word => "a word",
            TokKind::Number => "a number",
            TokKind::Str => "a string",
            TokKind::UnterminatedStr => "an unterminated string",
            TokKind::LBrace => "`{`",
            TokKind::RBrace => "`}`",
            TokKind::LParen => "`(`",
            TokKind::RParen => "`)`",
            TokKind::LBracket => "`[`",
            TokKind::RBracket => "`]`",
            TokKind::Comma => "`,`",
            TokKind::Colon => "`:`",
            TokKind::At => "`@`",
            TokKind::Assign => "`=`",
            TokKind::EqEq => "`==`",
            TokKind::Ne => "`!=`",
            TokKind::Lt => "`<`",
            TokKind::Le => "`<=`",
            TokKind::Gt => "`>`",
            TokKind::Ge => "`>=`",
            TokKind::Plus => "`+`",
            TokKind::Minus => "`-`",
            TokKind::Star => "`*`",
            TokKind::Slash => "`/`",
            TokKind::Percent => "`%`",
            TokKind::Caret => "`^`",
            TokKind::Error => "an unexpected character",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tok {
    pub kind: TokKind,
    pub span: Span,
}

/// The lexed file: tokens in order and comments in order.
#[derive(Debug, Default)]
pub struct Lexed {
    pub tokens: Vec<Tok>,
    /// Comment spans, including the `#`.
    pub comments: Vec<Span>,
}

/// Splits `source` into tokens and comments. Never fails.
pub fn lex(source: &str) -> Lexed {
    // About one token per five bytes in typical skeletons (4.99 in the benchmark's):
    // reserve for one per four, so the vector is not regrown (copied into twice the
    // memory) near the end. Pages reserved but never written cost nothing.
    let mut lexed = Lexed {
        tokens: Vec::with_capacity(source.len() / 4 + 16),
        comments: Vec::new(),
    };
    let mut lexer = RawTok::lexer(source);
    while let Some(raw) = lexer.next() {
        let range = lexer.span();
        let span = Span::new(range.start, range.end);
        let kind = match raw {
            Ok(RawTok::Comment) => {
                lexed.comments.push(span);
                continue;
            }
            Ok(raw) => convert(raw),
            Err(()) => TokKind::Error,
        };
        // Merge runs of unknown bytes into one error token so one stray sequence gives
        // one diagnostic.
        if kind == TokKind::Error {
            if let Some(last) = lexed.tokens.last_mut() {
                if last.kind == TokKind::Error && last.span.end == span.start {
                    last.span.end = span.end;
                    continue;
                }
            }
        }
        lexed.tokens.push(Tok { kind, span });
    }
    lexed
}

fn convert(raw: RawTok) -> TokKind {
    match raw {
        RawTok::Comment => TokKind::Error,
        RawTok::Word => TokKind::Word,
        RawTok::Number => TokKind::Number,
        RawTok::Str => TokKind::Str,
        RawTok::UnterminatedStr => TokKind::UnterminatedStr,
        RawTok::LBrace => TokKind::LBrace,
        RawTok::RBrace => TokKind::RBrace,
        RawTok::LParen => TokKind::LParen,
        RawTok::RParen => TokKind::RParen,
        RawTok::LBracket => TokKind::LBracket,
        RawTok::RBracket => TokKind::RBracket,
        RawTok::Comma => TokKind::Comma,
        RawTok::Colon => TokKind::Colon,
        RawTok::At => TokKind::At,
        RawTok::Assign => TokKind::Assign,
        RawTok::EqEq => TokKind::EqEq,
        RawTok::Ne => TokKind::Ne,
        RawTok::Lt => TokKind::Lt,
        RawTok::Le => TokKind::Le,
        RawTok::Gt => TokKind::Gt,
        RawTok::Ge => TokKind::Ge,
        RawTok::Plus => TokKind::Plus,
        RawTok::Minus => TokKind::Minus,
        RawTok::Star => TokKind::Star,
        RawTok::Slash => TokKind::Slash,
        RawTok::Percent => TokKind::Percent,
        RawTok::Caret => TokKind::Caret,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(source: &str) -> Vec<TokKind> {
        lex(source).tokens.iter().map(|t| t.kind).collect()
    }

    #[test]
    fn words_numbers_and_punctuation() {
        assert_eq!(
            kinds("send +x 8.5 KiB tag 3 # c\n"),
            vec![
                TokKind::Word,
                TokKind::Plus,
                TokKind::Word,
                TokKind::Number,
                TokKind::Word,
                TokKind::Word,
                TokKind::Number
            ]
        );
        assert_eq!(lex("a # one\n# two").comments.len(), 2);
    }

    #[test]
    fn operators_prefer_the_longest_match() {
        assert_eq!(
            kinds("<= == >= != < > ="),
            vec![
                TokKind::Le,
                TokKind::EqEq,
                TokKind::Ge,
                TokKind::Ne,
                TokKind::Lt,
                TokKind::Gt,
                TokKind::Assign
            ]
        );
    }

    #[test]
    fn unknown_bytes_become_one_error_token() {
        let lexed = lex("send $$$ east");
        assert_eq!(lexed.tokens[1].kind, TokKind::Error);
        assert_eq!(lexed.tokens[1].span, Span::new(5, 8));
        assert_eq!(lexed.tokens.len(), 3);
    }

    #[test]
    fn strings_terminated_or_not() {
        assert_eq!(kinds(r#"@ "a.c:1""#), vec![TokKind::At, TokKind::Str]);
        assert_eq!(
            kinds("@ \"a.c:1\nsend"),
            vec![TokKind::At, TokKind::UnterminatedStr, TokKind::Word]
        );
    }
}
