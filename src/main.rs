//! The `perfskel` binary: see the library crate for the commands.

fn main() -> std::process::ExitCode {
    perfskel::main()
}
