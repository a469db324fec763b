//! Any bytes → parse (also in parts, as large files are) → print → (if no syntax
//! error) check, then fmt idempotence.
//!
//! This is what `perfskel check` and `perfskel fmt` do with a file, so the target
//! asserts the requirement of issue 2: every input yields diagnostics or success, never
//! a panic, a stack overflow or a stall; and formatting is idempotent.

#![no_main]

use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, Config};
use libfuzzer_sys::fuzz_target;
use perfskel_compiler::check::{check, Options};
use perfskel_grammar::{parse, parse_parts, print, Diag};

/// Small enough that a huge loop count cannot stall the fuzzer.
const SIMULATION_BUDGET: u64 = 200_000;

/// Renders diagnostics as `perfskel check` does (codespan-reporting), so spans that are
/// out of range or not on a character boundary are caught too.
fn render(source: &str, diags: &[Diag]) {
    let file = SimpleFile::new("fuzz.skel", source);
    let config = Config::default();
    let mut out = String::new();
    for diag in diags {
        // The CLI falls back to the bare message when rendering fails; that is not a
        // crash, but a span that cannot be rendered is still a bug worth seeing.
        if let Err(e) = term::emit_to_string(&mut out, &config, &file, &diag.to_codespan(())) {
            panic!("diagnostic {:?} cannot be rendered: {e}", diag.message);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // The CLI refuses text that is not UTF-8 before parsing.
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let (program, diags) = parse(source);
    // Parsing in parts (what large files get) gives the one-pass result.
    for parts in [2, 3] {
        assert!(
            parse_parts(source, parts) == (program.clone(), diags.clone()),
            "parsing in {parts} parts differs from one pass"
        );
    }
    // Printing must work even for a program with syntax errors (placeholders).
    let printed = print(&program);
    render(source, &diags);
    if diags.iter().any(Diag::is_error) {
        return;
    }
    let checked = check(
        &program,
        source,
        Options {
            simulation_budget: SIMULATION_BUDGET,
            ..Default::default()
        },
    );
    render(source, &checked.diags);

    // fmt is idempotent: the printed text parses without errors and prints to itself.
    let (reparsed, rediags) = parse(&printed);
    let errors: Vec<&str> = rediags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.message.as_str())
        .collect();
    assert!(
        errors.is_empty(),
        "formatted text does not parse: {errors:?}\n--- formatted ---\n{printed}"
    );
    let reprinted = print(&reparsed);
    assert_eq!(
        reprinted, printed,
        "fmt is not idempotent\n--- input ---\n{source}"
    );
});
