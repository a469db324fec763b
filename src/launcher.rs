//! Launchers for `perfskel record`: takes a launcher command line (`mpirun …`,
//! `mpiexec …`, `srun …`), gives which MPI the job runs on and the arguments that preload
//! the tracer into the ranks only. `mpirun`/`mpiexec` tell their MPI in `--version`;
//! `srun` belongs to Slurm, so the MPI comes from the program's ELF `DT_NEEDED` entries.

use std::path::{Path, PathBuf};
use std::process::Command;

use object::read::elf::{Dyn, FileHeader, SectionHeader};
use object::Endianness;

/// The MPI implementations the tracer is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MpiKind {
    Openmpi,
    Mpich,
}

impl MpiKind {
    pub fn name(self) -> &'static str {
        match self {
            MpiKind::Openmpi => "openmpi",
            MpiKind::Mpich => "mpich",
        }
    }
}

/// How a launcher passes environment variables to the ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Open MPI's `mpirun -x NAME=VALUE`.
    OpenMpi,
    /// MPICH (Hydra)'s `mpiexec -genv NAME VALUE`.
    Hydra,
    /// Slurm's `srun --export=ALL,NAME=VALUE,…`.
    Srun,
}

/// A launcher command line understood well enough to preload the tracer.
#[derive(Debug)]
pub struct Launch {
    pub mpi: MpiKind,
    pub style: Style,
    /// The launcher's `--version` line for the manifest.
    pub version: String,
}

/// Runs `launcher --version`; gives its output (stdout then stderr).
pub fn launcher_version(launcher: &str) -> Result<String, String> {
    let out = Command::new(launcher)
        .arg("--version")
        .output()
        .map_err(|e| format!("record: cannot run `{launcher} --version`: {e}"))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok(text)
}

/// The line of a launcher's `--version` output that names its version: Open MPI's first
/// line, MPICH (Hydra)'s `Version:` line, Slurm's `slurm 22.05.8`.
pub fn version_line(text: &str) -> String {
    let lines = || text.lines().map(str::trim).filter(|l| !l.is_empty());
    lines()
        .find(|l| l.contains("Open MPI") || l.starts_with("Version:"))
        .or_else(|| lines().next())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Tells the MPI from a launcher's `--version` output.
pub fn detect_mpi(version_text: &str) -> Option<MpiKind> {
    if version_text.contains("Open MPI") || version_text.contains("OpenRTE") {
        Some(MpiKind::Openmpi)
    } else if version_text.contains("HYDRA") || version_text.contains("MPICH") {
        Some(MpiKind::Mpich)
    } else {
        None
    }
}

fn is_srun(launcher: &str) -> bool {
    Path::new(launcher).file_name().is_some_and(|n| n == "srun")
}

/// Finds out how to trace `command` (launcher first); `forced` is `--mpi`.
pub fn understand(command: &[String], forced: Option<MpiKind>) -> Result<Launch, String> {
    let launcher = command
        .first()
        .ok_or("record: give the launcher command after `--`")?;
    let text = launcher_version(launcher)?;
    let version = version_line(&text);
    if is_srun(launcher) {
        if command.iter().any(|a| a.starts_with("--export")) {
            return Err(
                "record: `srun --export` is set by perfskel record; give the variables in the environment instead (srun passes it on)".into(),
            );
        }
        let mpi = match forced {
            Some(m) => m,
            None => srun_program_mpi(&command[1..])?,
        };
        return Ok(Launch {
            mpi,
            style: Style::Srun,
            version,
        });
    }
    let mpi = match forced.or_else(|| detect_mpi(&text)) {
        Some(m) => m,
        None => {
            return Err(format!(
                "record: cannot tell which MPI `{launcher}` belongs to from its --version; pass --mpi openmpi|mpich"
            ))
        }
    };
    let style = match mpi {
        MpiKind::Openmpi => Style::OpenMpi,
        MpiKind::Mpich => Style::Hydra,
    };
    Ok(Launch {
        mpi,
        style,
        version,
    })
}

/// The launcher arguments (placed right after the launcher) that set `vars` in the ranks
/// only, not in the launcher.
pub fn env_args(style: Style, vars: &[(&str, &str)]) -> Result<Vec<String>, String> {
    Ok(match style {
        Style::OpenMpi => vars
            .iter()
            .flat_map(|(k, v)| ["-x".to_string(), format!("{k}={v}")])
            .collect(),
        Style::Hydra => vars
            .iter()
            .flat_map(|(k, v)| ["-genv".to_string(), k.to_string(), v.to_string()])
            .collect(),
        Style::Srun => {
            let mut spec = String::from("--export=ALL");
            for (k, v) in vars {
                if v.contains(',') {
                    return Err(format!(
                        "record: srun --export cannot pass {k}={v}: the value holds a comma"
                    ));
                }
                spec.push_str(&format!(",{k}={v}"));
            }
            vec![spec]
        }
    })
}

/// The MPI of the program an `srun` command line runs: the first argument that names an
/// ELF file (as a path, or found on PATH), read for its `DT_NEEDED` libraries.
fn srun_program_mpi(args: &[String]) -> Result<MpiKind, String> {
    for arg in args.iter().filter(|a| !a.starts_with('-')) {
        let Some(path) = resolve(arg) else { continue };
        let Ok(data) = std::fs::read(&path) else {
            continue;
        };
        if !data.starts_with(b"\x7fELF") {
            continue;
        }
        let needed = elf_needed(&data)
            .map_err(|e| format!("record: {}: cannot read its ELF: {e}", path.display()))?;
        return mpi_of_needed(&needed).ok_or_else(|| {
            format!(
                "record: {} links neither Open MPI (libmpi.so) nor MPICH (libmpich.so) dynamically (needs {}); pass --mpi openmpi|mpich",
                path.display(),
                needed.join(", ")
            )
        });
    }
    Err("record: cannot find the program in the srun command line; pass --mpi openmpi|mpich".into())
}

fn resolve(arg: &str) -> Option<PathBuf> {
    if arg.contains('/') {
        let p = PathBuf::from(arg);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(arg))
        .find(|p| p.is_file())
}

/// Tells the MPI from a program's needed libraries: MPICH's are `libmpich*.so` (also
/// its Fortran `libmpichfort`), Open MPI's `libmpi.so` and `libmpi_*.so`.
pub fn mpi_of_needed(needed: &[String]) -> Option<MpiKind> {
    if needed.iter().any(|n| n.starts_with("libmpich")) {
        Some(MpiKind::Mpich)
    } else if needed
        .iter()
        .any(|n| n.starts_with("libmpi.so") || n.starts_with("libmpi_"))
    {
        Some(MpiKind::Openmpi)
    } else {
        None
    }
}

/// The `DT_NEEDED` entries of an ELF file (32 or 64 bit).
pub fn elf_needed(data: &[u8]) -> Result<Vec<String>, String> {
    match object::FileKind::parse(data).map_err(|e| e.to_string())? {
        object::FileKind::Elf64 => needed_of::<object::elf::FileHeader64<Endianness>>(data),
        object::FileKind::Elf32 => needed_of::<object::elf::FileHeader32<Endianness>>(data),
        other => Err(format!("not an ELF file ({other:?})")),
    }
}

fn needed_of<E: FileHeader<Endian = Endianness>>(data: &[u8]) -> Result<Vec<String>, String> {
    let header = E::parse(data).map_err(|e| e.to_string())?;
    let endian = header.endian().map_err(|e| e.to_string())?;
    let sections = header.sections(endian, data).map_err(|e| e.to_string())?;
    let mut needed = Vec::new();
    for section in sections.iter() {
        let Some((entries, link)) = section.dynamic(endian, data).map_err(|e| e.to_string())?
        else {
            continue;
        };
        let strings = sections
            .strings(endian, data, link)
            .map_err(|e| e.to_string())?;
        for entry in entries {
            if entry.tag32(endian) == Some(object::elf::DT_NEEDED) {
                let name = entry.string(endian, strings).map_err(|e| e.to_string())?;
                needed.push(String::from_utf8_lossy(name).into_owned());
            }
        }
    }
    Ok(needed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needed_libraries_tell_the_mpi() {
        let v = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            mpi_of_needed(&v(&["libmpichfort.so.12", "libc.so.6"])),
            Some(MpiKind::Mpich)
        );
        assert_eq!(
            mpi_of_needed(&v(&["libmpi.so.40", "libc.so.6"])),
            Some(MpiKind::Openmpi)
        );
        assert_eq!(
            mpi_of_needed(&v(&["libmpi_mpifh.so.40"])),
            Some(MpiKind::Openmpi)
        );
        assert_eq!(mpi_of_needed(&v(&["libc.so.6"])), None);
    }

    #[test]
    fn srun_gets_one_export_option() {
        let args = env_args(Style::Srun, &[("LD_PRELOAD", "/a/t.so"), ("DIR", "/t")]);
        assert_eq!(
            args,
            Ok(vec!["--export=ALL,LD_PRELOAD=/a/t.so,DIR=/t".to_string()])
        );
        assert!(env_args(Style::Srun, &[("DIR", "/a,b")]).is_err());
        assert_eq!(
            env_args(Style::Hydra, &[("A", "1")]),
            Ok(vec!["-genv".into(), "A".into(), "1".into()])
        );
    }

    #[test]
    fn elf_needed_reads_a_real_executable() {
        let exe = std::env::current_exe().expect("test binary");
        let data = std::fs::read(exe).expect("read test binary");
        let needed = elf_needed(&data).expect("parses");
        assert!(
            needed.iter().any(|n| n.starts_with("libc.so")),
            "{needed:?}"
        );
        assert!(elf_needed(b"#!/bin/sh\n").is_err());
    }
}
