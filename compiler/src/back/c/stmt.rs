//! The C back end's statements and expressions: one block of C per skeleton statement,
//! headed by a comment with the statement and its line in the .skel file.

use perfskel_grammar::ast::*;
use perfskel_grammar::printer;

use super::text::{as_int, comment_safe, seconds_literal, strip_parens};
use super::{comm_name, Writer, INLINE_LIST};
use crate::semantics::Shape;

impl Writer<'_> {
    // ---- statements -----------------------------------------------------------------

    pub(super) fn block(&mut self, block: &Block) {
        let stmts: Vec<&Stmt> = block.stmts.iter().collect();
        self.stmts(&stmts);
        self.end_comments(block);
    }

    /// Statements in a row, the stretches timed in the measuring pass between
    /// `ps_own_begin()` and `ps_own_end(R)` (see `back::own_stretches`).
    pub(super) fn stmts(&mut self, stmts: &[&Stmt]) {
        let stretches = crate::back::own_stretches(stmts, &self.options.own_ratios);
        for (i, stmt) in stmts.iter().enumerate() {
            self.leading_comments(stmt);
            if let Some(&(_, _, ratio)) = stretches.iter().find(|s| s.0 == i) {
                self.line(&format!(
                    "ps_own_begin(); /* {} */",
                    crate::back::own_stretch_note(ratio)
                ));
            }
            self.stmt_after_comments(stmt);
            if let Some(&(_, _, ratio)) = stretches.iter().find(|s| s.1 == i) {
                self.line(&format!("ps_own_end({});", super::text::number(ratio)));
            }
        }
    }

    /// The comments after a block's last statement.
    pub(super) fn end_comments(&mut self, block: &Block) {
        for comment in &block.end_comments {
            self.comment_line(comment);
        }
    }

    fn comment_line(&mut self, comment: &str) {
        match comment.strip_prefix('#') {
            Some(text) => {
                let text = comment_safe(text.trim());
                self.line(&format!("/* {text} */"));
            }
            None => self.line(""),
        }
    }

    /// The comments and blank lines before a statement.
    fn leading_comments(&mut self, stmt: &Stmt) {
        for comment in &stmt.trivia.leading {
            self.comment_line(comment);
        }
    }

    /// A statement without the comments before it: its heading comment and its code.
    fn stmt_after_comments(&mut self, stmt: &Stmt) {
        let mut head = format!("{}:", self.options.source_name);
        match stmt.pos.span() {
            Some(span) => head.push_str(&self.line_of(span.start).to_string()),
            None => head.push_str("derived"),
        }
        let mut note = format!("{head}: {}", printer::stmt_head(stmt));
        if let Some(site) = &stmt.site {
            note.push_str(&format!(" @ {}", site.text));
        }
        if let Some(trailing) = &stmt.trivia.trailing {
            note.push_str(&format!(" ({})", trailing.trim_start_matches('#').trim()));
        }
        self.line(&format!("/* {} */", comment_safe(&note)));
        match &stmt.kind {
            StmtKind::Compute(c) => self.compute(c, stmt),
            StmtKind::P2p(p) => self.p2p(p, false),
            StmtKind::While(w) => {
                // The receive takes any tag; another tag than the loop's ends it.
                self.line("for (;;) {");
                self.indent += 1;
                self.p2p(&w.recv, true);
                let tag = w.recv.tag.map_or(0, |t| t.value);
                self.line(&format!("if (ps_status.MPI_TAG != {tag}) break;"));
                self.depth += 1;
                self.block(&w.body);
                self.depth -= 1;
                self.indent -= 1;
                self.line("}");
            }
            StmtKind::Collective(c) => self.collective(c, stmt),
            StmtKind::Wait(w) => self.wait(w),
            StmtKind::CommDecl(d) => self.comm_decl(d),
            StmtKind::Loop(l) => {
                let var = match &l.var {
                    Some(v) => self.loop_var(&v.name),
                    None => format!("it{}", self.depth.min(9)),
                };
                let count = self.expr(&l.count);
                let fill = crate::back::times_fill(stmt, &self.options.fill_loops);
                if fill {
                    self.line(&format!(
                        "ps_fill_begin(); /* {} */",
                        crate::back::FILL_NOTE
                    ));
                }
                let skipped = stmt
                    .pos
                    .span()
                    .is_some_and(|s| self.options.measure_skips.contains(&s.start));
                let skip = if skipped {
                    self.line(&format!("/* {} */", crate::back::SKIP_NOTE));
                    " && !ps_measure_skips()"
                } else {
                    ""
                };
                self.line(&format!(
                    "for (long long {var} = 0; {var} < {count}{skip}; {var}++) {{"
                ));
                self.indent += 1;
                self.depth += 1;
                self.block(&l.body);
                if fill {
                    self.line("ps_fill_iteration();");
                }
                self.depth -= 1;
                self.indent -= 1;
                self.line("}");
                if fill {
                    self.line("ps_fill_end();");
                }
            }
            StmtKind::If(i) => {
                let cond = self.expr(&i.cond);
                self.line(&format!("if ({}) {{", strip_parens(&cond)));
                self.if_rest(i);
            }
        }
    }

    fn if_rest(&mut self, i: &If) {
        self.indent += 1;
        self.block(&i.then_block);
        self.indent -= 1;
        match &i.else_branch {
            None => self.line("}"),
            Some(Else::Block(b)) => {
                self.line("} else {");
                self.indent += 1;
                self.block(b);
                self.indent -= 1;
                self.line("}");
            }
            Some(Else::If(next)) => {
                let cond = self.expr(&next.cond);
                self.line(&format!("}} else if ({}) {{", strip_parens(&cond)));
                self.if_rest(next);
            }
        }
    }

    /// A C array of `ctype` holding `items`, to index: a compound literal when short,
    /// else a static array before `main` (one per distinct list), which gcc does not copy
    /// onto the stack at every evaluation as it does a literal.
    fn list(&self, ctype: &str, items: Vec<String>) -> String {
        if items.len() <= INLINE_LIST {
            return format!("((const {ctype}[]){{{}}})", items.join(", "));
        }
        let mut lists = self.lists.borrow_mut();
        if let Some((_, _, name)) = lists.iter().find(|(t, i, _)| t == ctype && *i == items) {
            return name.clone();
        }
        let mut n = lists.len() + 1;
        let mut name = format!("list_{n}");
        while self.namer.is_taken(&name) {
            n += 1;
            name = format!("list_{n}");
        }
        lists.push((ctype.to_string(), items, name.clone()));
        name
    }

    fn table_name(&self, stmt: &Stmt, what: &str) -> String {
        let line = stmt.pos.span().map_or(0, |s| self.line_of(s.start));
        let mut name = format!("{what}_line{line}");
        let mut n = 2;
        while self.tables.iter().any(|t| t.contains(&format!(" {name}["))) {
            name = format!("{what}_line{line}_{n}");
            n += 1;
        }
        name
    }

    fn compute(&mut self, c: &Compute, stmt: &Stmt) {
        let ws = c.working_set.and_then(|w| w.value.bytes()).unwrap_or(0);
        let time = self.time_expr(&c.time, stmt);
        self.line(&format!("ps_compute({time}, {ws});"));
        if let Some(n) = &c.polls {
            self.line(&format!("ps_poll({}LL);", n.value));
        }
    }

    /// The C expression of a compute time; a pick of fixed times is a table indexed by
    /// its index, any other pick a chain of conditionals, so that only the chosen
    /// option draws a random number.
    fn time_expr(&mut self, time: &TimeSpec, stmt: &Stmt) -> String {
        let secs = |d: &Spanned<Duration>| seconds_literal(d.value);
        match time {
            TimeSpec::Fixed(d) => secs(d),
            TimeSpec::PerRank(values) => {
                let name = self.table_name(stmt, "seconds");
                let list: Vec<String> = values.iter().map(secs).collect();
                self.tables.push(format!(
                    "/* Compute seconds per rank of line {}. */\nstatic const double {name}[{}] = {{{}}};\n\n",
                    name.trim_start_matches("seconds_line"),
                    list.len(),
                    list.join(", ")
                ));
                format!("{name}[rank]")
            }
            TimeSpec::Normal { mean, stddev } => {
                format!("ps_normal({}, {})", secs(mean), secs(stddev))
            }
            TimeSpec::Uniform { low, high } => format!("ps_uniform({}, {})", secs(low), secs(high)),
            TimeSpec::Pick(p) => {
                let index = strip_parens(&self.expr(&p.index)).to_string();
                let fixed: Option<Vec<String>> = p
                    .values
                    .iter()
                    .map(|v| match v {
                        TimeSpec::Fixed(d) => Some(secs(d)),
                        _ => None,
                    })
                    .collect();
                if let Some(list) = fixed {
                    return format!("{}[{index}]", self.list("double", list));
                }
                let options: Vec<String> =
                    p.values.iter().map(|v| self.time_expr(v, stmt)).collect();
                let mut out = String::from("(");
                for (i, option) in options.iter().enumerate() {
                    if i + 1 == options.len() {
                        out.push_str(option);
                    } else {
                        out.push_str(&format!("{index} == {i} ? {option} : "));
                    }
                }
                out.push(')');
                out
            }
        }
    }

    /// The C expression of a message size in bytes; a pick is a table indexed by its
    /// index.
    fn size_expr(&self, size: &MsgSize) -> String {
        match size {
            MsgSize::Fixed(s) => s.value.bytes().unwrap_or(0).to_string(),
            MsgSize::Pick(p) => {
                let list: Vec<String> = p
                    .values
                    .iter()
                    .map(|s| s.value.bytes().unwrap_or(0).to_string())
                    .collect();
                format!(
                    "{}[{}]",
                    self.list("int", list),
                    strip_parens(&self.expr(&p.index))
                )
            }
        }
    }

    fn comm_var(&self, comm: &Option<Ident>) -> String {
        let name = comm_name(comm);
        self.comms.get(&name).cloned().unwrap_or(name)
    }

    /// The C expression of a peer on `comm`.
    fn peer(&self, comm: &str, peer: &Peer) -> String {
        let cvar = self
            .comms
            .get(comm)
            .cloned()
            .unwrap_or_else(|| comm.to_string());
        let (me, size) = if comm == "world" {
            ("rank_i".to_string(), "nranks_i".to_string())
        } else {
            (format!("{cvar}_rank"), format!("{cvar}_size"))
        };
        match peer {
            Peer::Any => "MPI_ANY_SOURCE".into(),
            Peer::Source => "ps_source".into(),
            Peer::Rank(e) => as_int(&self.expr(e)),
            Peer::Dir(d) => {
                if let Some(var) = self
                    .neighbours
                    .get(&(comm.to_string(), printer::direction(d)))
                {
                    return var.clone();
                }
                let shape = self.shape_of(comm);
                match (shape, d) {
                    (Shape::Tree { arity }, Direction::Parent) => {
                        format!("ps_tree_parent({me}, {arity})")
                    }
                    (Shape::Tree { arity }, Direction::Child(e)) => {
                        format!(
                            "ps_tree_child({me}, {size}, {arity}, {})",
                            strip_parens(&self.expr(e))
                        )
                    }
                    (Shape::Star, Direction::Hub) => format!("ps_star_hub({me})"),
                    (Shape::Star, Direction::Leaf(e)) => {
                        format!("ps_star_leaf({})", strip_parens(&self.expr(e)))
                    }
                    (Shape::Grid { .. }, Direction::AxisOf { dim, forward }) => format!(
                        "ps_cart_axis({cvar}, {}, {})",
                        strip_parens(&self.expr(dim)),
                        if *forward { 1 } else { -1 }
                    ),
                    (Shape::Grid { .. }, Direction::Shift { dim, disp }) => format!(
                        "ps_cart_axis({cvar}, {}, (int)({}))",
                        strip_parens(&self.expr(dim)),
                        strip_parens(&self.expr(disp))
                    ),
                    (Shape::Hypercube { .. }, Direction::Bit(e)) => {
                        format!("ps_bit({me}, {})", strip_parens(&self.expr(e)))
                    }
                    (Shape::Graph { .. }, Direction::Neighbor(e)) => format!(
                        "ps_graph_neighbor(graph_starts, graph_lists, {me}, {})",
                        strip_parens(&self.expr(e))
                    ),
                    // The checker rejects every other combination.
                    _ => "MPI_PROC_NULL".into(),
                }
            }
        }
    }

    fn region(&self, request: &Option<Ident>) -> String {
        let key = request.as_ref().map_or(String::new(), |r| r.name.clone());
        match self.regions.get(&key) {
            Some((0, _)) | None => "ps_rbuf".into(),
            Some((offset, _)) => format!("ps_rbuf + {offset}"),
        }
    }

    fn request_var(&self, request: &Option<Ident>) -> String {
        let Some((name, var)) = request
            .as_ref()
            .and_then(|r| Some((&r.name, self.requests.get(&r.name)?)))
        else {
            return "NULL".to_string();
        };
        match self.windows.get(name) {
            // A new slot of the window (see `window_trim`).
            Some(w) => format!("ps_window_post(&{var}, {w})"),
            None => format!("&{var}"),
        }
    }

    /// After a windowed post: the oldest operation completed while more than the window
    /// are in flight.
    fn window_trim(&mut self, request: &Option<Ident>) {
        let Some(r) = request else {
            return;
        };
        if let (Some(var), Some(w)) = (self.requests.get(&r.name), self.windows.get(&r.name)) {
            let line = format!("ps_window_trim(&{var}, {w});");
            self.line(&line);
        }
    }

    /// A point-to-point statement; `while_head`: the receive of a `while recv`, which
    /// takes any tag and keeps its status.
    fn p2p(&mut self, p: &P2p, while_head: bool) {
        let comm = comm_name(&p.comm);
        let cvar = self.comm_var(&p.comm);
        let tag = match p.tag {
            _ if while_head => "MPI_ANY_TAG".to_string(),
            Some(t) => t.value.to_string(),
            None => "0".to_string(),
        };
        let bytes = self.size_expr(&p.size);
        let peer = self.peer(&comm, &p.peer.value);
        let buf = self.region(&p.request);
        let req = self.request_var(&p.request);
        // A blocking receive from any rank keeps whom it received from, for `source`.
        let from_any = match p.op {
            P2pOp::Recv => p.peer.value == Peer::Any,
            P2pOp::Sendrecv => p
                .recv
                .as_deref()
                .is_some_and(|(peer, _)| peer.value == Peer::Any),
            _ => false,
        };
        let keeps_source = self.uses_source && from_any;
        let status = if keeps_source || while_head {
            "&ps_status"
        } else {
            "MPI_STATUS_IGNORE"
        };
        let call = match p.op {
            P2pOp::Send => format!("MPI_Send(ps_sbuf, {bytes}, MPI_BYTE, {peer}, {tag}, {cvar});"),
            P2pOp::Recv => {
                format!("MPI_Recv({buf}, {bytes}, MPI_BYTE, {peer}, {tag}, {cvar}, {status});")
            }
            P2pOp::Isend => {
                format!("MPI_Isend(ps_sbuf, {bytes}, MPI_BYTE, {peer}, {tag}, {cvar}, {req});")
            }
            P2pOp::Irecv => {
                format!("MPI_Irecv({buf}, {bytes}, MPI_BYTE, {peer}, {tag}, {cvar}, {req});")
            }
            P2pOp::Sendrecv => {
                let (rpeer, rsize) = match p.recv.as_deref() {
                    Some((peer, size)) => (self.peer(&comm, &peer.value), self.size_expr(size)),
                    None => ("MPI_PROC_NULL".into(), "0".into()),
                };
                format!(
                    "MPI_Sendrecv(ps_sbuf, {bytes}, MPI_BYTE, {peer}, {tag}, {buf}, {rsize}, MPI_BYTE, {rpeer}, {tag}, {cvar}, {status});"
                )
            }
        };
        self.line(&call);
        if keeps_source {
            self.line("ps_source = ps_status.MPI_SOURCE;");
        }
        self.window_trim(&p.request);
    }

    fn collective(&mut self, c: &Collective, stmt: &Stmt) {
        let cvar = self.comm_var(&c.comm);
        let rbuf = self.region(&c.request);
        let nb = c.nonblocking;
        let name = |base: &str| {
            let mut s = String::from("MPI_");
            if nb {
                s.push('I');
                s.push_str(base);
            } else {
                let mut chars = base.chars();
                if let Some(first) = chars.next() {
                    s.push(first.to_ascii_uppercase());
                    s.push_str(chars.as_str());
                }
            }
            s
        };
        let tail = if nb {
            format!("{cvar}, {});", self.request_var(&c.request))
        } else {
            format!("{cvar});")
        };
        let root = c
            .root
            .as_ref()
            .map_or("0".to_string(), |e| as_int(&self.expr(e)));
        let bytes = match &c.size {
            Some(SizeSpec::Fixed(s)) => s.value.bytes().unwrap_or(0),
            _ => 0,
        };
        // Reductions work on doubles when the size allows, else on bytes.
        let (count, dtype) = if bytes % 8 == 0 {
            (bytes / 8, "MPI_DOUBLE")
        } else {
            (bytes, "MPI_UNSIGNED_CHAR")
        };
        let call = match c.op {
            CollOp::Barrier => format!("{}({tail}", name("barrier")),
            CollOp::Bcast => format!(
                "{}({rbuf}, {bytes}, MPI_BYTE, {root}, {tail}",
                name("bcast")
            ),
            CollOp::Reduce => format!(
                "{}(ps_sbuf, {rbuf}, {count}, {dtype}, MPI_SUM, {root}, {tail}",
                name("reduce")
            ),
            CollOp::Allreduce => format!(
                "{}(ps_sbuf, {rbuf}, {count}, {dtype}, MPI_SUM, {tail}",
                name("allreduce")
            ),
            CollOp::Scan => format!(
                "{}(ps_sbuf, {rbuf}, {count}, {dtype}, MPI_SUM, {tail}",
                name("scan")
            ),
            CollOp::ReduceScatter => format!(
                "{}(ps_sbuf, {rbuf}, {count}, {dtype}, MPI_SUM, {tail}",
                name("reduce_scatter_block")
            ),
            CollOp::Gather => format!(
                "{}(ps_sbuf, {bytes}, MPI_BYTE, {rbuf}, {bytes}, MPI_BYTE, {root}, {tail}",
                name("gather")
            ),
            CollOp::Scatter => format!(
                "{}(ps_sbuf, {bytes}, MPI_BYTE, {rbuf}, {bytes}, MPI_BYTE, {root}, {tail}",
                name("scatter")
            ),
            CollOp::Allgather => format!(
                "{}(ps_sbuf, {bytes}, MPI_BYTE, {rbuf}, {bytes}, MPI_BYTE, {tail}",
                name("allgather")
            ),
            CollOp::Alltoall => format!(
                "{}(ps_sbuf, {bytes}, MPI_BYTE, {rbuf}, {bytes}, MPI_BYTE, {tail}",
                name("alltoall")
            ),
            CollOp::Gatherv | CollOp::Scatterv | CollOp::Allgatherv | CollOp::Alltoallv => {
                return self.vector_collective(c, stmt, &cvar, &rbuf, &root, &tail, &name);
            }
        };
        self.line(&call);
    }

    #[allow(clippy::too_many_arguments)]
    fn vector_collective(
        &mut self,
        c: &Collective,
        stmt: &Stmt,
        cvar: &str,
        rbuf: &str,
        root: &str,
        tail: &str,
        name: &dyn Fn(&str) -> String,
    ) {
        let n = self.n_ranks() as usize;
        let sizes: Vec<u64> = match &c.size {
            Some(SizeSpec::PerRank(v)) => v.iter().map(|s| s.value.bytes().unwrap_or(0)).collect(),
            Some(SizeSpec::Fixed(s)) => vec![s.value.bytes().unwrap_or(0); n],
            None => vec![0; n],
        };
        let table = self.table_name(stmt, "bytes");
        let list: Vec<String> = sizes.iter().map(u64::to_string).collect();
        let own = if c.op == CollOp::Alltoallv {
            format!(", {table}_own[{n}], {table}_own_displs[{n}]")
        } else {
            String::new()
        };
        self.tables.push(format!(
            "/* Bytes per rank of line {}; counts and displacements over its communicator. */\nstatic const int {table}[{n}] = {{{}}};\nstatic int {table}_counts[{n}], {table}_displs[{n}]{own};\n\n",
            table.trim_start_matches("bytes_line"),
            list.join(", ")
        ));
        self.line(&format!(
            "int {table}_mine = ps_vcounts({cvar}, {table}, {table}_counts, {table}_displs);"
        ));
        let (counts, displs) = (format!("{table}_counts"), format!("{table}_displs"));
        let call = match c.op {
            CollOp::Gatherv => format!(
                "{}(ps_sbuf, {table}_mine, MPI_BYTE, {rbuf}, {counts}, {displs}, MPI_BYTE, {root}, {tail}",
                name("gatherv")
            ),
            CollOp::Scatterv => format!(
                "{}(ps_sbuf, {counts}, {displs}, MPI_BYTE, {rbuf}, {table}_mine, MPI_BYTE, {root}, {tail}",
                name("scatterv")
            ),
            CollOp::Allgatherv => format!(
                "{}(ps_sbuf, {table}_mine, MPI_BYTE, {rbuf}, {counts}, {displs}, MPI_BYTE, {tail}",
                name("allgatherv")
            ),
            _ => {
                self.line(&format!(
                    "ps_uniform_counts({cvar}, {table}_mine, {table}_own, {table}_own_displs);"
                ));
                format!(
                    "{}(ps_sbuf, {table}_own, {table}_own_displs, MPI_BYTE, {rbuf}, {counts}, {displs}, MPI_BYTE, {tail}",
                    name("alltoallv")
                )
            }
        };
        self.line(&call);
    }

    /// The C variable of request handle `name`.
    fn handle_var(&self, name: &str) -> String {
        self.requests
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_string())
    }

    fn wait(&mut self, w: &Wait) {
        // Windowed handles complete every operation they have in flight (the checker
        // allows them in `wait` and `waitall` only).
        let (windowed, plain): (Vec<&Ident>, Vec<&Ident>) = w
            .handles
            .iter()
            .partition(|h| self.windows.contains_key(&h.name));
        for h in windowed {
            let line = format!("ps_window_wait(&{});", self.handle_var(&h.name));
            self.line(&line);
        }
        if plain.is_empty() {
            return;
        }
        let vars: Vec<String> = plain.iter().map(|h| self.handle_var(&h.name)).collect();
        let list = || {
            let ptrs: Vec<String> = vars.iter().map(|v| format!("&{v}")).collect();
            format!("(MPI_Request *[]){{{}}}", ptrs.join(", "))
        };
        let call = match w.op {
            WaitOp::Wait => format!("MPI_Wait(&{}, MPI_STATUS_IGNORE);", vars.join("")),
            WaitOp::Test => format!("ps_test(&{});", vars.join("")),
            WaitOp::Waitall => format!("ps_waitall({}, {});", vars.len(), list()),
            WaitOp::Waitany => format!("ps_waitany({}, {});", vars.len(), list()),
        };
        self.line(&call);
    }

    fn comm_decl(&mut self, d: &CommDecl) {
        let var = self
            .comms
            .get(&d.name.name)
            .cloned()
            .unwrap_or_else(|| d.name.name.clone());
        let parent = self
            .comms
            .get(&d.def.parent().name)
            .cloned()
            .unwrap_or_else(|| d.def.parent().name.clone());
        let parent_rank = if d.def.parent().name == "world" {
            "rank_i".to_string()
        } else {
            format!("{parent}_rank")
        };
        // Ranks outside the parent hold MPI_COMM_NULL there and take no part.
        let outside = d.def.parent().name != "world";
        if outside {
            self.line(&format!("if ({parent} != MPI_COMM_NULL) {{"));
            self.indent += 1;
        }
        match &d.def {
            CommDef::Split { color, key, .. } => {
                let color = strip_parens(&self.expr(color)).to_string();
                let key = key.as_ref().map_or(parent_rank, |k| as_int(&self.expr(k)));
                self.line(&format!(
                    "MPI_Comm_split({parent}, {color} >= 0 ? (int)({color}) : MPI_UNDEFINED, {key}, &{var});"
                ));
            }
            CommDef::Dup { .. } => self.line(&format!("MPI_Comm_dup({parent}, &{var});")),
            CommDef::CartSub { keep, .. } => {
                let ndims = match self.shape_of(&d.def.parent().name) {
                    Shape::Grid { dims, .. } => dims.len(),
                    _ => 0,
                };
                let remain: Vec<&str> = (0..ndims)
                    .map(|i| {
                        if keep.iter().any(|k| k.value as usize == i) {
                            "1"
                        } else {
                            "0"
                        }
                    })
                    .collect();
                self.line(&format!(
                    "MPI_Cart_sub({parent}, (const int[]){{{}}}, &{var});",
                    remain.join(", ")
                ));
            }
        }
        if outside {
            self.indent -= 1;
            self.line("}");
        }
        self.line(&format!("if ({var} != MPI_COMM_NULL) {{"));
        self.indent += 1;
        self.line(&format!("MPI_Comm_rank({var}, &{var}_rank);"));
        self.line(&format!("MPI_Comm_size({var}, &{var}_size);"));
        self.neighbour_shifts(&d.name.name.clone());
        self.indent -= 1;
        self.line("}");
    }

    // ---- expressions ----------------------------------------------------------------

    /// The C variable of a loop variable.
    fn loop_var(&self, name: &str) -> String {
        self.loop_vars
            .get(name)
            .cloned()
            .unwrap_or_else(|| format!("v_{name}"))
    }

    /// A C expression (of type long long, or a condition) with the skeleton's meaning.
    fn expr(&self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Int(v) => {
                if *v < 0 {
                    format!("({v})")
                } else {
                    v.to_string()
                }
            }
            ExprKind::Bool(b) => (if *b { "1" } else { "0" }).into(),
            ExprKind::Rank => "rank".into(),
            ExprKind::NRanks => "nranks".into(),
            ExprKind::Coord(d) => format!("coords[{d}]"),
            ExprKind::Var(v) => self.loop_var(&v.name),
            // This rank's entry of a table (`check` made its length the rank count).
            ExprKind::PerRank(values) => {
                let parts: Vec<String> = values.iter().map(|v| format!("{v}LL")).collect();
                format!("{}[rank]", self.list("long long", parts))
            }
            // The entry at the index (`check` ran every index the program reaches).
            ExprKind::Pick(values, index) => {
                let parts: Vec<String> = values.iter().map(|v| format!("{v}LL")).collect();
                format!(
                    "{}[{}]",
                    self.list("long long", parts),
                    strip_parens(&self.expr(index))
                )
            }
            ExprKind::Unary(UnaryOp::Neg, x) => format!("(-{})", self.expr(x)),
            ExprKind::Unary(UnaryOp::Not, x) => format!("(!{})", self.expr(x)),
            ExprKind::Binary(op, l, r) => {
                let (a, b) = (self.expr(l), self.expr(r));
                match op {
                    BinOp::Div => format!("ps_div({}, {})", strip_parens(&a), strip_parens(&b)),
                    BinOp::Rem => format!("ps_mod({}, {})", strip_parens(&a), strip_parens(&b)),
                    BinOp::And => format!("({a} && {b})"),
                    BinOp::Or => format!("({a} || {b})"),
                    other => format!("({a} {} {b})", other.symbol()),
                }
            }
        }
    }
}
