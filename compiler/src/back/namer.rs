//! The shared namer of the back ends: skeleton names (communicators, request handles) →
//! identifiers of the target language that are neither keywords nor names the generated
//! code or its runtime already uses, and unique. Modelled on naga's `proc/namer.rs`.
//!
//! Skeleton names are `[A-Za-z_][A-Za-z0-9_]*` and never DSL keywords, so the only
//! collisions are with the target language: a request named `int` becomes `int_` in C,
//! one named `fn` becomes `fn_` in Rust. The same skeleton gives the same names on every
//! run, so generated code is deterministic.

use std::collections::BTreeSet;

/// The target language of a namer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    C,
    Rust,
}

/// Reserved words of C (C89 to C23, including the common predefined macros and the
/// identifiers `<mpi.h>` and the C library put in scope that a skeleton could shadow).
pub const C_KEYWORDS: &[&str] = &[
    "alignas",
    "alignof",
    "asm",
    "auto",
    "bool",
    "break",
    "case",
    "char",
    "const",
    "constexpr",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "errno",
    "extern",
    "false",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "main",
    "nullptr",
    "printf",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "struct",
    "switch",
    "thread_local",
    "true",
    "typedef",
    "typeof",
    "typeof_unqual",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "_Alignas",
    "_Alignof",
    "_Atomic",
    "_Bool",
    "_Complex",
    "_Generic",
    "_Imaginary",
    "_Noreturn",
    "_Static_assert",
    "_Thread_local",
    "NULL",
    "EOF",
    "stdin",
    "stdout",
    "stderr",
];

/// Reserved words of Rust (strict and reserved keywords, 2021 edition) and names a
/// generated program must not shadow.
pub const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "gen", "macro",
    "override", "priv", "try", "typeof", "unsized", "virtual", "yield", "union", "main", "std",
    "core", "alloc", "mpi", "Some", "None", "Ok", "Err", "Option", "Result", "Vec", "String",
    "Box",
];

/// Hands out identifiers for one generated file.
#[derive(Clone, Debug)]
pub struct Namer {
    language: Language,
    taken: BTreeSet<String>,
}

impl Namer {
    /// A namer for `language` that also avoids `reserved`: the names the back end's own
    /// code and runtime use (`rank`, `world`, `ps_compute`, ...).
    pub fn new(language: Language, reserved: &[&str]) -> Namer {
        let keywords = match language {
            Language::C => C_KEYWORDS,
            Language::Rust => RUST_KEYWORDS,
        };
        Namer {
            language,
            taken: keywords
                .iter()
                .chain(reserved)
                .map(|s| s.to_string())
                .collect(),
        }
    }

    pub fn language(&self) -> Language {
        self.language
    }

    /// A fresh identifier for the skeleton name `base`: `base` itself when it is free,
    /// `base_` when it is a keyword or reserved, then `base_2`, `base_3`, ...
    pub fn call(&mut self, base: &str) -> String {
        let clean = sanitize(base);
        let mut candidate = clean.clone();
        if self.taken.contains(&candidate) {
            candidate.push('_');
        }
        let mut n = 2;
        while self.taken.contains(&candidate) {
            candidate = format!("{clean}_{n}");
            n += 1;
        }
        self.taken.insert(candidate.clone());
        candidate
    }

    /// Whether `name` is a keyword of the language or already handed out or reserved.
    pub fn is_taken(&self, name: &str) -> bool {
        self.taken.contains(name)
    }
}

/// Keeps `[A-Za-z0-9_]`, replaces anything else with `_`, and never starts with a digit.
fn sanitize(base: &str) -> String {
    let mut out: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_and_reserved_names_are_escaped_per_language() {
        let mut c = Namer::new(Language::C, &["rank"]);
        assert_eq!(c.call("row"), "row");
        assert_eq!(c.call("int"), "int_");
        assert_eq!(c.call("rank"), "rank_");
        assert_eq!(c.call("fn"), "fn");
        let mut rust = Namer::new(Language::Rust, &[]);
        assert_eq!(rust.call("fn"), "fn_");
        assert_eq!(rust.call("int"), "int");
    }

    #[test]
    fn names_are_unique_and_valid() {
        let mut c = Namer::new(Language::C, &[]);
        assert_eq!(c.call("a"), "a");
        assert_eq!(c.call("a"), "a_");
        assert_eq!(c.call("a"), "a_2");
        assert_eq!(c.call("3d-x"), "_3d_x");
        assert!(c.is_taken("a_2"));
    }
}
