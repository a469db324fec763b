//! `perfskel check`: parse and check skeleton files, print diagnostics.

use std::path::PathBuf;
use std::process::ExitCode;

use perfskel_compiler::check::Options;
pub use perfskel_compiler::pipeline::check_source;

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
        ..Default::default()
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
