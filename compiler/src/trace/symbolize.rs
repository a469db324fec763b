//! Call-site symbolization: takes the bytes of an ELF object (the traced executable or a
//! shared library) and gives, for an address in that object, the function and source
//! file:line from its DWARF line tables (addr2line), falling back to the nearest symbol.
//! Addresses are object-relative: the runtime return address minus the load bias the
//! tracer recorded, so position-independent executables work.

use std::borrow::Cow;
use std::rc::Rc;

use gimli::{EndianRcSlice, RunTimeEndian};
use object::{Object, ObjectSection, ObjectSymbol};

/// A resolved call site.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Location {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

impl Location {
    /// `file.c:42`, using the file's last path component; `None` without a line.
    pub fn short(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        let name = file.rsplit('/').next().unwrap_or(file);
        Some(format!("{name}:{}", self.line?))
    }
}

type Reader = EndianRcSlice<RunTimeEndian>;

/// Symbolizes addresses of one object.
pub struct Symbolizer {
    context: Option<addr2line::Context<Reader>>,
    /// Function symbols sorted by address: (start, size, name).
    symbols: Vec<(u64, u64, String)>,
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
        let mut symbols: Vec<(u64, u64, String)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == object::SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_owned())))
            .collect();
        symbols.sort();
        symbols.dedup_by_key(|s| s.0);
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
                        };
                        break;
                    }
                }
            }
        }
        if loc.function.is_none() {
            let idx = self.symbols.partition_point(|s| s.0 <= probe);
            if let Some((start, size, name)) = idx.checked_sub(1).and_then(|i| self.symbols.get(i))
            {
                if *size == 0 || probe < start + size {
                    loc.function = Some(name.clone());
                }
            }
        }
        loc
    }
}
