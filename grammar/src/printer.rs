//! Printer: [`Program`] → canonical source text. `perfskel fmt` is `print(parse(text))`,
//! so this module defines the canonical form: four-space indentation, one statement per
//! line, clauses in the order `tag`, `root`, `on`, `@`, comments and single blank lines
//! kept where they were written. Printing is deterministic and parses back to an equal
//! program.

use std::fmt::Write;

use crate::ast::*;

/// Prints a program in canonical form.
pub fn print(program: &Program) -> String {
    let mut p = Printer::default();
    p.decl(&program.name, |v| format!("skeleton {v}"));
    p.decl(&program.ranks, |v| format!("ranks {v}"));
    p.decl(&program.topology, |v| format!("topology {}", topology(v)));
    p.decl(&program.app_time, |v| format!("app_time {}", duration(*v)));
    if let Some(memory) = &program.memory {
        p.decl(memory, print_memory);
    }
    p.block_body(&program.body);
    p.out
}

/// The `memory` header line: `memory 31364 KiB at 26727 MB/s`.
pub fn print_memory(m: &Memory) -> String {
    format!(
        "memory {} at {}/s",
        size(m.working_set.value),
        size(m.rate.value)
    )
}

/// The first line of a statement without its call site or comments, for messages:
/// `send east 4 KiB tag 1`, `loop 100`, `if rank == 0`.
pub fn stmt_head(stmt: &Stmt) -> String {
    match &stmt.kind {
        StmtKind::Loop(l) => loop_head(l),
        StmtKind::If(i) => format!("if {}", expr(&i.cond)),
        StmtKind::While(w) => while_head(w),
        kind => simple(kind),
    }
}

/// Prints one expression in canonical form (used by diagnostics and back ends).
pub fn expr(e: &Expr) -> String {
    expr_at(e, 0)
}

/// Prints a peer in canonical form.
pub fn peer(p: &Peer) -> String {
    match p {
        Peer::Any => "any".into(),
        Peer::Source => "source".into(),
        Peer::Rank(e) => format!("rank({})", expr(e)),
        Peer::Dir(d) => direction(d),
    }
}

pub fn direction(d: &Direction) -> String {
    match d {
        Direction::Axis(axis) => axis.text(),
        Direction::Offset(offsets) => {
            let parts: Vec<String> = offsets.iter().map(|o| o.to_string()).collect();
            format!("offset({})", parts.join(", "))
        }
        Direction::Next => "next".into(),
        Direction::Prev => "prev".into(),
        Direction::Parent => "parent".into(),
        Direction::Hub => "hub".into(),
        Direction::Child(e) => format!("child({})", expr(e)),
        Direction::Leaf(e) => format!("leaf({})", expr(e)),
        Direction::Bit(e) => format!("bit({})", expr(e)),
        Direction::Neighbor(e) => format!("neighbor({})", expr(e)),
        Direction::Shift { dim, disp } => format!("shift({}, {})", expr(dim), expr(disp)),
        Direction::AxisOf { dim, forward } => {
            format!("{}d({})", if *forward { '+' } else { '-' }, expr(dim))
        }
    }
}

pub fn topology(t: &Topology) -> String {
    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    match t {
        Topology::Grid { dims, periodic } => {
            if periodic.len() == dims.len() && periodic.iter().all(|&p| p) {
                format!("torus({})", list(dims))
            } else if periodic.len() == dims.len() && periodic.iter().all(|&p| !p) {
                format!("grid({})", list(dims))
            } else {
                let flags: Vec<&str> = periodic
                    .iter()
                    .map(|&p| if p { "true" } else { "false" })
                    .collect();
                format!("grid({}, periodic = [{}])", list(dims), flags.join(", "))
            }
        }
        Topology::Tree { arity } => format!("tree({arity})"),
        Topology::Graph { neighbors } => {
            let entries: Vec<String> = neighbors
                .iter()
                .map(|(rank, list_of)| format!("{rank}: [{}]", list(list_of)))
                .collect();
            format!("graph({})", entries.join(", "))
        }
        other => other.keyword().into(),
    }
}

pub fn duration(d: Duration) -> String {
    format!("{} {}", number(d.value), d.unit.as_str())
}

pub fn size(s: Size) -> String {
    format!("{} {}", number(s.value), s.unit.as_str())
}

/// The shortest text that reads back as exactly `value`, without exponent for ordinary
/// magnitudes.
pub fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        return format!("{value:.0}");
    }
    let plain = format!("{value}");
    if plain.len() <= 24 {
        plain
    } else {
        format!("{value:e}")
    }
}

fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn expr_prec(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Binary(op, _, _) => op.precedence(),
        ExprKind::Unary(UnaryOp::Not, _) => 3,
        ExprKind::Unary(UnaryOp::Neg, _) => 8,
        ExprKind::Int(v) if *v < 0 => 8,
        _ => 9,
    }
}

fn expr_at(e: &Expr, min_prec: u8) -> String {
    if expr_prec(e) < min_prec {
        return format!("({})", expr_at(e, 0));
    }
    match &e.kind {
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Rank => "rank".into(),
        ExprKind::NRanks => "nranks".into(),
        ExprKind::Coord(d) => format!("coord({d})"),
        ExprKind::Var(v) => v.name.clone(),
        ExprKind::PerRank(values) => {
            let parts: Vec<String> = values.iter().map(i64::to_string).collect();
            format!("per_rank({})", parts.join(", "))
        }
        ExprKind::Pick(values, index) => {
            let parts: Vec<String> = values.iter().map(i64::to_string).collect();
            format!("[{}][{}]", parts.join(", "), expr_at(index, 0))
        }
        // `not (a == b)` keeps its parentheses: `not a == b` means the same but misleads.
        ExprKind::Unary(UnaryOp::Not, x) => format!("not {}", expr_at(x, 9)),
        ExprKind::Unary(UnaryOp::Neg, x) => format!("-{}", expr_at(x, 8)),
        ExprKind::Binary(op, l, r) => {
            let p = op.precedence();
            // Arithmetic under `^`, and `^` under a comparison, keep their parentheses:
            // `rank ^ (i + 1)`, `(rank ^ 1) == 0`, as a C reader (whose `^` binds
            // looser than `==`) would need.
            let (left_min, right_min) = match op {
                BinOp::Xor => (8, 8),
                op if op.is_comparison() => (p + 2, p + 2),
                _ => (p, p + 1),
            };
            format!(
                "{} {} {}",
                expr_at(l, left_min),
                op.symbol(),
                expr_at(r, right_min)
            )
        }
    }
}

fn size_spec(s: &SizeSpec) -> String {
    match s {
        SizeSpec::Fixed(v) => size(v.value),
        SizeSpec::PerRank(values) => {
            let parts: Vec<String> = values.iter().map(|v| size(v.value)).collect();
            format!("per_rank({})", parts.join(", "))
        }
    }
}

fn time_spec(t: &TimeSpec) -> String {
    match t {
        TimeSpec::Fixed(d) => duration(d.value),
        TimeSpec::PerRank(values) => {
            let parts: Vec<String> = values.iter().map(|v| duration(v.value)).collect();
            format!("per_rank({})", parts.join(", "))
        }
        TimeSpec::Normal { mean, stddev } => {
            format!(
                "normal({}, {})",
                duration(mean.value),
                duration(stddev.value)
            )
        }
        TimeSpec::Uniform { low, high } => {
            format!("uniform({}, {})", duration(low.value), duration(high.value))
        }
        TimeSpec::Pick(p) => pick(&p.values, time_spec, &p.index),
    }
}

/// `[a, b, c][index]`.
fn pick<T>(values: &[T], item: impl Fn(&T) -> String, index: &Expr) -> String {
    let parts: Vec<String> = values.iter().map(item).collect();
    format!("[{}][{}]", parts.join(", "), expr(index))
}

/// A point-to-point message size.
pub fn msg_size(s: &MsgSize) -> String {
    match s {
        MsgSize::Fixed(v) => size(v.value),
        MsgSize::Pick(p) => pick(&p.values, |v| size(v.value), &p.index),
    }
}

#[derive(Default)]
struct Printer {
    out: String,
    indent: usize,
}

impl Printer {
    fn line(&mut self, text: &str) {
        if !text.is_empty() {
            for _ in 0..self.indent {
                self.out.push_str("    ");
            }
            self.out.push_str(text);
        }
        self.out.push('\n');
    }

    fn leading(&mut self, lines: &[String]) {
        for line in lines {
            self.line(line);
        }
    }

    fn decl<T>(&mut self, decl: &Decl<T>, text: impl Fn(&T) -> String) {
        self.leading(&decl.trivia.leading);
        let line = with_trailing(text(&decl.value), &decl.trivia.trailing);
        self.line(&line);
    }

    fn block_body(&mut self, block: &Block) {
        for stmt in &block.stmts {
            self.stmt(stmt);
        }
        self.leading(&block.end_comments);
    }

    /// `{` ... `}`: the opening brace ends the current line (already started in `head`).
    fn braced(&mut self, head: String, block: &Block, tail: &str) {
        if block.stmts.is_empty() && block.end_comments.is_empty() {
            self.line(&format!("{head} {{}}{tail}"));
            return;
        }
        self.line(&format!("{head} {{"));
        self.indented(block);
        self.line(&format!("}}{tail}"));
    }

    fn stmt(&mut self, stmt: &Stmt) {
        self.leading(&stmt.trivia.leading);
        let mut suffix = String::new();
        if let Some(site) = &stmt.site {
            let _ = write!(suffix, " @ {}", string(&site.text));
        }
        let suffix = with_trailing(suffix, &stmt.trivia.trailing);
        match &stmt.kind {
            StmtKind::Loop(l) => {
                self.braced(loop_head(l), &l.body, &suffix);
            }
            StmtKind::If(i) => self.if_chain(i, &suffix),
            // The site is the receive's: it goes before the block.
            StmtKind::While(w) => {
                let mut head = while_head(w);
                if let Some(site) = &stmt.site {
                    let _ = write!(head, " @ {}", string(&site.text));
                }
                self.braced(
                    head,
                    &w.body,
                    &with_trailing(String::new(), &stmt.trivia.trailing),
                );
            }
            kind => {
                let text = simple(kind);
                self.line(&format!("{text}{suffix}"));
            }
        }
    }

    fn if_chain(&mut self, first: &If, suffix: &str) {
        self.line(&format!("if {} {{", expr(&first.cond)));
        let mut current = first;
        loop {
            self.indented(&current.then_block);
            match &current.else_branch {
                None => break,
                Some(Else::Block(block)) => {
                    self.line("} else {");
                    self.indented(block);
                    break;
                }
                Some(Else::If(next)) => {
                    self.line(&format!("}} else if {} {{", expr(&next.cond)));
                    current = next;
                }
            }
        }
        self.line(&format!("}}{suffix}"));
    }

    fn indented(&mut self, block: &Block) {
        self.indent += 1;
        self.block_body(block);
        self.indent -= 1;
    }
}

fn with_trailing(mut text: String, trailing: &Option<String>) -> String {
    if let Some(comment) = trailing {
        text.push(' ');
        text.push_str(comment);
    }
    text
}

fn simple(kind: &StmtKind) -> String {
    let mut out = String::new();
    match kind {
        StmtKind::Compute(c) => {
            let _ = write!(out, "compute {}", time_spec(&c.time));
            if let Some(ws) = &c.working_set {
                let _ = write!(out, " working_set {}", size(ws.value));
            }
            if let Some(n) = &c.polls {
                let _ = write!(out, " polls {}", n.value);
                if let Some(d) = &c.poll_cost {
                    let _ = write!(out, " each {}", duration(d.value));
                }
            }
        }
        StmtKind::P2p(p) => {
            if let Some(req) = &p.request {
                let _ = write!(out, "req {req} = ");
            }
            out.push_str(p.op.keyword());
            match p.recv.as_deref() {
                Some((rpeer, rsize)) => {
                    let _ = write!(
                        out,
                        " to {} {} from {} {}",
                        peer(&p.peer.value),
                        msg_size(&p.size),
                        peer(&rpeer.value),
                        msg_size(rsize)
                    );
                }
                None => {
                    let _ = write!(out, " {} {}", peer(&p.peer.value), msg_size(&p.size));
                }
            }
            if let Some(tag) = &p.tag {
                let _ = write!(out, " tag {}", tag.value);
            }
            if let Some(comm) = &p.comm {
                let _ = write!(out, " on {comm}");
            }
            if let Some(w) = &p.window {
                let _ = write!(out, " window {}", w.value);
            }
        }
        StmtKind::Collective(c) => {
            if let Some(req) = &c.request {
                let _ = write!(out, "req {req} = ");
            }
            if c.nonblocking {
                out.push('i');
            }
            out.push_str(c.op.keyword());
            if let Some(s) = &c.size {
                let _ = write!(out, " {}", size_spec(s));
            }
            if let Some(root) = &c.root {
                let _ = write!(out, " root {}", expr(root));
            }
            if let Some(comm) = &c.comm {
                let _ = write!(out, " on {comm}");
            }
        }
        StmtKind::Wait(w) => {
            let names: Vec<&str> = w.handles.iter().map(|h| h.name.as_str()).collect();
            let _ = write!(out, "{} {}", w.op.keyword(), names.join(", "));
        }
        StmtKind::CommDecl(d) => {
            let _ = write!(out, "comm {} = ", d.name);
            match &d.def {
                CommDef::Split { parent, color, key } => {
                    let _ = write!(out, "split({parent}, color = {}", expr(color));
                    if let Some(key) = key {
                        let _ = write!(out, ", key = {}", expr(key));
                    }
                    out.push(')');
                }
                CommDef::Dup { parent } => {
                    let _ = write!(out, "dup({parent})");
                }
                CommDef::CartSub { parent, keep } => {
                    let dims: Vec<String> = keep.iter().map(|d| d.value.to_string()).collect();
                    let _ = write!(out, "cart_sub({parent}, keep = [{}])", dims.join(", "));
                }
            }
        }
        StmtKind::Loop(_) | StmtKind::If(_) | StmtKind::While(_) => {}
    }
    out
}

/// `while recv PEER SIZE tag T [on COMM]`.
fn while_head(w: &While) -> String {
    format!("while {}", simple(&StmtKind::P2p(Box::new(w.recv.clone()))))
}

/// `loop COUNT` or `loop COUNT as NAME`.
fn loop_head(l: &Loop) -> String {
    match &l.var {
        Some(v) => format!("loop {} as {}", expr(&l.count), v.name),
        None => format!("loop {}", expr(&l.count)),
    }
}
