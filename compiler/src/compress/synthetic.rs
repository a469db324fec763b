//! Synthetic token sequences with known loop nests → test and benchmark input shaped like
//! the seed's NAS table.
//!
//! The seed (`001_*`, "Loop Discovery Performance") reports, for five NAS Parallel
//! Benchmarks, the raw trace length and the compressed length. It does not give the loop
//! structure, so each generator below assumes one (documented on it) that yields exactly
//! the seed's raw length and, as [`super::description_len`] (one per call plus one per loop
//! header), exactly the seed's compressed length. The seed's unit is "MPI calls"; whether
//! it counted loop headers is not stated, so the compressed lengths here count them.
//! Every call site is a distinct token; a warm-up iteration identical to the timed ones
//! simply adds one iteration.

use super::Node;

/// One row of the seed's table: benchmark, raw length, compressed length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedRow {
    pub name: &'static str,
    pub raw: usize,
    pub compressed: usize,
}

/// The seed's NAS rows, in its order.
pub const NAS: [SeedRow; 5] = [
    SeedRow {
        name: "BT",
        raw: 17_106,
        compressed: 44,
    },
    SeedRow {
        name: "SP",
        raw: 26_888,
        compressed: 89,
    },
    SeedRow {
        name: "LU",
        raw: 323_048,
        compressed: 63,
    },
    SeedRow {
        name: "CG",
        raw: 41_954,
        compressed: 10,
    },
    SeedRow {
        name: "MG",
        raw: 10_047,
        compressed: 648,
    },
];

/// A generated trace: its tokens and the nest it was generated from.
#[derive(Clone, Debug)]
pub struct Synthetic {
    pub name: &'static str,
    pub tokens: Vec<u32>,
    pub nest: Vec<Node>,
}

/// The generator for a seed row's benchmark, by name (`BT`, `SP`, `LU`, `CG`, `MG`).
pub fn nas(name: &str) -> Option<Synthetic> {
    let mut calls = Calls(0);
    let (name, nest) = match name {
        "BT" => ("BT", bt(&mut calls)),
        "SP" => ("SP", sp(&mut calls)),
        "LU" => ("LU", lu(&mut calls)),
        "CG" => ("CG", cg(&mut calls)),
        "MG" => ("MG", mg(&mut calls)),
        _ => return None,
    };
    Some(Synthetic {
        name,
        tokens: super::expand(&nest),
        nest,
    })
}

/// A regular application's nest, for streaming benchmarks: 4 calls, then `iterations`
/// iterations of `body` distinct calls and an inner loop of `inner` iterations of 3
/// calls, then 4 calls.
pub fn regular(iterations: u64, body: usize, inner: u64) -> Vec<Node> {
    let mut calls = Calls(0);
    let mut loop_body = calls.take(body);
    loop_body.push(repeat(inner, calls.take(3)));
    let mut nest = calls.take(4);
    nest.push(repeat(iterations, loop_body));
    nest.extend(calls.take(4));
    nest
}

/// Fresh call-site tokens.
struct Calls(u32);

impl Calls {
    fn take(&mut self, n: usize) -> Vec<Node> {
        let first = self.0;
        self.0 += n as u32;
        (first..self.0).map(Node::Token).collect()
    }
}

fn repeat(count: u64, body: Vec<Node>) -> Node {
    Node::Loop { count, body }
}

/// BT: 20 calls of setup and verification around one untimed ADI step, a timer call, and
/// 200 timed ADI steps. An ADI step is one call (the face exchange's wait) and 6 sweeps
/// (x, y, z solves, forward and back), each 6 boundary calls and a 4-cell pipeline of a
/// send/receive pair. Raw 20 + 1 + 201 × 85 = 17,106; description 20 + 1 + 1 + 2 × 11 = 44.
fn bt(calls: &mut Calls) -> Vec<Node> {
    let mut step = calls.take(1);
    let mut sweep = calls.take(6);
    sweep.push(repeat(4, calls.take(2)));
    step.push(repeat(6, sweep));
    let mut nest = calls.take(12);
    nest.extend(step.clone());
    nest.extend(calls.take(1));
    nest.push(repeat(200, step));
    nest.extend(calls.take(8));
    nest
}

/// SP: 21 calls of setup and verification around 401 ADI steps (one warm-up, 400 timed)
/// of 67 distinct calls each. Raw 21 + 401 × 67 = 26,888; description 21 + 1 + 67 = 89.
fn sp(calls: &mut Calls) -> Vec<Node> {
    let mut nest = calls.take(15);
    nest.push(repeat(401, calls.take(67)));
    nest.extend(calls.take(6));
    nest
}

/// LU: 48 calls of setup and verification around 250 SSOR iterations. An iteration is 2
/// calls (the residual's exchange) and 30 wavefront planes, each 9 calls and a 34-step
/// pipeline of one call. Raw 48 + 250 × 1,292 = 323,048; description 48 + 1 + 14 = 63.
fn lu(calls: &mut Calls) -> Vec<Node> {
    let mut plane = calls.take(9);
    plane.push(repeat(34, calls.take(1)));
    let mut iteration = calls.take(2);
    iteration.push(repeat(30, plane));
    let mut nest = calls.take(40);
    nest.push(repeat(250, iteration));
    nest.extend(calls.take(8));
    nest
}

/// CG: one call before and one after 76 outer iterations (one warm-up, 75 timed). An
/// outer iteration is 2 calls (the norm's reductions) and conj_grad's 25 iterations, each
/// 2 calls (the transpose exchange) and 20 identical reduction steps. Raw 2 + 76 × 552 =
/// 41,954; description 2 + 1 + 7 = 10.
fn cg(calls: &mut Calls) -> Vec<Node> {
    let mut inner = calls.take(2);
    inner.push(repeat(20, calls.take(1)));
    let mut outer = calls.take(2);
    outer.push(repeat(25, inner));
    let mut nest = calls.take(1);
    nest.push(repeat(76, outer));
    nest.extend(calls.take(1));
    nest
}

/// MG: one call before and one after 5 V-cycles (one warm-up, 4 timed). A V-cycle is
/// mostly straight-line, since every grid level sends messages of its own size: 609
/// distinct calls, then the finest level's smoother, 40 iterations of 35 calls. Raw
/// 2 + 5 × 2,009 = 10,047; description 2 + 1 + 645 = 648.
fn mg(calls: &mut Calls) -> Vec<Node> {
    let mut cycle = calls.take(609);
    cycle.push(repeat(40, calls.take(35)));
    let mut nest = calls.take(1);
    nest.push(repeat(5, cycle));
    nest.extend(calls.take(1));
    nest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::{description_len, discover, expand, Algorithm};

    #[test]
    fn generators_have_the_seed_lengths() {
        for row in NAS {
            let synthetic = nas(row.name).unwrap_or_else(|| panic!("no generator {}", row.name));
            assert_eq!(synthetic.tokens.len(), row.raw, "{}", row.name);
            assert_eq!(
                description_len(&synthetic.nest),
                row.compressed,
                "{}",
                row.name
            );
        }
    }

    #[test]
    fn both_algorithms_reach_the_seed_compressed_lengths() {
        for row in NAS {
            let synthetic = nas(row.name).unwrap_or_else(|| panic!("no generator {}", row.name));
            for algorithm in [Algorithm::Exact, Algorithm::Greedy] {
                let nest = discover(&synthetic.tokens, algorithm);
                assert_eq!(
                    expand(&nest),
                    synthetic.tokens,
                    "{} {algorithm:?}",
                    row.name
                );
                assert_eq!(
                    description_len(&nest),
                    row.compressed,
                    "{} {algorithm:?}",
                    row.name
                );
            }
        }
    }

    #[test]
    fn exact_finds_the_generated_nest() {
        for row in NAS {
            let synthetic = nas(row.name).unwrap_or_else(|| panic!("no generator {}", row.name));
            assert_eq!(
                discover(&synthetic.tokens, Algorithm::Exact),
                synthetic.nest,
                "{}",
                row.name
            );
        }
    }
}
