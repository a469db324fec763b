//! The C-MPI back end: a checked skeleton → one self-contained C file, the runtime header
//! `perfskel.h` with the memory probe it includes, `memprobe.h` (both from `runtime/c/`), a
//! Makefile and a Slurm batch template.
//!
//! The program reads like the skeleton: one block of C per statement, headed by a
//! comment with the statement and its line in the .skel file (`/* stencil2d.skel:11:
//! compute 20 ms working_set 2 MiB */`); communicators and request handles keep their
//! names (escaped by the shared [`Namer`] when they are C keywords). Grid topologies
//! become `MPI_Cart_create` communicators and their directions `MPI_Cart_shift`
//! neighbours computed once after the communicator is made; other topologies compute
//! their peers with the header's helpers. Every operation maps to the MPI call of the
//! same name on contiguous bytes (reductions on doubles when the size allows).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write;

use perfskel_grammar::ast::*;
use perfskel_grammar::printer;

mod stmt;
mod text;

use super::namer::{Language, Namer};
use super::{GeneratedFile, Options, INLINE_LIST};
use crate::check::{Info, Verified};
use crate::semantics::Shape;
use text::{c_string, comment_safe, number, seconds_text};

/// The C runtime header, copied into every output directory.
pub const RUNTIME_HEADER: &str = include_str!("../../../../runtime/c/perfskel.h");

/// The memory probe `perfskel.h` includes, shared with the tracer, copied beside it.
pub const MEMPROBE_HEADER: &str = include_str!("../../../../runtime/c/memprobe.h");

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
    "ps_status",
    "ps_source",
];

/// Emits the files of the C program of a verified skeleton.
pub fn emit(verified: &Verified, options: &Options) -> Vec<GeneratedFile> {
    let (program, info) = (verified.program(), verified.info());
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
            path: "memprobe.h".into(),
            contents: MEMPROBE_HEADER.into(),
        },
        GeneratedFile {
            path: "Makefile".into(),
            contents: makefile(&name),
        },
        GeneratedFile {
            path: "job.slurm".into(),
            contents: super::job_slurm(program, options, "C-MPI back end"),
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
         #   make skeleton-smpi          SimGrid's smpicc: the program simulated under smpirun\n\
         # Changing MPICC or CFLAGS rebuilds.\n\
         MPICC ?= mpicc\n\
         SMPICC ?= smpicc\n\
         CFLAGS ?= -O2 -Wall -Wextra -Werror\n\
         LDLIBS ?= -lm\n\
         \n\
         skeleton: {name}.c perfskel.h memprobe.h .build-flags\n\
         \t$(MPICC) $(CFLAGS) -o $@ {name}.c $(LDLIBS)\n\
         \n\
         skeleton-smpi: {name}.c perfskel.h memprobe.h .build-flags-smpi\n\
         \t$(SMPICC) $(CFLAGS) -DPERFSKEL_SMPI -o $@ {name}.c $(LDLIBS)\n\
         \n\
         .build-flags: FORCE\n\
         \t@echo '$(MPICC) $(CFLAGS) $(LDLIBS)' | cmp -s - $@ || echo '$(MPICC) $(CFLAGS) $(LDLIBS)' > $@\n\
         \n\
         .build-flags-smpi: FORCE\n\
         \t@echo '$(SMPICC) $(CFLAGS) $(LDLIBS)' | cmp -s - $@ || echo '$(SMPICC) $(CFLAGS) $(LDLIBS)' > $@\n\
         \n\
         clean:\n\
         \trm -f skeleton skeleton-smpi .build-flags .build-flags-smpi\n\
         \n\
         .PHONY: clean FORCE\n\
         FORCE:\n"
    )
}

/// Bytes a statement needs in the send buffer and in its receive region.
#[derive(Default)]
struct Needs {
    send: u64,
    recv: u64,
}

/// Entries on one line of a static list.
const LIST_ROW: usize = 12;

struct Writer<'a> {
    program: &'a Program,
    info: &'a Info,
    options: &'a Options,
    namer: Namer,
    /// Skeleton communicator name → C variable (`world` included).
    comms: BTreeMap<String, String>,
    /// Request handle → C variable.
    requests: BTreeMap<String, String>,
    /// Windowed request handle → its window (the variable is a `ps_window`).
    windows: BTreeMap<String, u64>,
    /// Loop variable → C variable (`v_NAME`, escaped by the namer when taken).
    loop_vars: BTreeMap<String, String>,
    /// (communicator, direction text) → C variable holding the neighbour.
    neighbours: BTreeMap<(String, String), String>,
    /// Receive regions: request handle (or "" for blocking operations) → (offset, size).
    regions: BTreeMap<String, (u64, u64)>,
    send_bytes: u64,
    /// Whether a peer is `source`: blocking receives from any rank then keep their
    /// status, and `ps_source` the rank it names.
    uses_source: bool,
    /// Whether the program has a `while recv`, whose receives keep their status.
    has_while: bool,
    /// Static tables (per-rank times and sizes) emitted before `main`.
    tables: Vec<String>,
    /// Lists too long to write in an expression ([`Writer::list`]), emitted once each
    /// before `main`: C type, entries, name.
    lists: RefCell<Vec<(String, Vec<String>, String)>>,
    /// Byte offsets where the source's lines start, to cite lines in comments.
    line_starts: Vec<usize>,
    out: String,
    indent: usize,
    depth: usize,
}

impl<'a> Writer<'a> {
    fn new(program: &'a Program, info: &'a Info, options: &'a Options) -> Writer<'a> {
        let mut namer = Namer::new(Language::C, RESERVED);
        let mut comms = BTreeMap::new();
        comms.insert("world".to_string(), "world".to_string());
        for comm in info.comms() {
            comms.insert(comm.name.clone(), namer.call(&comm.name));
        }
        let requests = info
            .requests()
            .iter()
            .map(|r| (r.clone(), namer.call(r)))
            .collect();
        let loop_vars = super::loop_var_names(&program.body)
            .into_iter()
            .map(|v| (v.to_string(), namer.call(&format!("v_{v}"))))
            .collect();
        let mut w = Writer {
            program,
            info,
            options,
            namer,
            comms,
            requests,
            windows: super::request_windows(&program.body),
            loop_vars,
            neighbours: BTreeMap::new(),
            regions: BTreeMap::new(),
            send_bytes: 0,
            uses_source: false,
            has_while: false,
            tables: Vec::new(),
            lists: RefCell::new(Vec::new()),
            line_starts: std::iter::once(0)
                .chain(options.source.match_indices('\n').map(|(i, _)| i + 1))
                .collect(),
            out: String::new(),
            indent: 0,
            depth: 0,
        };
        w.plan_block(&program.body);
        w.layout_regions();
        w
    }

    /// The 1-based line of the source a byte offset falls on.
    fn line_of(&self, offset: u32) -> usize {
        self.line_starts
            .partition_point(|&start| start <= offset as usize)
    }

    fn n_ranks(&self) -> u64 {
        self.program.ranks.value
    }

    fn shape_of(&self, comm: &str) -> &'a Shape {
        if comm == "world" {
            return self.info.world();
        }
        self.info
            .comms()
            .iter()
            .find(|c| c.name == comm)
            .map_or(self.info.world(), |c| &c.shape)
    }

    // ---- planning: neighbours and buffers -------------------------------------------

    fn plan_block(&mut self, block: &Block) {
        for stmt in &block.stmts {
            match &stmt.kind {
                StmtKind::Loop(l) => self.plan_block(&l.body),
                StmtKind::While(w) => {
                    self.has_while = true;
                    self.plan_p2p(&w.recv);
                    self.plan_block(&w.body);
                }
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
                StmtKind::P2p(p) => self.plan_p2p(p),
                StmtKind::Collective(c) => {
                    let needs = self.collective_needs(c);
                    self.need(c.request.as_ref(), needs);
                }
                _ => {}
            }
        }
    }

    /// The neighbours and buffers a point-to-point statement needs.
    fn plan_p2p(&mut self, p: &P2p) {
        let comm = comm_name(&p.comm);
        self.plan_peer(&comm, &p.peer.value);
        if let Some((peer, _)) = p.recv.as_deref() {
            self.plan_peer(&comm, &peer.value);
        }
        self.uses_source |= p.peer.value == Peer::Source
            || p.recv
                .as_deref()
                .is_some_and(|(peer, _)| peer.value == Peer::Source);
        let bytes = |s: &MsgSize| s.max_bytes();
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
                recv: p.recv.as_deref().map_or(0, |(_, s)| bytes(s)),
            },
        };
        self.need(p.request.as_ref(), needs);
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

    /// The code of `stmts` at `indent`, then `end`'s closing comments, apart from the
    /// output so far. Without blank lines before the first statement: each part is
    /// headed by a line of its own.
    fn part(&mut self, stmts: &[&Stmt], indent: usize, end: Option<&Block>) -> String {
        let before = std::mem::take(&mut self.out);
        self.indent = indent;
        self.stmts(stmts);
        if let Some(block) = end {
            self.end_comments(block);
        }
        let part = std::mem::replace(&mut self.out, before);
        part.trim_start_matches('\n').to_string()
    }

    fn program(mut self) -> String {
        let p = self.program;
        let name = &p.name.value.name;
        let target = self.options.app_time_s / self.options.ratio.max(1) as f64;
        let (decls, rest) = super::comms_and_passes(&p.body);
        let setup = self.part(&decls, 1, None);
        let body = self.part(&rest, 2, Some(&p.body));

        let _ = writeln!(
            self.out,
            "/* Performance skeleton `{}`, generated by perfskel from {} at ratio 1:{}.\n * It stands for an application run of {} s and should run {} s here; rank 0 prints\n * one perfskel-result line. Build with the Makefile beside it. Do not edit: change\n * the skeleton and compile it again. */",
            comment_safe(name),
            comment_safe(&self.options.source_name),
            self.options.ratio,
            number(self.options.app_time_s),
            seconds_text(target),
        );
        self.out.push_str("#include \"perfskel.h\"\n\n");
        for table in std::mem::take(&mut self.tables) {
            self.out.push_str(&table);
        }
        let lists = self.lists.take();
        if !lists.is_empty() {
            self.out.push_str(&format!(
                "/* Lists of more than {INLINE_LIST} entries, each once: in an expression they would be\n * copied at every evaluation. */\n"
            ));
            for (ctype, items, name) in &lists {
                let _ = writeln!(
                    self.out,
                    "static const {ctype} {name}[{}] = {{",
                    items.len()
                );
                for row in items.chunks(LIST_ROW) {
                    let _ = writeln!(self.out, "    {},", row.join(", "));
                }
                self.out.push_str("};\n");
            }
            self.out.push('\n');
        }
        if let Shape::Graph { neighbors } = self.info.world() {
            let mut starts = vec![0usize];
            let mut lists = Vec::new();
            for list in neighbors {
                lists.extend(list.iter().map(u64::to_string));
                starts.push(lists.len());
            }
            // Ranks past the last one listed have no neighbours (the scaler refuses more
            // than `MAX_SIMULATED_RANKS` ranks, so the table stays small).
            let rows = usize::try_from(self.n_ranks()).unwrap_or(usize::MAX);
            while starts.len() <= rows {
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
        if self.uses_source || self.has_while {
            self.line("MPI_Status ps_status; /* of the last receive that keeps it */");
        }
        if self.uses_source {
            self.line(
                "/* `source`: the rank the last receive from any rank got its message from */",
            );
            self.line("int ps_source = MPI_PROC_NULL;");
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
        let sets = super::working_sets(&p.body);
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
        if let Some(memory) = &p.memory {
            let m = memory.value;
            let ws = m.working_set.value.bytes().unwrap_or(0);
            let rate = m.rate.value.bytes().unwrap_or(0);
            self.line(&format!(
                "ps_memory({ws}, {rate}.0); /* {} */",
                perfskel_grammar::printer::print_memory(&m)
            ));
        }
        self.line("");
        if !setup.is_empty() {
            self.out.push_str(&setup);
            self.line("");
        }
        let ratio = self.options.ratio;
        let measure = !self.options.own_ratios.is_empty();
        self.line(if ratio > 1 && measure {
            "/* A warm-up pass without compute, untimed, a measuring pass without compute\n       (see ps_own_begin), then the timed pass (ps_pass). */"
        } else if ratio > 1 {
            "/* A warm-up pass without compute, untimed, then the timed pass (ps_pass). */"
        } else {
            "/* The timed pass (at 1:1 without a warm-up pass unless PERFSKEL_WARMUP=on). */"
        });
        self.line(&format!(
            "while (ps_pass({ratio}ULL, {})) {{",
            u8::from(measure)
        ));
        self.out.push_str(&body);
        self.line("}");
        let end = format!(
            "ps_end(\"{}\", {ratio}ULL, {}, {}, {});",
            c_string(name),
            number(self.options.ratio_reached),
            number(self.options.rest_ratio),
            number(self.options.app_time_s)
        );
        self.line(&end);
        for (skel, var) in &self.comms.clone() {
            if skel != "world" {
                self.line(&format!(
                    "if ({var} != MPI_COMM_NULL) MPI_Comm_free(&{var});"
                ));
            }
        }
        if matches!(self.info.world(), Shape::Grid { .. }) {
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
        match self.info.world() {
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
        for (name, var) in self.requests.clone() {
            if self.windows.contains_key(&name) {
                self.line(&format!("ps_window {var} = PS_WINDOW_EMPTY;"));
            } else {
                self.line(&format!("MPI_Request {var} = MPI_REQUEST_NULL;"));
            }
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
                    StmtKind::P2p(p) => [
                        Some(&p.peer.value),
                        p.recv.as_deref().map(|(q, _)| &q.value),
                    ]
                    .into_iter()
                    .flatten()
                    .find_map(|peer| match peer {
                        Peer::Dir(d) if printer::direction(d) == text => Some(d.clone()),
                        _ => None,
                    }),
                    StmtKind::Loop(l) => search(&l.body, text),
                    StmtKind::While(w) => match &w.recv.peer.value {
                        Peer::Dir(d) if printer::direction(d) == text => Some(d.clone()),
                        _ => search(&w.body, text),
                    },
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
