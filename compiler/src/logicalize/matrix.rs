//! The communication matrix: rank × rank point-to-point traffic (messages, bytes, optional
//! time) with collectives kept apart, and its two documented text forms (CSV and JSON).
//!
//! # CSV form
//!
//! One record a line; blank lines and lines starting with `#` are ignored; fields are
//! separated by commas and may be padded with spaces.
//!
//! ```text
//! # optional: the rank count, when some ranks send nothing
//! ranks,16
//! # optional header
//! src,dst,messages,bytes,time_s
//! 0,1,100,409600,0.012
//! 1,0,100,409600
//! # collectives are kept apart: name, calls, bytes (per rank, summed), optional time
//! collective,allreduce,50,400,0.001
//! ```
//!
//! `time_s` (seconds spent in the sends of that edge) is optional on every line. Repeated
//! `src,dst` lines add up.
//!
//! # JSON form
//!
//! ```json
//! { "ranks": 16,
//!   "p2p": [ { "src": 0, "dst": 1, "messages": 100, "bytes": 409600, "time_s": 0.012 } ],
//!   "collectives": [ { "name": "allreduce", "calls": 50, "bytes": 400 } ] }
//! ```
//!
//! `ranks`, `collectives` and every `time_s` are optional.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The largest rank count accepted; beyond it a matrix file is almost certainly wrong and
/// dense per-rank arrays would waste memory.
pub const MAX_RANKS: u32 = 1 << 20;

/// Traffic carried by one directed edge, one collective, or a set of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    /// Number of messages (for collectives: number of calls).
    pub messages: u64,
    /// Payload bytes.
    pub bytes: u64,
    /// Seconds spent communicating, when the trace measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
}

impl Traffic {
    /// Adds `other` into `self`; time stays known only while both sides know it.
    pub fn add(&mut self, other: &Traffic) {
        self.messages = self.messages.saturating_add(other.messages);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.time_s = match (self.time_s, other.time_s) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }
}

/// The rank × rank point-to-point matrix of one run, with collectives kept apart.
///
/// The trace adapter fills it with [`CommMatrix::add_p2p`] and
/// [`CommMatrix::add_collective`]; [`super::logicalize`] reads it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CommMatrix {
    /// Ranks `0..n_ranks`, including ranks that never send.
    pub n_ranks: u32,
    /// Directed point-to-point edges `(src, dst)`, `src != dst`.
    pub p2p: BTreeMap<(u32, u32), Traffic>,
    /// Messages a rank sent to itself: not part of any topology, reported apart.
    pub self_traffic: Traffic,
    /// Collective operations by name; they are not matched against topologies.
    pub collectives: BTreeMap<String, Traffic>,
}

/// A matrix that could not be built or read; `line` is 1-based for CSV input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatrixError {
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for MatrixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for MatrixError {}

fn err(line: Option<usize>, message: impl Into<String>) -> MatrixError {
    MatrixError {
        line,
        message: message.into(),
    }
}

impl CommMatrix {
    /// An empty matrix over `n_ranks` ranks.
    pub fn new(n_ranks: u32) -> Result<Self, MatrixError> {
        if n_ranks > MAX_RANKS {
            return Err(err(
                None,
                format!("{n_ranks} ranks is more than the {MAX_RANKS} supported"),
            ));
        }
        Ok(CommMatrix {
            n_ranks,
            ..CommMatrix::default()
        })
    }

    /// Adds traffic on the directed edge `src → dst`; the rank count grows to cover both.
    pub fn add_p2p(&mut self, src: u32, dst: u32, traffic: Traffic) -> Result<(), MatrixError> {
        let top = src.max(dst);
        if top >= MAX_RANKS {
            return Err(err(
                None,
                format!("rank {top} is beyond the {MAX_RANKS} supported"),
            ));
        }
        if let Some(t) = traffic.time_s {
            if !t.is_finite() || t < 0.0 {
                return Err(err(
                    None,
                    format!("time {t} is not a finite non-negative number"),
                ));
            }
        }
        self.n_ranks = self.n_ranks.max(top + 1);
        if src == dst {
            self.self_traffic.add(&traffic);
        } else {
            match self.p2p.get_mut(&(src, dst)) {
                Some(existing) => existing.add(&traffic),
                None => {
                    self.p2p.insert((src, dst), traffic);
                }
            }
        }
        Ok(())
    }

    /// Adds traffic of a collective operation (kept apart from the topology).
    pub fn add_collective(&mut self, name: &str, traffic: Traffic) {
        match self.collectives.get_mut(name) {
            Some(existing) => existing.add(&traffic),
            None => {
                self.collectives.insert(name.to_string(), traffic);
            }
        }
    }

    /// Total point-to-point traffic between distinct ranks.
    pub fn p2p_total(&self) -> Traffic {
        let mut total = Traffic {
            time_s: Some(0.0),
            ..Traffic::default()
        };
        for traffic in self.p2p.values() {
            total.add(traffic);
        }
        if self.p2p.is_empty() {
            total.time_s = None;
        }
        total
    }

    /// Writes the CSV form described in the module documentation, which
    /// [`CommMatrix::from_csv`] reads back: the rank count, a header, one line per
    /// directed edge (sender order), then the collectives. Traffic of ranks to
    /// themselves has no rank pair here: it is a comment.
    pub fn to_csv(&self) -> String {
        use std::fmt::Write;
        let mut out = format!("ranks,{}\nsrc,dst,messages,bytes,time_s\n", self.n_ranks);
        let time = |t: &Traffic| t.time_s.map(|s| format!(",{s:.9}")).unwrap_or_default();
        for (&(src, dst), t) in &self.p2p {
            let _ = writeln!(out, "{src},{dst},{},{}{}", t.messages, t.bytes, time(t));
        }
        if self.self_traffic.messages > 0 {
            let _ = writeln!(
                out,
                "# messages of ranks to themselves: {} ({} bytes)",
                self.self_traffic.messages, self.self_traffic.bytes
            );
        }
        for (name, t) in &self.collectives {
            let _ = writeln!(
                out,
                "collective,{name},{},{}{}",
                t.messages,
                t.bytes,
                time(t)
            );
        }
        out
    }

    /// Reads the CSV form described in the module documentation.
    pub fn from_csv(text: &str) -> Result<Self, MatrixError> {
        let mut matrix = CommMatrix::default();
        for (idx, raw) in text.lines().enumerate() {
            let line_no = Some(idx + 1);
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let first = fields.first().copied().unwrap_or("");
            if first.eq_ignore_ascii_case("src") {
                continue;
            }
            if first.eq_ignore_ascii_case("ranks") {
                let [_, count] = fields.as_slice() else {
                    return Err(err(line_no, "expected `ranks,N`"));
                };
                let count = parse_u64(count, "rank count", line_no)?;
                let count = u32::try_from(count)
                    .ok()
                    .filter(|c| *c <= MAX_RANKS)
                    .ok_or_else(|| err(line_no, format!("{count} ranks is too many")))?;
                matrix.n_ranks = matrix.n_ranks.max(count);
                continue;
            }
            if first.eq_ignore_ascii_case("collective") {
                if !(4..=5).contains(&fields.len()) {
                    return Err(err(
                        line_no,
                        "expected `collective,NAME,calls,bytes[,time_s]`",
                    ));
                }
                let traffic = parse_traffic(&fields[2..], line_no)?;
                matrix.add_collective(fields[1], traffic);
                continue;
            }
            if !(4..=5).contains(&fields.len()) {
                return Err(err(
                    line_no,
                    format!(
                        "expected `src,dst,messages,bytes[,time_s]`, found {} fields",
                        fields.len()
                    ),
                ));
            }
            let src = parse_rank(fields[0], line_no)?;
            let dst = parse_rank(fields[1], line_no)?;
            let traffic = parse_traffic(&fields[2..], line_no)?;
            matrix
                .add_p2p(src, dst, traffic)
                .map_err(|e| err(line_no, e.message))?;
        }
        Ok(matrix)
    }

    /// Reads the JSON form described in the module documentation.
    pub fn from_json(text: &str) -> Result<Self, MatrixError> {
        let file: JsonMatrix = serde_json::from_str(text).map_err(|e| {
            err(
                Some(e.line()),
                format!("not a communication matrix in JSON: {e}"),
            )
        })?;
        let mut matrix = CommMatrix::new(file.ranks.unwrap_or(0))?;
        for edge in &file.p2p {
            let traffic = Traffic {
                messages: edge.messages,
                bytes: edge.bytes,
                time_s: edge.time_s,
            };
            matrix.add_p2p(edge.src, edge.dst, traffic)?;
        }
        for coll in &file.collectives {
            matrix.add_collective(
                &coll.name,
                Traffic {
                    messages: coll.calls,
                    bytes: coll.bytes,
                    time_s: coll.time_s,
                },
            );
        }
        Ok(matrix)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonMatrix {
    #[serde(default)]
    ranks: Option<u32>,
    #[serde(default)]
    p2p: Vec<JsonEdge>,
    #[serde(default)]
    collectives: Vec<JsonCollective>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonEdge {
    src: u32,
    dst: u32,
    messages: u64,
    bytes: u64,
    #[serde(default)]
    time_s: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonCollective {
    name: String,
    calls: u64,
    bytes: u64,
    #[serde(default)]
    time_s: Option<f64>,
}

fn parse_u64(field: &str, what: &str, line: Option<usize>) -> Result<u64, MatrixError> {
    field.parse::<u64>().map_err(|_| {
        err(
            line,
            format!("{what} `{field}` is not a non-negative integer"),
        )
    })
}

fn parse_rank(field: &str, line: Option<usize>) -> Result<u32, MatrixError> {
    let value = parse_u64(field, "rank", line)?;
    u32::try_from(value)
        .ok()
        .filter(|r| *r < MAX_RANKS)
        .ok_or_else(|| {
            err(
                line,
                format!("rank {value} is beyond the {MAX_RANKS} supported"),
            )
        })
}

fn parse_traffic(fields: &[&str], line: Option<usize>) -> Result<Traffic, MatrixError> {
    let messages = parse_u64(fields[0], "message count", line)?;
    let bytes = parse_u64(fields[1], "byte count", line)?;
    let time_s = match fields.get(2) {
        None => None,
        Some(&"") => None,
        Some(f) => {
            let t: f64 = f
                .parse()
                .map_err(|_| err(line, format!("time `{f}` is not a number")))?;
            if !t.is_finite() || t < 0.0 {
                return Err(err(
                    line,
                    format!("time `{f}` is not a finite non-negative number"),
                ));
            }
            Some(t)
        }
    };
    Ok(Traffic {
        messages,
        bytes,
        time_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trip_of_all_record_kinds() {
        let text = "# test\nranks, 8\nsrc,dst,messages,bytes,time_s\n0,1,2,100,0.5\n0,1,1,50\n3,3,1,1\ncollective,allreduce,4,32\n";
        let m = CommMatrix::from_csv(text).expect("valid csv");
        assert_eq!(m.n_ranks, 8);
        let t = m.p2p[&(0, 1)];
        assert_eq!((t.messages, t.bytes, t.time_s), (3, 150, None));
        assert_eq!(m.self_traffic.messages, 1);
        assert_eq!(m.collectives["allreduce"].messages, 4);
    }

    #[test]
    fn csv_written_reads_back_the_same_matrix() {
        let text = "ranks,8\n0,1,2,100,0.5\n2,0,1,50,0.25\n3,3,1,1\ncollective,allreduce,4,32,0.125\ncollective,bcast,1,8\n";
        let mut m = CommMatrix::from_csv(text).expect("valid csv");
        m.self_traffic = Traffic::default();
        let written = m.to_csv();
        assert_eq!(
            written,
            "ranks,8\nsrc,dst,messages,bytes,time_s\n0,1,2,100,0.500000000\n2,0,1,50,0.250000000\ncollective,allreduce,4,32,0.125000000\ncollective,bcast,1,8\n"
        );
        assert_eq!(CommMatrix::from_csv(&written).expect("reads back"), m);
    }

    #[test]
    fn csv_errors_name_the_line() {
        let e = CommMatrix::from_csv("0,1,2\n").expect_err("too few fields");
        assert_eq!(e.line, Some(1));
        let e = CommMatrix::from_csv("\n0,x,2,3\n").expect_err("bad rank");
        assert_eq!(e.line, Some(2));
        assert!(CommMatrix::from_csv("0,1,2,3,-1\n").is_err());
        assert!(CommMatrix::from_csv("0,99999999999,2,3\n").is_err());
    }

    #[test]
    fn json_form() {
        let m = CommMatrix::from_json(
            r#"{"ranks": 4, "p2p": [{"src": 0, "dst": 2, "messages": 1, "bytes": 8, "time_s": 0.1}],
                "collectives": [{"name": "barrier", "calls": 3, "bytes": 0}]}"#,
        )
        .expect("valid json");
        assert_eq!(m.n_ranks, 4);
        assert_eq!(m.p2p[&(0, 2)].time_s, Some(0.1));
        assert!(CommMatrix::from_json("{\"p2p\": 3}").is_err());
        assert!(CommMatrix::from_json("").is_err());
    }
}
