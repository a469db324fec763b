//! Builds the C shim against the OTF2 reference library found by pkg-config (`otf2.pc`,
//! Debian's libopen-trace-format2-dev), or, without pkg-config, the library's default
//! name and the system include path.
use std::process::Command;

fn pkg_config(args: &[&str]) -> Option<String> {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("otf2")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=shim/psk_otf2.c");
    println!("cargo:rerun-if-changed=shim/psk_otf2.h");
    let mut build = cc::Build::new();
    build
        .file("shim/psk_otf2.c")
        .warnings(true)
        .extra_warnings(true);
    for flag in pkg_config(&["--cflags"])
        .unwrap_or_default()
        .split_whitespace()
    {
        if let Some(dir) = flag.strip_prefix("-I") {
            build.include(dir);
        }
    }
    build.compile("psk_otf2");
    let libs = pkg_config(&["--libs"]).unwrap_or_else(|| "-lopen-trace-format2".into());
    for flag in libs.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
}
