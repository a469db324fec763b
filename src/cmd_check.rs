//! `perfskel check`: parse and check skeleton files, print diagnostics.

use std::path::PathBuf;
use std::process::ExitCode;

use perfskel_compiler::check::{check, Options};

use crate::files::{emit, plural, read_source, tally};

#[derive(clap::Args)]
pub struct Args {
    /// Skeleton files to check (`-` reads standard input).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Exit 0 even when there are warnings (by default only a clean file passes).
    #[arg(long)]
    allow_warnings: bool,
    /// Operations the deadlock simulation may run, over all ranks, before it stops.
    #[arg(long, default_value_t = Options::default().simulation_budget)]
    budget: u64,
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let options = Options {
        simulation_budget: args.budget,
    };
    let (mut errors, mut warnings, mut unreadable) = (0, 0, 0);
    for path in &args.files {
        let name = path.display().to_string();
        let source = match read_source(path) {
            Ok(source) => source,
            Err(message) => {
                eprintln!("error: {message}");
                unreadable += 1;
                continue;
            }
        };
        let diags = check_source(&source, options);
        emit(&name, &source, &diags);
        let (e, w) = tally(&diags);
        errors += e;
        warnings += w;
    }
    let files = plural(args.files.len(), "file");
    eprintln!(
        "checked {files}: {}, {}{}",
        plural(errors, "error"),
        plural(warnings, "warning"),
        if unreadable > 0 {
            format!(", {} unreadable", plural(unreadable, "file"))
        } else {
            String::new()
        }
    );
    let failed = errors > 0 || unreadable > 0 || (!args.allow_warnings && warnings > 0);
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Parses and checks one file's text; the checker runs only on a program that parsed.
pub fn check_source(source: &str, options: Options) -> Vec<perfskel_grammar::Diag> {
    let (program, mut diags) = perfskel_grammar::parse(source);
    if diags.iter().any(perfskel_grammar::Diag::is_error) {
        return diags;
    }
    diags.extend(check(&program, source, options).diags);
    perfskel_grammar::diagnostic::sort(&mut diags);
    // Freeing a large syntax tree takes about a millisecond per megabyte: do it on
    // another thread while this one reports and goes on to the next file.
    if source.len() >= 1 << 20 {
        std::thread::spawn(move || drop(program));
    }
    diags
}
