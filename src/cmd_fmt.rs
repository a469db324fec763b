//! `perfskel fmt`: rewrite skeleton files in canonical form, or with `--check` show
//! what would change.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::files::{emit, read_source};

#[derive(clap::Args)]
pub struct Args {
    /// Skeleton files to format (`-` formats standard input to standard output).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Change nothing; show a diff and fail if a file is not in canonical form.
    #[arg(long)]
    check: bool,
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let mut failed = false;
    for path in &args.files {
        let name = path.display().to_string();
        let source = match read_source(path) {
            Ok(source) => source,
            Err(message) => {
                eprintln!("error: {message}");
                failed = true;
                continue;
            }
        };
        let (program, diags) = perfskel_grammar::parse(&source);
        if diags.iter().any(perfskel_grammar::Diag::is_error) {
            // Never rewrite what could not be read completely: text would be lost.
            emit(&name, &source, &diags);
            eprintln!("error: {name} was not formatted because it has syntax errors");
            failed = true;
            continue;
        }
        let formatted = perfskel_grammar::print(&program);
        if path == Path::new("-") {
            print!("{formatted}");
        } else if formatted == source {
            continue;
        } else if args.check {
            print!("{}", diff(&name, &source, &formatted));
            failed = true;
        } else {
            crate::files::write_atomic(path, formatted.as_bytes())?;
            eprintln!("formatted {name}");
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// A unified diff from `old` to `new`, like `rustfmt --check`.
pub fn diff(name: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{name} (original)"),
            &format!("{name} (formatted)"),
        )
        .to_string()
}
