//! Call-site symbolization: takes the bytes of an ELF object (the traced executable or a
//! shared library) and gives, for an address in that object, the function and source
//! file:line from its DWARF line tables (addr2line), falling back to the nearest symbol
//! of its symbol tables (`.symtab`, or only `.dynsym` in a stripped object), and a name
//! for the call site that exists for every address ([`Location::site_name`]).
//! Addresses are object-relative: the runtime return address minus the load bias the
//! tracer recorded, so position-independent executables work.

use std::borrow::Cow;
use std::rc::Rc;

use gimli::{EndianRcSlice, RunTimeEndian};
use object::{Object, ObjectSection, ObjectSymbol};

/// A resolved call site.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Location {
    /// The function, demangled in full (with its parameters), from DWARF or else from the
    /// enclosing symbol.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Only when there is no file:line: the enclosing symbol and where in it the call is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<SymbolOffset>,
}

/// A place inside a function known only from the symbol tables.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SymbolOffset {
    /// The symbol's name as [`short_symbol_name`] gives it.
    pub name: String,
    /// The return address's offset from the symbol's start, as backtraces print it.
    pub offset: u64,
}

impl Location {
    /// `file.c:42`, using the file's last path component; `None` without a line.
    pub fn short(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        let name = file.rsplit('/').next().unwrap_or(file);
        Some(format!("{name}:{}", self.line?))
    }

    /// The name of the call site whose return address is at `offset` in `object` (a
    /// path), the first that exists of:
    /// - `file.c:42` ([`Location::short`]);
    /// - `LAMMPS_NS::CommBrick::reverse_comm+0x1a4`: the enclosing symbol's short name
    ///   and the return address's offset from its start, for objects without debug
    ///   information (two calls in one function stay two sites);
    /// - `liblammps.so.0+0x12345`: the object's file name and the offset in it, for
    ///   addresses that no symbol covers (local functions of a stripped object);
    /// - `0x12345` when the object is unknown.
    ///
    /// Names hold file names, never directories, so they do not depend on where the
    /// application was built or installed.
    pub fn site_name(&self, object: &str, offset: u64) -> String {
        if let Some(short) = self.short() {
            return short;
        }
        if let Some(line) = python_line(object, offset) {
            let file = object.rsplit('/').next().unwrap_or(object);
            return format!("{file}:{line}");
        }
        if let Some(sym) = &self.symbol {
            return format!("{}+0x{:x}", sym.name, sym.offset);
        }
        match object.rsplit('/').next().unwrap_or(object) {
            "" => format!("0x{offset:x}"),
            file => format!("{file}+0x{offset:x}"),
        }
    }
}

/// The line of a Python call site: the tracer records an mpi4py program's MPI calls
/// under the Python file (an object whose path ends in `.py`) with the line number as
/// the offset (FORMAT.md, "Call sites").
pub fn python_line(object: &str, offset: u64) -> Option<u32> {
    if object.ends_with(".py") {
        u32::try_from(offset).ok().filter(|l| *l > 0)
    } else {
        None
    }
}

/// A symbol's name as a person reads it in a call site. Rust names are demangled without
/// their hash (`core::ptr::drop_in_place`); C++ names are demangled without parameter
/// list, qualifiers and return type, keeping namespaces and template arguments
/// (`LAMMPS_NS::CommBrick::reverse_comm`, `(anonymous namespace)::pack<double>`); other
/// names (C, or C++ names the demangler rejects) stay as they are. A clone suffix stays
/// (`LAMMPS_NS::Pair::compute.cold`): it is code apart from the function's.
pub fn short_symbol_name(raw: &str) -> String {
    if let Ok(rust) = rustc_demangle::try_demangle(raw) {
        return format!("{rust:#}");
    }
    if raw.starts_with("_Z") {
        // A compiler's clone suffix (`.cold`, `.isra.0`, `.part.1`) names another piece
        // of code than the function: it stays, as written.
        let (mangled, clone) = raw.find('.').map_or((raw, ""), |i| raw.split_at(i));
        let options = cpp_demangle::DemangleOptions::new()
            .no_params()
            .no_return_type();
        if let Some(name) = cpp_demangle::Symbol::new(mangled)
            .ok()
            .and_then(|sym| sym.demangle(&options).ok())
        {
            // The demangler drops the qualifiers of a method but not of a local class's
            // method (a lambda's `operator() const`).
            let mut name = name.as_str();
            while let Some(rest) = [" const", " volatile", " &&", " &"]
                .iter()
                .find_map(|q| name.strip_suffix(q))
            {
                name = rest;
            }
            return format!("{name}{clone}");
        }
    }
    raw.to_owned()
}

type Reader = EndianRcSlice<RunTimeEndian>;

/// Symbolizes addresses of one object.
pub struct Symbolizer {
    context: Option<addr2line::Context<Reader>>,
    /// Function symbols sorted by start, one per start.
    symbols: Vec<Symbol>,
}

/// A function symbol: start address, size (0 when unknown) and mangled name.
struct Symbol {
    start: u64,
    size: u64,
    name: String,
}

impl Symbolizer {
    /// Parses the object; an object without debug information still gives symbol names.
    pub fn new(object_bytes: &[u8]) -> Result<Symbolizer, String> {
        let file = object::File::parse(object_bytes).map_err(|e| format!("not an object: {e}"))?;
        let endian = if file.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
            let data = file
                .section_by_name(id.name())
                .and_then(|s| s.uncompressed_data().ok())
                .unwrap_or(Cow::Borrowed(&[]));
            Ok(EndianRcSlice::new(Rc::from(&*data), endian))
        };
        let context = gimli::Dwarf::load(load)
            .ok()
            .and_then(|dwarf| addr2line::Context::from_dwarf(dwarf).ok());
        let mut symbols: Vec<Symbol> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == object::SymbolKind::Text && s.address() != 0)
            .filter_map(|s| {
                Some(Symbol {
                    start: s.address(),
                    size: s.size(),
                    name: s.name().ok()?.to_owned(),
                })
            })
            .collect();
        // Of the names of one address (aliases, the same symbol in both tables) the one
        // with the largest size wins, then the first by name, so the choice does not
        // depend on the order of the tables.
        symbols.sort_by(|a, b| {
            (a.start, std::cmp::Reverse(a.size), &a.name).cmp(&(
                b.start,
                std::cmp::Reverse(b.size),
                &b.name,
            ))
        });
        symbols.dedup_by_key(|s| s.start);
        Ok(Symbolizer { context, symbols })
    }

    /// Locates a return address (object-relative); the call is the instruction before it.
    pub fn locate_return_address(&self, offset: u64) -> Location {
        let probe = offset.saturating_sub(1);
        let mut loc = Location::default();
        if let Some(ctx) = &self.context {
            if let Ok(mut frames) = ctx.find_frames(probe).skip_all_loads() {
                while let Ok(Some(frame)) = frames.next() {
                    let function = frame
                        .function
                        .as_ref()
                        .and_then(|f| f.demangle().ok().map(|n| n.into_owned()));
                    if let Some(l) = frame.location {
                        loc = Location {
                            function,
                            file: l.file.map(str::to_owned),
                            line: l.line,
                            symbol: None,
                        };
                        break;
                    }
                }
            }
        }
        let has_line = loc.short().is_some();
        if loc.function.is_none() || !has_line {
            if let Some(sym) = self.enclosing_symbol(probe) {
                if loc.function.is_none() {
                    let full = addr2line::demangle_auto(Cow::Borrowed(&sym.name), None);
                    loc.function = Some(full.into_owned());
                }
                if !has_line {
                    loc.symbol = Some(SymbolOffset {
                        name: short_symbol_name(&sym.name),
                        offset: offset.saturating_sub(sym.start),
                    });
                }
            }
        }
        loc
    }

    /// The function symbol covering `addr`: the last one starting at or before it, if
    /// `addr` is within its size (a symbol of unknown size covers up to the next one).
    fn enclosing_symbol(&self, addr: u64) -> Option<&Symbol> {
        let idx = self.symbols.partition_point(|s| s.start <= addr);
        let sym = self.symbols.get(idx.checked_sub(1)?)?;
        (sym.size == 0 || addr - sym.start < sym.size).then_some(sym)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    use object::{Object, ObjectSymbol};

    use super::*;

    /// A shared library as production builds make them, written in C so that only a C
    /// compiler is needed: C++ and Rust functions get their mangled names from asm labels,
    /// and `hidden` is a local function, which stripping leaves without any symbol.
    const SOURCE: &str = r#"
        extern int ext(int);
        __attribute__((noinline)) static int hidden(int n) { return ext(n) ^ ext(n + 3); }
        int reverse_comm(int n) __asm__("_ZN9LAMMPS_NS9CommBrick12reverse_commEi");
        int reverse_comm(int n) { int a = ext(n); return ext(a) + ext(a + 1) + hidden(a); }
        int pack(double x) __asm__("_ZN9LAMMPS_NS4packIdEEvd");
        int pack(double x) { return ext((int)x) * 2 + ext(1); }
        int rust(int n) __asm__("_ZN4core3ptr13drop_in_place17h0123456789abcdefE");
        int rust(int n) { return ext(n) + ext(2); }
        int c_entry(int n) { return ext(n) + ext(n + 7) + 2; }
    "#;

    /// Builds `libsites.so` with symbols and a stripped copy `libsites-stripped.so`.
    fn build(dir: &Path) -> (Vec<u8>, Vec<u8>) {
        let src = dir.join("sites.c");
        std::fs::write(&src, SOURCE).expect("write the C source");
        let full = dir.join("libsites.so");
        let stripped = dir.join("libsites-stripped.so");
        let status = Command::new("cc")
            .args(["-O2", "-shared", "-fPIC", "-o"])
            .arg(&full)
            .arg(&src)
            .status()
            .expect("run cc");
        assert!(status.success(), "cc failed");
        let status = Command::new("strip")
            .arg("--strip-all")
            .arg("-o")
            .arg(&stripped)
            .arg(&full)
            .status()
            .expect("run strip");
        assert!(status.success(), "strip failed");
        (
            std::fs::read(&full).expect("read the library"),
            std::fs::read(&stripped).expect("read the stripped library"),
        )
    }

    /// Start and size of the symbol whose name contains `part`, from the full library.
    fn symbol(full: &[u8], part: &str) -> (u64, u64) {
        let file = object::File::parse(full).expect("an ELF object");
        let sym = file
            .symbols()
            .find(|s| s.name().is_ok_and(|n| n.contains(part)))
            .unwrap_or_else(|| panic!("no symbol {part}"));
        (sym.address(), sym.size())
    }

    #[test]
    fn stripped_objects_name_sites_by_symbol_and_offset() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (full, stripped) = build(dir.path());
        let file = object::File::parse(&*stripped).expect("an ELF object");
        assert!(file.symbols().next().is_none(), "strip left .symtab");
        let sym = Symbolizer::new(&stripped).expect("symbolizer");
        let object = "/usr/lib/x86_64-linux-gnu/libsites.so.0";

        let (start, size) = symbol(&full, "reverse_comm");
        assert!(size > 0x10);
        let first = sym.locate_return_address(start + 5);
        assert_eq!(first.short(), None);
        assert_eq!(
            first.function.as_deref(),
            Some("LAMMPS_NS::CommBrick::reverse_comm(int)")
        );
        assert_eq!(
            first.site_name(object, start + 5),
            "LAMMPS_NS::CommBrick::reverse_comm+0x5"
        );
        // A second call in the same function is a second site.
        let second = sym.locate_return_address(start + 0x10);
        assert_eq!(
            second.site_name(object, start + 0x10),
            "LAMMPS_NS::CommBrick::reverse_comm+0x10"
        );
        // The return address of a call at the function's very end still belongs to it.
        let last = sym.locate_return_address(start + size);
        assert_eq!(
            last.site_name(object, start + size),
            format!("LAMMPS_NS::CommBrick::reverse_comm+0x{size:x}")
        );

        let (start, _) = symbol(&full, "packIdE");
        let loc = sym.locate_return_address(start + 3);
        assert_eq!(
            loc.function.as_deref(),
            Some("void LAMMPS_NS::pack<double>(double)")
        );
        assert_eq!(
            loc.site_name(object, start + 3),
            "LAMMPS_NS::pack<double>+0x3"
        );

        let (start, _) = symbol(&full, "drop_in_place");
        let loc = sym.locate_return_address(start + 3);
        assert_eq!(
            loc.site_name(object, start + 3),
            "core::ptr::drop_in_place+0x3"
        );

        let (start, _) = symbol(&full, "c_entry");
        let loc = sym.locate_return_address(start + 4);
        assert_eq!(loc.function.as_deref(), Some("c_entry"));
        assert_eq!(loc.site_name(object, start + 4), "c_entry+0x4");

        // A local function has no symbol left: the object's file name and the offset.
        let (start, _) = symbol(&full, "hidden");
        let loc = sym.locate_return_address(start + 4);
        assert_eq!(loc.function, None);
        assert_eq!(loc.symbol, None);
        assert_eq!(
            loc.site_name(object, start + 4),
            format!("libsites.so.0+0x{:x}", start + 4)
        );
    }

    #[test]
    fn unstripped_objects_name_local_functions_too() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (full, _) = build(dir.path());
        let sym = Symbolizer::new(&full).expect("symbolizer");
        let (start, _) = symbol(&full, "hidden");
        let loc = sym.locate_return_address(start + 4);
        assert!(loc
            .function
            .as_deref()
            .is_some_and(|f| f.starts_with("hidden")));
        assert!(loc
            .site_name("libsites.so", start + 4)
            .starts_with("hidden"));
    }

    #[test]
    fn site_names_without_any_symbol() {
        let loc = Location::default();
        assert_eq!(loc.site_name("/opt/app/bin/lmp", 0x1234), "lmp+0x1234");
        assert_eq!(loc.site_name("", 0x1234), "0x1234");
        let loc = Location {
            file: Some("/home/me/src/comm.cpp".into()),
            line: Some(42),
            ..Location::default()
        };
        assert_eq!(loc.site_name("liblammps.so.0", 0x99), "comm.cpp:42");
    }

    #[test]
    fn short_symbol_names() {
        let cases = [
            (
                "_ZNK9LAMMPS_NS9CommBrick12reverse_commEv",
                "LAMMPS_NS::CommBrick::reverse_comm",
            ),
            ("_ZN12_GLOBAL__N_13fooEv", "(anonymous namespace)::foo"),
            (
                "_ZN9LAMMPS_NS5FixNHIdE7computeEi",
                "LAMMPS_NS::FixNH<double>::compute",
            ),
            (
                "_ZZN1A1fEvENKUliE_clEi",
                "A::f()::{lambda(int)#1}::operator()",
            ),
            (
                "_ZN4core3ptr13drop_in_place17h0123456789abcdefE",
                "core::ptr::drop_in_place",
            ),
            (
                "_ZN9LAMMPS_NS9CommBrick12reverse_commEv.cold",
                "LAMMPS_NS::CommBrick::reverse_comm.cold",
            ),
            ("_ZL6hiddeni.isra.0", "hidden.isra.0"),
            ("MPI_Send", "MPI_Send"),
            ("main", "main"),
            ("_Znot_mangled", "_Znot_mangled"),
        ];
        for (raw, short) in cases {
            assert_eq!(short_symbol_name(raw), short, "{raw}");
        }
    }
}
