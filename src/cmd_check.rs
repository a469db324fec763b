//! `perfskel check` (being written in issue 2).
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<ExitCode, String> {
    Err("perfskel check is not implemented yet".into())
}
