//! The latency/bandwidth model of one machine and MPI library: measured by `perfskel
//! calibrate` (a ping-pong program) or the defaults below; gives the time of a message and
//! of each collective, which the timed simulation (`timing.rs`) adds up.
//!
//! Point-to-point messages follow Hockney's model, `latency + bytes / bandwidth`, with an
//! eager limit: below it a send completes locally, above it the sender waits for the
//! receiver (rendezvous). Collectives use the textbook costs of the algorithms MPI
//! libraries pick (Thakur, Rabenseifner and Gropp, "Optimization of collective
//! communication operations in MPICH", IJHPCA 2005): binomial trees and recursive
//! doubling for short messages, scatter + allgather or reduce-scatter + allgather for
//! long ones, pairwise exchange for all-to-all.

use perfskel_grammar::ast::CollOp;
use serde::{Deserialize, Serialize};

/// A machine/MPI model. Serialized as JSON by `perfskel calibrate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// The MPI library the model was measured with (`openmpi`, `mpich`), or `default`.
    pub mpi: String,
    /// One-way time of an empty message, in seconds.
    pub latency_s: f64,
    /// Bytes per second of a large message.
    pub bandwidth_bytes_per_s: f64,
    /// Messages up to this size complete at the sender without waiting for the receiver.
    pub eager_limit_bytes: u64,
    /// Fixed cost of creating a communicator (split, dup, cart_sub), beyond its messages.
    pub comm_create_s: f64,
    /// Where it was measured (host, processor, MPI library version, perfskel version):
    /// a cached model is used only where this still holds (see `perfskel calibrate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_on: Option<String>,
    /// How well the measurements fit the model (`perfskel calibrate`; none for the
    /// defaults or a model written by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<Fit>,
}

/// The quality of a calibrated model's fit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// Coefficient of determination of the bandwidth line over the large messages.
    pub r_squared: f64,
    /// Message sizes that line was fitted over.
    pub sizes: u32,
    /// The empty message's fastest and slowest round, in seconds (`latency_s` is the
    /// median round).
    pub latency_fastest_s: f64,
    pub latency_slowest_s: f64,
    /// Whether `eager_limit_bytes` was measured (a send left waiting for its receive)
    /// rather than the built-in value.
    pub eager_measured: bool,
}

impl Default for Model {
    /// Shared-memory figures of a current Linux node with OpenMPI or MPICH; `perfskel
    /// calibrate` replaces them with measured ones.
    fn default() -> Model {
        Model {
            mpi: "default".into(),
            latency_s: 1.0e-6,
            bandwidth_bytes_per_s: 4.0e9,
            eager_limit_bytes: 65_536,
            comm_create_s: 20.0e-6,
            measured_on: None,
            fit: None,
        }
    }
}

impl Model {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a model file; the error says which field is wrong.
    pub fn from_json(text: &str) -> Result<Model, String> {
        let model: Model = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let valid = |v: f64| v.is_finite() && v > 0.0;
        if !valid(model.latency_s) || !valid(model.bandwidth_bytes_per_s) {
            return Err("latency_s and bandwidth_bytes_per_s must be positive numbers".into());
        }
        if !(model.comm_create_s.is_finite() && model.comm_create_s >= 0.0) {
            return Err("comm_create_s must be a number of seconds, zero or more".into());
        }
        Ok(model)
    }

    /// The time to move `bytes` between two ranks.
    pub fn p2p(&self, bytes: u64) -> f64 {
        self.latency_s + bytes as f64 / self.bandwidth_bytes_per_s
    }

    /// Whether a send of `bytes` completes without waiting for the receiver.
    pub fn is_eager(&self, bytes: u64) -> bool {
        bytes <= self.eager_limit_bytes
    }

    /// The time of a collective over `p` ranks, from the last rank's arrival to the end.
    /// `bytes` is the size the skeleton gives (per rank, per block or the buffer, as
    /// `grammar/REFERENCE.md` says).
    pub fn collective(&self, op: CollOp, bytes: u64, p: u64) -> f64 {
        if p <= 1 {
            return 0.0;
        }
        let l = self.latency_s;
        let byte = 1.0 / self.bandwidth_bytes_per_s;
        let b = bytes as f64;
        let lg = f64::from(64 - (p - 1).leading_zeros());
        let pf = p as f64;
        let spread = (pf - 1.0) / pf;
        match op {
            CollOp::Barrier => lg * l,
            CollOp::Bcast => {
                let tree = lg * (l + b * byte);
                let scatter_allgather = (lg + pf - 1.0) * l + 2.0 * spread * b * byte;
                tree.min(scatter_allgather)
            }
            CollOp::Reduce => {
                let tree = lg * (l + b * byte);
                let rabenseifner = 2.0 * lg * l + 2.0 * spread * b * byte;
                tree.min(rabenseifner)
            }
            CollOp::Allreduce => {
                let doubling = lg * (l + b * byte);
                let rabenseifner = 2.0 * lg * l + 2.0 * spread * b * byte;
                doubling.min(rabenseifner)
            }
            CollOp::Gather
            | CollOp::Gatherv
            | CollOp::Scatter
            | CollOp::Scatterv
            | CollOp::Allgather
            | CollOp::Allgatherv
            | CollOp::ReduceScatter => lg * l + (pf - 1.0) * b * byte,
            CollOp::Alltoall | CollOp::Alltoallv => (pf - 1.0) * (l + b * byte),
            CollOp::Scan => lg * (l + b * byte),
        }
    }

    /// The time of creating a communicator over a parent of `p` ranks (an allgather of
    /// colours and keys, then local work).
    pub fn comm_create(&self, p: u64) -> f64 {
        self.collective(CollOp::Allgather, 8, p) + self.comm_create_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_grow_with_size_and_ranks() {
        let m = Model::default();
        assert!(m.p2p(1 << 20) > m.p2p(8));
        assert!((m.p2p(0) - m.latency_s).abs() < 1e-15);
        for op in CollOp::ALL {
            assert_eq!(m.collective(op, 1024, 1), 0.0);
            assert!(
                m.collective(op, 1024, 16) >= m.collective(op, 1024, 4),
                "{op:?}"
            );
            assert!(
                m.collective(op, 1 << 20, 8) >= m.collective(op, 8, 8),
                "{op:?}"
            );
        }
        // A barrier over 16 ranks is four rounds.
        assert!((m.collective(CollOp::Barrier, 0, 16) - 4.0 * m.latency_s).abs() < 1e-15);
    }

    #[test]
    fn model_files_round_trip_and_bad_ones_are_refused() {
        let m = Model::default();
        assert_eq!(Model::from_json(&m.to_json()), Ok(m));
        assert!(Model::from_json("{}").is_err());
        let negative = Model::default().to_json().replace("1e-6", "-1.0");
        assert!(Model::from_json(&negative).is_err(), "{negative}");
    }
}
