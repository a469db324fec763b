//! The C-MPI back end: a checked skeleton → one self-contained C file, the runtime header
//! `perfskel.h` (from `runtime/c/`), a Makefile and a Slurm batch template.
//!
//! The program reads like the skeleton: one block of C per statement, headed by a
//! comment with the statement and its line in the .skel file (`/* stencil2d.skel:11:
//! compute 20 ms working_set 2 MiB */`); communicators and request handles keep their
//! names (escaped by the shared [`Namer`] when they are C keywords). Grid topologies
//! become `MPI_Cart_create` communicators and their directions `MPI_Cart_shift`
//! neighbours computed once after the communicator is made; other topologies compute
//! their peers with the header's helpers. Every operation maps to the MPI call of the
//! same name on contiguous bytes (reductions on doubles when the size allows).

use std::collections::BTreeMap;
use std::fmt::Write;

use perfskel_grammar::ast::*;
use perfskel_grammar::printer;

use super::namer::{Language, Namer};
use super::{GeneratedFile, Options};
use crate::check::Info;
use crate::semantics::Shape;

/// The C runtime header, copied into every output directory.
pub const RUNTIME_HEADER: &str = include_str!("../../../runtime/c/perfskel.h");

/// Names the generated code and the header use, which skeleton names must avoid.
const RESERVED: &[&str] = &[
    "rank",
    "nranks",
    "coords",
    "world",
    "dims",
    "periods",
    "argc",
    "argv",
    "start",
    "it0",
    "it1",
    "it2",
    "it3",
    "it4",
    "it5",
    "it6",
    "it7",
    "it8",
    "it9",
    "graph_starts",
    "graph_lists",
    "ps_sbuf",
    "ps_rbuf",
    "working_sets",
    "ps_src",
];

/// Emits the files of the C program for `program` (checked, giving `info`).
pub fn emit(program: &Program, info: &Info, options: &Options) -> Vec<GeneratedFile> {
    let name = file_stem(&program.name.value.name);
    let source = Writer::new(program, info, options).program();
    vec![
        GeneratedFile {
            path: format!("{name}.c"),
            contents: source,
        },
        GeneratedFile {
            path: "perfskel.h".into(),
            contents: RUNTIME_HEADER.into(),
        },
        GeneratedFile {
            path: "Makefile".into(),
            contents: makefile(&name),
        },
        GeneratedFile {
            path: "job.slurm".into(),
            contents: slurm(program, options),
        },
    ]
}

fn file_stem(name: &str) -> String {
    let stem: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() || stem == "perfskel" {
        format!("skel_{stem}")
    } else {
        stem
    }
}

fn makefile(name: &str) -> String {
    format!(
        "# Builds the performance skeleton `{name}` into ./skeleton.\n\
         #   make                        OpenMPI (or whatever `mpicc` is)\n\
         #   make MPICC=mpicc.mpich      MPICH\n\
         # Changing MPICC or CFLAGS rebuilds.\n\
         MPICC ?= mpicc\n\
         CFLAGS ?= -O2 -Wall -Wextra -Werror\n\
         LDLIBS ?= -lm\n\
         \n\
         skeleton: {name}.c perfskel.h .build-flags\n\
         \t$(MPICC) $(CFLAGS) -o $@ {name}.c $(LDLIBS)\n\
         \n\
         .build-flags: FORCE\n\
         \t@echo '$(MPICC) $(CFLAGS) $(LDLIBS)' | cmp -s - $@ || echo '$(MPICC) $(CFLAGS) $(LDLIBS)' > $@\n\
         \n\
         clean:\n\
         \trm -f skeleton .build-flags\n\
         \n\
         .PHONY: clean FORCE\n\
         FORCE:\n"
    )
}

fn slurm(program: &Program, options: &Options) -> String {
    let name = &program.name.value.name;
    let ranks = program.ranks.value;
    let target = options.app_time_s / options.ratio.max(1) as f64;
    // Generous: set-up, calibration and a slow machine fit in it.
    let minutes = ((target * 20.0) / 60.0).ceil().max(5.0) as u64;
    format!(
        "#!/bin/bash\n\
         # Performance skeleton `{name}` at 1:{ratio}: the application's predicted time is\n\
         # the skeleton's time x {ratio}. Build it first with `make` (MPICC=your mpicc).\n\
         #SBATCH --job-name={name}-skeleton\n\
         #SBATCH --ntasks={ranks}\n\
         #SBATCH --time={h:02}:{m:02}:00\n\
         #SBATCH --output={name}-skeleton-%j.out\n\
         \n\
         srun ./skeleton\n",
        ratio = options.ratio,
        h = minutes / 60,
        m = minutes % 60
    )
}

/// Bytes a statement needs in the send buffer and in its receive region.
#[derive(Default)]
struct Needs {
    send: u64,
    recv: u64,
}

struct Writer<'a> {
    program: &'a Program,
    info: &'a Info,
    options: &'a Options,
    namer: Namer,
    /// Skeleton communicator name → C variable (`world` included).
    comms: BTreeMap<String, String>,
    /// Request handle → C variable.
    requests: BTreeMap<String, String>,
    /// (communicator, direction text) → C variable holding the neighbour.
    neighbours: BTreeMap<(String, String), String>,
    /// Receive regions: request handle (or "" for blocking operations) → (offset, size).
    regions: BTreeMap<String, (u64, u64)>,
    send_bytes: u64,
    /// Static tables (per-rank times and sizes) emitted before `main`.
    tables: Vec<String>,
    out: String,
    indent: usize,
    depth: usize,
}

impl<'a> Writer<'a> {
    fn new(program: &'a Program, info: &'a Info, options: &'a Options) -> Writer<'a> {
        let mut namer = Namer::new(Language::C, RESERVED);
        let mut comms = BTreeMap::new();
        comms.insert("world".to_string(), "world".to_string());
        for comm in &info.comms {
            comms.insert(comm.name.clone(), namer.call(&comm.name));
        }
        let requests = info
            .requests
            .iter()
            .map(|r| (r.clone(), namer.call(r)))
            .collect();
        let mut w = Writer {
            program,
            info,
            options,
            namer,
            comms,
            requests,
            neighbours: BTreeMap::new(),
            regions: BTreeMap::new(),
            send_bytes: 0,
            tables: Vec::new(),
            out: String::new(),
            indent: 0,
            depth: 0,
        };
        w.plan_block(&program.body);
        w.layout_regions();
        w
    }

    fn n_ranks(&self) -> u64 {
        self.program.ranks.value
    }

    fn shape_of(&self, comm: &str) -> &'a Shape {
        if comm == "world" {
            return &self.info.world;
        }
        self.info
            .comms
            .iter()
            .find(|c| c.name == comm)
            .map_or(&self.info.world, |c| &c.shape)
    }

    // ---- planning: neighbours and buffers -------------------------------------------

    fn plan_block(&mut self, block: &Block) {
        for stmt in &block.stmts {
            match &stmt.kind {
                StmtKind::Loop(l) => self.plan_block(&l.body),
                StmtKind::If(i) => {
                    let mut current = i;
                    loop {
                        self.plan_block(&current.then_block);
                        match &current.else_branch {
                            None => break,
                            Some(Else::Block(b)) => {
                                self.plan_block(b);
                                break;
                            }
                            Some(Else::If(next)) => current = next,
                        }
                    }
                }
                StmtKind::P2p(p) => {
                    let comm = comm_name(&p.comm);
                    self.plan_peer(&comm, &p.peer.value);
                    if let Some((peer, _)) = &p.recv {
                        self.plan_peer(&comm, &peer.value);
                    }
                    let bytes = |s: &Spanned<Size>| s.value.bytes().unwrap_or(0);
                    let needs = match p.op {
                        P2pOp::Send | P2pOp::Isend => Needs {
                            send: bytes(&p.size),
                            recv: 0,
                        },
                        P2pOp::Recv | P2pOp::Irecv => Needs {
                            send: 0,
                            recv: bytes(&p.size),
                        },
                        P2pOp::Sendrecv => Needs {
                            send: bytes(&p.size),
                            recv: p.recv.as_ref().map_or(0, |(_, s)| bytes(s)),
                        },
                    };
                    self.need(p.request.as_ref(), needs);
                }
                StmtKind::Collective(c) => {
                    let needs = self.collective_needs(c);
                    self.need(c.request.as_ref(), needs);
                }
                _ => {}
            }
        }
    }

    fn need(&mut self, request: Option<&Ident>, needs: Needs) {
        self.send_bytes = self.send_bytes.max(needs.send);
        let key = request.map_or(String::new(), |r| r.name.clone());
        let region = self.regions.entry(key).or_insert((0, 0));
        region.1 = region.1.max(needs.recv);
    }

    fn collective_needs(&self, c: &Collective) -> Needs {
        let p = self.n_ranks();
        let b = match &c.size {
            None => 0,
            Some(SizeSpec::Fixed(s)) => s.value.bytes().unwrap_or(0),
            Some(SizeSpec::PerRank(v)) => {
                v.iter().filter_map(|s| s.value.bytes()).max().unwrap_or(0)
            }
        };
        let (send, recv) = match c.op {
            CollOp::Barrier => (0, 0),
            CollOp::Bcast => (0, b),
            CollOp::Reduce | CollOp::Allreduce | CollOp::Scan => (b, b),
            CollOp::Gather | CollOp::Gatherv | CollOp::Allgather | CollOp::Allgatherv => (b, b * p),
            CollOp::Scatter | CollOp::Scatterv | CollOp::ReduceScatter => (b * p, b),
            CollOp::Alltoall | CollOp::Alltoallv => (b * p, b * p),
        };
        Needs { send, recv }
    }

    fn layout_regions(&mut self) {
        let mut offset = 0;
        for region in self.regions.values_mut() {
            region.0 = offset;
            // Keep regions 64-byte aligned.
            offset += region.1.div_ceil(64) * 64;
        }
    }

    /// Registers the neighbour variable a grid direction needs.
    fn plan_peer(&mut self, comm: &str, peer: &Peer) {
        let Peer::Dir(dir) = peer else { return };
        if !matches!(self.shape_of(comm), Shape::Grid { .. }) {
            return;
        }
        if !matches!(
            dir,
            Direction::Axis(_) | Direction::Offset(_) | Direction::Next | Direction::Prev
        ) {
            return;
        }
        let key = (comm.to_string(), printer::direction(dir));
        if self.neighbours.contains_key(&key) {
            return;
        }
        let base = direction_var(dir);
        let var = if comm == "world" {
            self.namer.call(&base)
        } else {
            let prefix = self.comms.get(comm).cloned().unwrap_or_default();
            self.namer.call(&format!("{prefix}_{base}"))
        };
        self.neighbours.insert(key, var);
    }

    // ---- output ---------------------------------------------------------------------

    fn line(&mut self, text: &str) {
        if text.is_empty() {
            self.out.push('\n');
            return;
        }
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn program(mut self) -> String {
        let p = self.program;
        let name = &p.name.value.name;
        let target = self.options.app_time_s / self.options.ratio.max(1) as f64;
        let mut body = std::mem::take(&mut self.out);
        self.indent = 1;
        self.block(&p.body);
        std::mem::swap(&mut body, &mut self.out);

        let _ = writeln!(
            self.out,
            "/* Performance skeleton `{}`, generated by perfskel from {} at ratio 1:{}.\n * It stands for an application run of {} s and should run {} s here; rank 0 prints\n * one perfskel-result line. Build with the Makefile beside it. Do not edit: change\n * the skeleton and compile it again. */",
            comment_safe(name),
            comment_safe(&self.options.source_name),
            self.options.ratio,
            number(self.options.app_time_s),
            number(target),
        );
        self.out.push_str("#include \"perfskel.h\"\n\n");
        for table in std::mem::take(&mut self.tables) {
            self.out.push_str(&table);
        }
        if let Shape::Graph { neighbors } = &self.info.world {
            let mut starts = vec![0usize];
            let mut lists = Vec::new();
            for list in neighbors {
                lists.extend(list.iter().map(u64::to_string));
                starts.push(lists.len());
            }
            let starts: Vec<String> = starts.iter().map(usize::to_string).collect();
            if lists.is_empty() {
                lists.push("-1".into());
            }
            let _ = writeln!(
                self.out,
                "/* The graph topology: rank r's neighbours are graph_lists[graph_starts[r] ...]. */\nstatic const int graph_starts[] = {{{}}};\nstatic const int graph_lists[] = {{{}}};\n",
                starts.join(", "),
                lists.join(", ")
            );
        }
        self.out.push_str("int main(int argc, char **argv) {\n");
        self.indent = 1;
        self.line("MPI_Init(&argc, &argv);");
        self.line(&format!("ps_require_ranks({});", p.ranks.value));
        self.line("int rank_i, nranks_i;");
        self.line("MPI_Comm_rank(MPI_COMM_WORLD, &rank_i);");
        self.line("MPI_Comm_size(MPI_COMM_WORLD, &nranks_i);");
        self.line("const long long rank = rank_i, nranks = nranks_i;");
        self.line("(void)rank;");
        self.line("(void)nranks;");
        if !self.neighbours.is_empty() {
            self.line("int ps_src; /* the unused half of MPI_Cart_shift */");
            self.line("(void)ps_src;");
        }
        self.setup_world();
        self.setup_names();
        let regions_end = self
            .regions
            .values()
            .map(|r| r.0 + r.1.div_ceil(64) * 64)
            .max()
            .unwrap_or(0);
        self.line(&format!("ps_buffers({}, {regions_end});", self.send_bytes));
        let mut sets: Vec<u64> = Vec::new();
        collect_working_sets(&p.body, &mut sets);
        sets.sort_unstable();
        sets.dedup();
        if sets.is_empty() {
            self.line("ps_calibrate(NULL, 0);");
        } else {
            let list: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            self.line(&format!(
                "const size_t working_sets[] = {{{}}};",
                list.join(", ")
            ));
            self.line(&format!("ps_calibrate(working_sets, {});", sets.len()));
        }
        self.line("");
        self.line("double start = ps_begin();");
        self.out.push_str(&body);
        let end = format!(
            "ps_end(start, \"{}\", {}ULL, {});",
            c_string(name),
            self.options.ratio,
            number(self.options.app_time_s)
        );
        self.line("");
        self.line(&end);
        for (skel, var) in &self.comms.clone() {
            if skel != "world" {
                self.line(&format!(
                    "if ({var} != MPI_COMM_NULL) MPI_Comm_free(&{var});"
                ));
            }
        }
        if matches!(self.info.world, Shape::Grid { .. }) {
            self.line("MPI_Comm_free(&world);");
        }
        self.line("MPI_Finalize();");
        self.line("return 0;");
        self.out.push_str("}\n");
        self.out
    }

    fn setup_world(&mut self) {
        let topology = printer::topology(&self.program.topology.value);
        self.line(&format!("/* topology {topology} */"));
        match &self.info.world {
            Shape::Grid { dims, periodic } => {
                let n = dims.len();
                let d: Vec<String> = dims.iter().map(u64::to_string).collect();
                let per: Vec<&str> = periodic
                    .iter()
                    .map(|&b| if b { "1" } else { "0" })
                    .collect();
                self.line(&format!(
                    "int dims[{n}] = {{{}}}, periods[{n}] = {{{}}};",
                    d.join(", "),
                    per.join(", ")
                ));
                self.line("MPI_Comm world;");
                self.line(&format!(
                    "MPI_Cart_create(MPI_COMM_WORLD, {n}, dims, periods, 0, &world);"
                ));
                self.line(&format!("int coords_i[{n}];"));
                self.line(&format!("MPI_Cart_coords(world, rank_i, {n}, coords_i);"));
                let c: Vec<String> = (0..n).map(|i| format!("coords_i[{i}]")).collect();
                self.line(&format!(
                    "const long long coords[{n}] = {{{}}};",
                    c.join(", ")
                ));
                self.line("(void)coords;");
                self.neighbour_shifts("world");
            }
            Shape::Hypercube { bits } => {
                let n = (*bits).max(1);
                let c: Vec<String> = (0..n).map(|i| format!("(rank >> {i}) & 1")).collect();
                self.line("MPI_Comm world = MPI_COMM_WORLD;");
                self.line(&format!(
                    "const long long coords[{n}] = {{{}}};",
                    c.join(", ")
                ));
                self.line("(void)coords;");
            }
            _ => self.line("MPI_Comm world = MPI_COMM_WORLD;"),
        }
    }

    /// Declares communicator and request variables.
    fn setup_names(&mut self) {
        for (skel, var) in self.comms.clone() {
            if skel != "world" {
                self.line(&format!("MPI_Comm {var} = MPI_COMM_NULL;"));
                self.line(&format!("int {var}_rank = -1, {var}_size = 0;"));
                self.line(&format!("(void){var}_rank;"));
                self.line(&format!("(void){var}_size;"));
            }
        }
        for ((comm, _), var) in self.neighbours.clone() {
            if comm != "world" {
                self.line(&format!("int {var} = MPI_PROC_NULL;"));
            }
        }
        for var in self.requests.clone().values() {
            self.line(&format!("MPI_Request {var} = MPI_REQUEST_NULL;"));
        }
    }

    /// `MPI_Cart_shift` for every direction used on `comm` (a grid).
    fn neighbour_shifts(&mut self, comm: &str) {
        let cvar = self
            .comms
            .get(comm)
            .cloned()
            .unwrap_or_else(|| comm.to_string());
        let ndims = match self.shape_of(comm) {
            Shape::Grid { dims, .. } => dims.len(),
            _ => return,
        };
        let entries: Vec<(String, String)> = self
            .neighbours
            .iter()
            .filter(|((c, _), _)| c == comm)
            .map(|((_, d), v)| (d.clone(), v.clone()))
            .collect();
        if entries.is_empty() {
            return;
        }
        if comm == "world" {
            let vars: Vec<&str> = entries.iter().map(|(_, v)| v.as_str()).collect();
            self.line(&format!("int {};", vars.join(", ")));
        }
        for (text, var) in entries {
            let dir = self.find_direction(&text);
            match dir {
                Some(Direction::Offset(offsets)) => {
                    let o: Vec<String> = offsets.iter().map(i64::to_string).collect();
                    self.line(&format!(
                        "{var} = ps_cart_offset({cvar}, {ndims}, (const int[]){{{}}});",
                        o.join(", ")
                    ));
                }
                Some(d) => {
                    let (dim, step) = axis_of(&d);
                    self.line(&format!(
                        "MPI_Cart_shift({cvar}, {dim}, {step}, &ps_src, &{var}); /* {text} */"
                    ));
                }
                None => {}
            }
        }
    }

    fn find_direction(&self, text: &str) -> Option<Direction> {
        fn search(block: &Block, text: &str) -> Option<Direction> {
            for stmt in &block.stmts {
                let found = match &stmt.kind {
                    StmtKind::P2p(p) => {
                        [Some(&p.peer.value), p.recv.as_ref().map(|(q, _)| &q.value)]
                            .into_iter()
                            .flatten()
                            .find_map(|peer| match peer {
                                Peer::Dir(d) if printer::direction(d) == text => Some(d.clone()),
                                _ => None,
                            })
                    }
                    StmtKind::Loop(l) => search(&l.body, text),
                    StmtKind::If(i) => {
                        let mut current = i;
                        loop {
                            if let Some(d) = search(&current.then_block, text) {
                                break Some(d);
                            }
                            match &current.else_branch {
                                None => break None,
                                Some(Else::Block(b)) => break search(b, text),
                                Some(Else::If(next)) => current = next,
                            }
                        }
                    }
                    _ => None,
                };
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        search(&self.program.body, text)
    }

    // ---- statements -----------------------------------------------------------------

    fn block(&mut self, block: &Block) {
        for stmt in &block.stmts {
            self.stmt(stmt);
        }
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

    fn stmt(&mut self, stmt: &Stmt) {
        for comment in &stmt.trivia.leading {
            self.comment_line(comment);
        }
        let mut head = format!("{}:", self.options.source_name);
        match stmt.pos.span() {
            Some(span) => head.push_str(&self.options.line_of(span.start).to_string()),
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
            StmtKind::P2p(p) => self.p2p(p),
            StmtKind::Collective(c) => self.collective(c, stmt),
            StmtKind::Wait(w) => self.wait(w),
            StmtKind::CommDecl(d) => self.comm_decl(d),
            StmtKind::Loop(l) => {
                let var = format!("it{}", self.depth.min(9));
                let count = self.expr(&l.count);
                self.line(&format!(
                    "for (long long {var} = 0; {var} < {count}; {var}++) {{"
                ));
                self.indent += 1;
                self.depth += 1;
                self.block(&l.body);
                self.depth -= 1;
                self.indent -= 1;
                self.line("}");
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

    fn table_name(&self, stmt: &Stmt, what: &str) -> String {
        let line = stmt.pos.span().map_or(0, |s| self.options.line_of(s.start));
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
        let secs = |d: &Spanned<Duration>| seconds_literal(d.value);
        let time = match &c.time {
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
        };
        self.line(&format!("ps_compute({time}, {ws});"));
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
        request
            .as_ref()
            .and_then(|r| self.requests.get(&r.name))
            .map_or_else(|| "NULL".to_string(), |v| format!("&{v}"))
    }

    fn p2p(&mut self, p: &P2p) {
        let comm = comm_name(&p.comm);
        let cvar = self.comm_var(&p.comm);
        let tag = p.tag.map_or(0, |t| t.value);
        let bytes = p.size.value.bytes().unwrap_or(0);
        let peer = self.peer(&comm, &p.peer.value);
        let buf = self.region(&p.request);
        let req = self.request_var(&p.request);
        let call = match p.op {
            P2pOp::Send => format!("MPI_Send(ps_sbuf, {bytes}, MPI_BYTE, {peer}, {tag}, {cvar});"),
            P2pOp::Recv => format!(
                "MPI_Recv({buf}, {bytes}, MPI_BYTE, {peer}, {tag}, {cvar}, MPI_STATUS_IGNORE);"
            ),
            P2pOp::Isend => {
                format!("MPI_Isend(ps_sbuf, {bytes}, MPI_BYTE, {peer}, {tag}, {cvar}, {req});")
            }
            P2pOp::Irecv => {
                format!("MPI_Irecv({buf}, {bytes}, MPI_BYTE, {peer}, {tag}, {cvar}, {req});")
            }
            P2pOp::Sendrecv => {
                let (rpeer, rsize) = match &p.recv {
                    Some((peer, size)) => (
                        self.peer(&comm, &peer.value),
                        size.value.bytes().unwrap_or(0),
                    ),
                    None => ("MPI_PROC_NULL".into(), 0),
                };
                format!(
                    "MPI_Sendrecv(ps_sbuf, {bytes}, MPI_BYTE, {peer}, {tag}, {buf}, {rsize}, MPI_BYTE, {rpeer}, {tag}, {cvar}, MPI_STATUS_IGNORE);"
                )
            }
        };
        self.line(&call);
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

    fn wait(&mut self, w: &Wait) {
        let vars: Vec<String> = w
            .handles
            .iter()
            .map(|h| {
                self.requests
                    .get(&h.name)
                    .cloned()
                    .unwrap_or_else(|| h.name.clone())
            })
            .collect();
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
        self.line(&format!("if ({var} != MPI_COMM_NULL) {{"));
        self.indent += 1;
        self.line(&format!("MPI_Comm_rank({var}, &{var}_rank);"));
        self.line(&format!("MPI_Comm_size({var}, &{var}_size);"));
        self.neighbour_shifts(&d.name.name.clone());
        self.indent -= 1;
        self.line("}");
    }

    // ---- expressions ----------------------------------------------------------------

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

fn comm_name(comm: &Option<Ident>) -> String {
    comm.as_ref()
        .map_or("world".to_string(), |c| c.name.clone())
}

/// The variable name of a grid direction's neighbour: `east`, `plus_x`, `minus_d3`.
fn direction_var(d: &Direction) -> String {
    match d {
        Direction::Axis(a) => {
            let text = a.text();
            match text.strip_prefix('+') {
                Some(rest) => format!("plus_{rest}"),
                None => match text.strip_prefix('-') {
                    Some(rest) => format!("minus_{rest}"),
                    None => text,
                },
            }
        }
        Direction::Next => "next".into(),
        Direction::Prev => "prev".into(),
        Direction::Offset(o) => {
            let parts: Vec<String> = o
                .iter()
                .map(|v| {
                    if *v < 0 {
                        format!("m{}", -v)
                    } else {
                        v.to_string()
                    }
                })
                .collect();
            format!("offset_{}", parts.join("_"))
        }
        _ => "peer".into(),
    }
}

/// MPI_Cart_shift's (direction, displacement) for an axis direction.
fn axis_of(d: &Direction) -> (u32, i32) {
    match d {
        Direction::Axis(a) => (a.dim, if a.forward { 1 } else { -1 }),
        Direction::Prev => (0, -1),
        _ => (0, 1),
    }
}

fn collect_working_sets(block: &Block, out: &mut Vec<u64>) {
    for stmt in &block.stmts {
        match &stmt.kind {
            StmtKind::Compute(c) => {
                if let Some(ws) = c.working_set.and_then(|w| w.value.bytes()) {
                    out.push(ws);
                }
            }
            StmtKind::Loop(l) => collect_working_sets(&l.body, out),
            StmtKind::If(i) => {
                let mut current = i;
                loop {
                    collect_working_sets(&current.then_block, out);
                    match &current.else_branch {
                        None => break,
                        Some(Else::Block(b)) => {
                            collect_working_sets(b, out);
                            break;
                        }
                        Some(Else::If(next)) => current = next,
                    }
                }
            }
            _ => {}
        }
    }
}

/// An `int` argument from a C expression of type long long: a literal as it is,
/// anything else with a cast.
fn as_int(expr: &str) -> String {
    if expr.parse::<i32>().is_ok() {
        expr.to_string()
    } else {
        format!("(int)({})", strip_parens(expr))
    }
}

/// A C literal of a duration in seconds that keeps the skeleton's digits: `21.86e-6`
/// for 21.86 us.
fn seconds_literal(d: Duration) -> String {
    let value = printer::number(d.value);
    match d.unit {
        TimeUnit::S => value,
        TimeUnit::Ms => format!("{value}e-3"),
        TimeUnit::Us => format!("{value}e-6"),
        TimeUnit::Ns => format!("{value}e-9"),
    }
}

/// Removes one pair of parentheses around a whole expression.
fn strip_parens(s: &str) -> &str {
    if let Some(inner) = s.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
        // Only when the outer pair matches: "(a) + (b)" keeps its parentheses.
        let mut depth = 0i32;
        for c in inner.chars() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth < 0 {
                        return s;
                    }
                }
                _ => {}
            }
        }
        if depth == 0 {
            return inner;
        }
    }
    s
}

/// Text that cannot end a C comment.
fn comment_safe(text: &str) -> String {
    text.replace("*/", "* /").replace("/*", "/ *")
}

fn c_string(text: &str) -> String {
    text.chars()
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            c if c.is_ascii_graphic() || c == ' ' => vec![c],
            _ => vec!['_'],
        })
        .collect()
}

/// A C floating literal that reads back as exactly `value`.
fn number(value: f64) -> String {
    let text = format!("{value:?}");
    if text.contains('.') || text.contains('e') || text.contains("inf") || text.contains("NaN") {
        text
    } else {
        format!("{text}.0")
    }
}
