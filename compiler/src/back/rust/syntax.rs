//! Rust spellings of the IR's leaves for `code.rs`: topologies, quantities in the
//! runtime's units, peers and directions, expressions (with the DSL's Euclidean `/`
//! and `%`, and parentheses only where Rust needs them) and variable names.

use crate::back::INLINE_LIST;
use perfskel_grammar::ast::*;

pub(super) fn topology(t: &Topology) -> String {
    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    match t {
        Topology::Ring => "Topology::Ring".into(),
        Topology::Chain => "Topology::Chain".into(),
        Topology::Grid { dims, periodic } if periodic.iter().all(|&p| p) => {
            format!("Topology::torus(&[{}])", list(dims))
        }
        Topology::Grid { dims, periodic } if periodic.iter().all(|&p| !p) => {
            format!("Topology::grid(&[{}])", list(dims))
        }
        Topology::Grid { dims, periodic } => {
            let flags: Vec<String> = periodic.iter().map(bool::to_string).collect();
            format!(
                "Topology::grid_periodic(&[{}], &[{}])",
                list(dims),
                flags.join(", ")
            )
        }
        Topology::Hypercube => "Topology::Hypercube".into(),
        Topology::Tree { arity } => format!("Topology::Tree {{ arity: {arity} }}"),
        Topology::Star => "Topology::Star".into(),
        Topology::Complete => "Topology::Complete".into(),
        Topology::Graph { neighbors } => {
            let entries: Vec<String> = neighbors
                .iter()
                .map(|(rank, l)| format!("({rank}, &[{}])", list(l)))
                .collect();
            format!("Topology::graph(&[{}])", entries.join(", "))
        }
    }
}

pub(super) fn time_spec(t: &TimeSpec, vars: &LoopVars) -> String {
    match t {
        TimeSpec::Pick(p) => {
            let all_fixed = p.values.iter().all(|v| matches!(v, TimeSpec::Fixed(_)));
            let options: Vec<String> = p
                .values
                .iter()
                .map(|v| {
                    let code = time_spec(v, vars);
                    if all_fixed || !matches!(v, TimeSpec::Fixed(_)) {
                        code
                    } else {
                        format!("TimeSpec::from({code})")
                    }
                })
                .collect();
            format!("pick(&[{}], {})", options.join(", "), expr(&p.index, vars))
        }
        TimeSpec::Fixed(d) => duration(d.value),
        TimeSpec::PerRank(list) => {
            let times: Vec<String> = list.iter().map(|d| duration(d.value)).collect();
            format!("per_rank_times(&[{}])", times.join(", "))
        }
        TimeSpec::Normal { mean, stddev } => format!(
            "normal({}, {})",
            duration(mean.value),
            duration(stddev.value)
        ),
        TimeSpec::Uniform { low, high } => {
            format!("uniform({}, {})", duration(low.value), duration(high.value))
        }
    }
}

pub(super) fn duration(d: Duration) -> String {
    let unit = match d.unit {
        TimeUnit::Ns => "ns",
        TimeUnit::Us => "us",
        TimeUnit::Ms => "ms",
        TimeUnit::S => "secs",
    };
    format!("{unit}({:?})", d.value)
}

/// A size in the unit it was written in when that is a whole number of the unit,
/// otherwise in bytes.
pub(super) fn size(s: Size) -> String {
    let unit = match s.unit {
        SizeUnit::B => "bytes",
        SizeUnit::KiB => "kib",
        SizeUnit::MiB => "mib",
        SizeUnit::GiB => "gib",
        SizeUnit::KB => "kb",
        SizeUnit::MB => "mb",
        SizeUnit::GB => "gb",
    };
    if s.value.fract() == 0.0 && s.value >= 0.0 && s.value < 1e15 {
        format!("{unit}({})", s.value as u64)
    } else {
        bytes_literal(s.bytes().unwrap_or(0))
    }
}

/// A list of integers to index: an array, or a reference to one (which Rust keeps in
/// static memory) when it is long.
fn int_list(values: &[i64]) -> String {
    let parts: Vec<String> = values.iter().map(|v| format!("{v}_i64")).collect();
    if values.len() <= INLINE_LIST {
        format!("[{}]", parts.join(", "))
    } else {
        format!("(&[{}])", parts.join(", "))
    }
}

/// A point-to-point message size: a size, or `pick(&[...], index)`; a long list is of
/// bytes, literals Rust keeps in static memory.
pub(super) fn msg_size(s: &MsgSize, vars: &LoopVars) -> String {
    match s {
        MsgSize::Fixed(v) => size(v.value),
        MsgSize::Pick(p) => {
            let long = p.values.len() > INLINE_LIST;
            let options: Vec<String> = p
                .values
                .iter()
                .map(|v| {
                    if long {
                        format!("{}_u64", v.value.bytes().unwrap_or(0))
                    } else {
                        size(v.value)
                    }
                })
                .collect();
            format!("pick(&[{}], {})", options.join(", "), expr(&p.index, vars))
        }
    }
}

/// A byte count in the largest binary unit that divides it.
pub(super) fn bytes_literal(n: u64) -> String {
    for (shift, unit) in [(30, "gib"), (20, "mib"), (10, "kib")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{unit}({})", n >> shift);
        }
    }
    format!("bytes({n})")
}

/// The Rust variables of loop variables: skeleton name → identifier (`v_NAME`).
pub(super) type LoopVars = std::collections::BTreeMap<String, String>;

pub(super) fn peer(p: &Peer, vars: &LoopVars) -> String {
    match p {
        Peer::Any => "ANY".into(),
        Peer::Source => "SOURCE".into(),
        Peer::Rank(e) => format!("Peer::Rank({})", expr(e, vars)),
        Peer::Dir(d) => direction(d, vars),
    }
}

fn direction(d: &Direction, vars: &LoopVars) -> String {
    match d {
        Direction::Axis(axis) => {
            let sign = if axis.forward { "PLUS" } else { "MINUS" };
            match (axis.spelling, axis.dim) {
                (AxisSpelling::Compass, 0..=2) => {
                    let names = [["WEST", "EAST"], ["SOUTH", "NORTH"], ["DOWN", "UP"]];
                    names[axis.dim as usize][usize::from(axis.forward)].into()
                }
                (AxisSpelling::Letter, 0..=2) => {
                    format!("{sign}_{}", ["X", "Y", "Z"][axis.dim as usize])
                }
                _ => format!("{}({})", sign.to_lowercase(), axis.dim),
            }
        }
        Direction::Offset(steps) => {
            let steps: Vec<String> = steps.iter().map(i64::to_string).collect();
            format!("offset(&[{}])", steps.join(", "))
        }
        Direction::Next => "NEXT".into(),
        Direction::Prev => "PREV".into(),
        Direction::Parent => "PARENT".into(),
        Direction::Hub => "HUB".into(),
        Direction::Child(e) => format!("child({})", expr(e, vars)),
        Direction::Leaf(e) => format!("leaf({})", expr(e, vars)),
        Direction::Bit(e) => format!("bit({})", expr(e, vars)),
        Direction::Neighbor(e) => format!("neighbor({})", expr(e, vars)),
        Direction::Shift { dim, disp } => {
            format!("shift({}, {})", expr(dim, vars), expr(disp, vars))
        }
        Direction::AxisOf { dim, forward } => format!(
            "{}({})",
            if *forward { "plus_dim" } else { "minus_dim" },
            expr(dim, vars)
        ),
    }
}

/// Rust precedence levels of the code this module writes; higher binds tighter.
const P_OR: u8 = 1;
const P_AND: u8 = 2;
const P_CMP: u8 = 4;
const P_XOR: u8 = 5;
const P_ADD: u8 = 6;
const P_MUL: u8 = 7;
const P_UNARY: u8 = 8;
const P_ATOM: u8 = 9;

/// An expression as Rust over `sk`, with parentheses only where Rust needs them; loop
/// variables are the variables `vars` names.
pub(super) fn expr(e: &Expr, vars: &LoopVars) -> String {
    expr_prec(e, vars).0
}

fn expr_prec(e: &Expr, vars: &LoopVars) -> (String, u8) {
    let expr = |e: &Expr| expr(e, vars);
    let wrap = |e: &Expr, min: u8| {
        let (text, prec) = expr_prec(e, vars);
        if prec < min {
            format!("({text})")
        } else {
            text
        }
    };
    match &e.kind {
        ExprKind::Int(v) if i32::try_from(*v).is_ok() => (v.to_string(), P_ATOM),
        ExprKind::Int(v) => (format!("{v}_i64"), P_ATOM),
        ExprKind::Bool(b) => (b.to_string(), P_ATOM),
        // Locals set after `init`: expressions then never borrow `sk` while an
        // operation being built does.
        ExprKind::Rank => ("rank".into(), P_ATOM),
        ExprKind::NRanks => ("nranks".into(), P_ATOM),
        ExprKind::Coord(i) => (format!("coords[{i}]"), P_ATOM),
        // This rank's entry of a table (`check` made its length the rank count).
        ExprKind::PerRank(values) => (format!("{}[rank as usize]", int_list(values)), P_ATOM),
        // The entry at the index (`check` ran every index the program reaches).
        ExprKind::Pick(values, index) => (
            format!("{}[{} as usize]", int_list(values), wrap(index, P_ATOM)),
            P_ATOM,
        ),
        ExprKind::Var(v) => (
            vars.get(&v.name)
                .cloned()
                .unwrap_or_else(|| format!("v_{}", v.name)),
            P_ATOM,
        ),
        ExprKind::Unary(UnaryOp::Neg, x) => (format!("-{}", wrap(x, P_ATOM)), P_UNARY),
        // `not (a == b)` is `a != b` (clippy's `nonminimal_bool`): integers, so every
        // comparison has an exact opposite.
        ExprKind::Unary(UnaryOp::Not, x) => match &x.kind {
            ExprKind::Binary(
                cmp @ (BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge),
                l,
                r,
            ) => {
                let opposite = match cmp {
                    BinOp::Eq => "!=",
                    BinOp::Ne => "==",
                    BinOp::Lt => ">=",
                    BinOp::Le => ">",
                    BinOp::Gt => "<=",
                    _ => "<",
                };
                (
                    format!("{} {opposite} {}", wrap(l, P_XOR + 1), wrap(r, P_XOR + 1)),
                    P_CMP,
                )
            }
            _ => (format!("!{}", wrap(x, P_ATOM)), P_UNARY),
        },
        // The DSL's `/` and `%` are Euclidean, as in the checker.
        ExprKind::Binary(BinOp::Div, l, r) => {
            (format!("i64::div_euclid({}, {})", expr(l), expr(r)), P_ATOM)
        }
        ExprKind::Binary(BinOp::Rem, l, r) => {
            (format!("i64::rem_euclid({}, {})", expr(l), expr(r)), P_ATOM)
        }
        ExprKind::Binary(op, l, r) => {
            let (symbol, prec) = match op {
                BinOp::Or => ("||", P_OR),
                BinOp::And => ("&&", P_AND),
                BinOp::Add => ("+", P_ADD),
                BinOp::Sub => ("-", P_ADD),
                BinOp::Mul => ("*", P_MUL),
                BinOp::Xor => ("^", P_XOR),
                cmp => (cmp.symbol(), P_CMP),
            };
            // Left-associative: the right operand binds tighter; comparisons do not
            // chain, so both of their operands must. Arithmetic under `^` is
            // parenthesized (clippy's `precedence`; C readers expect it the other way).
            let (left_min, right_min) = match prec {
                P_CMP => (P_XOR + 1, P_XOR + 1),
                P_XOR => (P_UNARY, P_UNARY),
                _ => (prec, prec + 1),
            };
            (
                format!("{} {symbol} {}", wrap(l, left_min), wrap(r, right_min)),
                prec,
            )
        }
    }
}

/// Names a skeleton's communicator or request must not take in Rust: keywords, the
/// generated code's own variables, and what `perfskel_runtime::prelude` and Rust's
/// prelude bring into scope (a `let` of a constant's or a struct's name would be a
/// pattern, not a new variable). Such a name gets a trailing underscore.
#[rustfmt::skip]
const RESERVED: &[&str] = &[
    // Keywords, strict and reserved.
    "as",
    "async",
    "await",
    "break",
    "const",
    "continue",
    "crate",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "pub",
    "ref",
    "return",
    "self",
    "Self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "type",
    "unsafe",
    "use",
    "where",
    "while",
    "abstract",
    "become",
    "box",
    "do",
    "final",
    "macro",
    "override",
    "priv",
    "typeof",
    "unsized",
    "virtual",
    "yield",
    "try",
    "union",
    // The generated code's variables and the types it names.
    "sk",
    "main",
    "nranks",
    "coords",
    "i64",
    // perfskel_runtime::prelude.
    "Skeleton",
    "Topology",
    "Comm",
    "WORLD",
    "Req",
    "Peer",
    "ANY",
    "CollOp",
    "Dir",
    "Shape",
    "TimeSpec",
    "Sizes",
    "Rng",
    "EAST",
    "WEST",
    "NORTH",
    "SOUTH",
    "UP",
    "DOWN",
    "PLUS_X",
    "MINUS_X",
    "PLUS_Y",
    "MINUS_Y",
    "PLUS_Z",
    "MINUS_Z",
    "NEXT",
    "PREV",
    "PARENT",
    "HUB",
    "ns",
    "us",
    "ms",
    "secs",
    "bytes",
    "kib",
    "mib",
    "gib",
    "kb",
    "mb",
    "gb",
    "per_rank",
    "per_rank_times",
    "normal",
    "uniform",
    "rank",
    "plus",
    "minus",
    "offset",
    "child",
    "leaf",
    "bit",
    "neighbor",
    // Rust's prelude: variants and types a pattern would name.
    "Some",
    "None",
    "Ok",
    "Err",
    "Option",
    "Result",
    "Vec",
    "String",
    "Box",
];

/// A skeleton name (communicator or request handle) as a Rust variable.
pub fn to_rust_ident(name: &str) -> String {
    if RESERVED.contains(&name) {
        format!("{name}_")
    } else {
        name.to_string()
    }
}

/// Whether `name` is a variable name rustc does not warn about.
pub(super) fn is_snake_case(name: &str) -> bool {
    !name.chars().any(|c| c.is_ascii_uppercase())
}

pub(super) fn ident(name: &str) -> String {
    to_rust_ident(name)
}

pub(super) fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(e: &Expr) -> String {
        super::expr(e, &LoopVars::new())
    }

    fn parse_expr(text: &str) -> Expr {
        let source = format!("skeleton t ranks 4 topology ring app_time 1 s\nloop {text} {{}}");
        let (program, diags) = perfskel_grammar::parse(&source);
        assert!(diags.is_empty(), "{diags:?}");
        match &program.body.stmts[0].kind {
            StmtKind::Loop(l) => l.count.clone(),
            _ => Expr::int(0),
        }
    }

    fn parse_cond(text: &str) -> Expr {
        let source = format!("skeleton t ranks 4 topology ring app_time 1 s\nif {text} {{}}");
        let (program, diags) = perfskel_grammar::parse(&source);
        assert!(diags.is_empty(), "{diags:?}");
        match &program.body.stmts[0].kind {
            StmtKind::If(i) => i.cond.clone(),
            _ => Expr::int(0),
        }
    }

    #[test]
    fn expressions_keep_their_meaning_in_rust() {
        assert_eq!(expr(&parse_expr("40 * (nranks - 1)")), "40 * (nranks - 1)");
        assert_eq!(expr(&parse_expr("1 - (2 - 3)")), "1 - (2 - 3)");
        assert_eq!(expr(&parse_expr("1 - 2 - 3")), "1 - 2 - 3");
        assert_eq!(
            expr(&parse_expr("(rank - 1) % nranks")),
            "i64::rem_euclid(rank - 1, nranks)"
        );
        assert_eq!(
            expr(&parse_expr("rank / 2 * 2")),
            "i64::div_euclid(rank, 2) * 2"
        );
        assert_eq!(expr(&parse_expr("-(coord(0) + 1)")), "-(coords[0] + 1)");
        assert_eq!(expr(&parse_expr("5000000000")), "5000000000_i64");
        // `not` binds looser than comparisons in the DSL, tighter in Rust.
        assert_eq!(
            expr(&parse_cond("coord(0) == 0 and not (coord(1) == 0)")),
            "coords[0] == 0 && coords[1] != 0"
        );
        assert_eq!(
            expr(&parse_cond("not rank == 0 or rank > 2 and rank < 5")),
            "rank != 0 || rank > 2 && rank < 5"
        );
        // A negated comparison is the opposite comparison (clippy's nonminimal_bool);
        // other negations stay.
        assert_eq!(expr(&parse_cond("not rank < 2")), "rank >= 2");
        assert_eq!(
            expr(&parse_cond("not rank >= nranks - 1")),
            "rank < nranks - 1"
        );
        assert_eq!(
            expr(&parse_cond("not (rank == 0 or rank == 3)")),
            "!(rank == 0 || rank == 3)"
        );
        assert_eq!(
            expr(&parse_cond("(rank == 0) == (nranks == 4)")),
            "(rank == 0) == (nranks == 4)"
        );
    }

    #[test]
    fn names_that_collide_are_escaped() {
        assert_eq!(to_rust_ident("row"), "row");
        assert_eq!(to_rust_ident("type"), "type_");
        assert_eq!(to_rust_ident("ms"), "ms_");
        assert_eq!(to_rust_ident("sk"), "sk_");
        assert_eq!(to_rust_ident("None"), "None_");
        assert_eq!(to_rust_ident("NEXT"), "NEXT_");
        assert!(!is_snake_case("Big") && is_snake_case("row_2") && is_snake_case("_x"));
    }

    #[test]
    fn sizes_and_durations_in_their_units() {
        assert_eq!(size(Size::new(4.0, SizeUnit::KiB)), "kib(4)");
        assert_eq!(size(Size::new(0.5, SizeUnit::KiB)), "bytes(512)");
        assert_eq!(size(Size::new(3.0, SizeUnit::MB)), "mb(3)");
        assert_eq!(bytes_literal(3 << 20), "mib(3)");
        assert_eq!(bytes_literal(1000), "bytes(1000)");
        assert_eq!(duration(Duration::new(20.0, TimeUnit::Ms)), "ms(20.0)");
        assert_eq!(duration(Duration::new(1.5, TimeUnit::S)), "secs(1.5)");
        assert_eq!(duration(Duration::new(250.0, TimeUnit::Us)), "us(250.0)");
    }
}
