//! `perfskel platform --shape SHAPE -o FILE.xml`: writes a SimGrid platform file and its
//! host file (`FILE.hosts`, one host per line) for `perfskel run --simgrid FILE.xml`: a
//! flat cluster, a torus, a two-level fat tree or a dragonfly, SimGrid's cluster zones,
//! with the node speed, link latency and bandwidth given, or the latency and bandwidth
//! `perfskel calibrate` measured on this machine.
//!
//! Node speed: `perfskel run --simgrid` tells SMPI that the machine a trace was taken on
//! runs [`crate::cmd_run::SIMGRID_HOST_SPEED`] (1 Gf), so a node of `1Gf` replays compute
//! spans as traced, `2Gf` in half their time.

use std::fmt::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::cmd_record::MpiKind;

#[derive(clap::Args)]
pub struct Args {
    /// The shape: `cluster:N` (N nodes on one switch), `torus:AxBxC` (a torus of that
    /// many nodes per dimension), `fat-tree:A,B` (B leaf switches of A nodes each, under
    /// two top switches), `dragonfly:G,C,R,N` (G groups of C chassis of R routers of N
    /// nodes).
    #[arg(long)]
    shape: String,
    /// The platform file to write; the host file goes beside it (`.hosts`).
    #[arg(short, long)]
    output: PathBuf,
    /// Each node's speed in SimGrid units (`1Gf`: as fast as the machine the trace was
    /// taken on; `2Gf` twice as fast).
    #[arg(long, default_value = "1Gf")]
    speed: String,
    /// Latency of each link (SimGrid units: `1us`, `500ns`).
    #[arg(long, conflicts_with = "calibrated")]
    latency: Option<String>,
    /// Bandwidth of each link (SimGrid units: `10GBps`, `100Gbps`).
    #[arg(long, conflicts_with = "calibrated")]
    bandwidth: Option<String>,
    /// Take the latency and bandwidth from the model `perfskel calibrate --mpi MPI`
    /// saved for this machine.
    #[arg(long, value_name = "MPI", value_enum)]
    calibrated: Option<MpiKind>,
    /// Overwrite the files if they exist.
    #[arg(long)]
    force: bool,
}

/// What the shape asks for.
#[derive(Debug, PartialEq)]
enum Shape {
    Cluster(u64),
    Torus(Vec<u64>),
    FatTree(u64, u64),
    Dragonfly([u64; 4]),
}

impl Shape {
    fn parse(text: &str) -> Result<Shape, String> {
        let (kind, dims) = text.split_once(':').ok_or_else(|| {
            format!("--shape {text}: write KIND:SIZES (cluster:16, torus:4x4x4, fat-tree:4,4, dragonfly:2,2,2,2)")
        })?;
        let numbers = |sep: char, n: Option<usize>| -> Result<Vec<u64>, String> {
            let v: Vec<u64> = dims
                .split(sep)
                .map(|d| d.trim().parse::<u64>().ok().filter(|d| *d > 0))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    format!("--shape {text}: `{dims}` is not positive whole numbers separated by `{sep}`")
                })?;
            if let Some(n) = n.filter(|n| *n != v.len()) {
                return Err(format!("--shape {text}: {kind} takes {n} numbers"));
            }
            Ok(v)
        };
        let shape = match kind {
            "cluster" => Shape::Cluster(numbers(',', Some(1))?[0]),
            "torus" => Shape::Torus(numbers('x', None)?),
            "fat-tree" => {
                let v = numbers(',', Some(2))?;
                Shape::FatTree(v[0], v[1])
            }
            "dragonfly" => {
                let v = numbers(',', Some(4))?;
                Shape::Dragonfly([v[0], v[1], v[2], v[3]])
            }
            other => {
                return Err(format!(
                    "--shape {text}: unknown kind `{other}` (cluster, torus, fat-tree, dragonfly)"
                ))
            }
        };
        let n = shape.nodes();
        if !(1..=1 << 20).contains(&n) {
            return Err(format!("--shape {text}: {n} nodes (at most 1048576)"));
        }
        Ok(shape)
    }

    fn nodes(&self) -> u64 {
        let product = |v: &[u64]| v.iter().try_fold(1u64, |a, d| a.checked_mul(*d));
        match self {
            Shape::Cluster(n) => *n,
            Shape::Torus(d) => product(d).unwrap_or(u64::MAX),
            Shape::FatTree(a, b) => a.checked_mul(*b).unwrap_or(u64::MAX),
            Shape::Dragonfly(v) => product(v).unwrap_or(u64::MAX),
        }
    }

    /// SimGrid's `topology` and `topo_parameters` of a cluster zone (none: flat).
    fn topology(&self) -> Option<(&'static str, String)> {
        let join =
            |v: &[u64], sep: &str| v.iter().map(u64::to_string).collect::<Vec<_>>().join(sep);
        match self {
            Shape::Cluster(_) => None,
            Shape::Torus(d) => Some(("TORUS", join(d, ","))),
            // Two levels: A nodes under each leaf switch, B leaf switches under each top
            // switch; one up-link from each node, two from each leaf switch (to the two
            // top switches), single links.
            Shape::FatTree(a, b) => Some(("FAT_TREE", format!("2;{a},{b};1,2;1,1"))),
            // Groups, chassis, routers with one link each between them; nodes per router.
            Shape::Dragonfly([g, c, r, n]) => Some(("DRAGONFLY", format!("{g},1;{c},1;{r},1;{n}"))),
        }
    }
}

/// The platform file of `shape`, hosts `node-0` … `node-{n-1}`.
fn platform_xml(
    shape: &Shape,
    shape_text: &str,
    speed: &str,
    latency: &str,
    bandwidth: &str,
    source: &str,
) -> String {
    let n = shape.nodes();
    let mut xml = String::new();
    let _ = writeln!(xml, "<?xml version='1.0'?>");
    let _ = writeln!(
        xml,
        "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">"
    );
    let _ = writeln!(
        xml,
        "<!-- Written by perfskel platform: {shape_text}, {n} nodes of {speed} (1Gf: as fast as the machine a trace was taken on), links of {latency} and {bandwidth} ({source}). -->"
    );
    let _ = writeln!(xml, "<platform version=\"4.1\">");
    let topology = match shape.topology() {
        Some((kind, params)) => format!(" topology=\"{kind}\" topo_parameters=\"{params}\""),
        None => format!(" bb_bw=\"{bandwidth}\" bb_lat=\"0us\""),
    };
    let _ = writeln!(
        xml,
        "  <cluster id=\"perfskel\" prefix=\"node-\" suffix=\"\" radical=\"0-{}\" speed=\"{speed}\" bw=\"{bandwidth}\" lat=\"{latency}\"{topology}/>",
        n - 1
    );
    let _ = writeln!(xml, "</platform>");
    xml
}

/// A SimGrid quantity: a number and one of the units given.
fn quantity(what: &str, text: &str, units: &[&str]) -> Result<String, String> {
    let unit_at = text
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(|| format!("--{what} {text}: give a unit ({})", units.join(", ")))?;
    let (number, unit) = text.split_at(unit_at);
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("--{what} {text}: `{number}` is not a positive number"))?;
    if !units.contains(&unit) {
        return Err(format!(
            "--{what} {text}: unknown unit `{unit}` ({})",
            units.join(", ")
        ));
    }
    Ok(format!("{value}{unit}"))
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let shape = Shape::parse(&args.shape)?;
    let speed = quantity("speed", &args.speed, &["f", "kf", "Mf", "Gf", "Tf", "Pf"])?;
    let (latency, bandwidth, source) = match args.calibrated {
        Some(mpi) => {
            let (model, from) = crate::cmd_compile::load_model(None, mpi, false)?;
            if model.measured_on.is_none() {
                return Err(format!(
                    "no model measured on this machine with {} (`perfskel calibrate --mpi {}` measures one)",
                    mpi.name(),
                    mpi.name()
                ));
            }
            (
                format!("{:.3}ns", model.latency_s * 1e9),
                format!("{:.0}Bps", model.bandwidth_bytes_per_s),
                format!("latency and bandwidth of {from}"),
            )
        }
        None => (
            quantity(
                "latency",
                args.latency.as_deref().unwrap_or("1us"),
                &["s", "ms", "us", "ns", "ps"],
            )?,
            quantity(
                "bandwidth",
                args.bandwidth.as_deref().unwrap_or("10GBps"),
                &[
                    "Bps", "kBps", "MBps", "GBps", "TBps", "bps", "kbps", "Mbps", "Gbps", "Tbps",
                ],
            )?,
            "as given".to_string(),
        ),
    };
    let hosts_path = args.output.with_extension("hosts");
    crate::files::check_new_file(&args.output, args.force)?;
    crate::files::check_new_file(&hosts_path, args.force)?;
    let xml = platform_xml(&shape, &args.shape, &speed, &latency, &bandwidth, &source);
    let hosts: String = (0..shape.nodes()).map(|i| format!("node-{i}\n")).collect();
    crate::files::write_new_file(&args.output, xml.as_bytes(), args.force)?;
    crate::files::write_new_file(&hosts_path, hosts.as_bytes(), args.force)?;
    eprintln!(
        "perfskel platform: wrote {} ({} nodes of {speed}, links {latency} and {bandwidth}) and {}",
        args.output.display(),
        shape.nodes(),
        hosts_path.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_count_their_nodes() {
        assert_eq!(Shape::parse("cluster:16").map(|s| s.nodes()), Ok(16));
        assert_eq!(Shape::parse("torus:4x4x4").map(|s| s.nodes()), Ok(64));
        assert_eq!(Shape::parse("fat-tree:4,4").map(|s| s.nodes()), Ok(16));
        assert_eq!(Shape::parse("dragonfly:2,2,2,2").map(|s| s.nodes()), Ok(16));
        for bad in [
            "cluster",
            "cluster:0",
            "torus:4x",
            "fat-tree:4",
            "mesh:4",
            "cluster:-1",
            "torus:1048576x2",
        ] {
            assert!(Shape::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn quantities_need_a_known_unit() {
        assert_eq!(quantity("latency", "1.5us", &["us"]), Ok("1.5us".into()));
        assert!(quantity("latency", "1.5", &["us"]).is_err());
        assert!(quantity("latency", "-1us", &["us"]).is_err());
        assert!(quantity("latency", "1xs", &["us"]).is_err());
    }
}
