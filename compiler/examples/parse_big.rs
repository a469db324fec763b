//! Parses (and with `check` as the second argument, checks) a skeleton file once: a
//! driver for profiling the front end with callgrind or perf.
fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_default();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let (program, diags) = perfskel_grammar::parse(&text);
    println!("{} diagnostics", diags.len());
    if args.next().as_deref() == Some("check") {
        let checked = perfskel_compiler::check::check(&program, &text, Default::default());
        println!("{} check diagnostics", checked.diags.len());
    }
}
