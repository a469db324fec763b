//! The example applications the harness validates, as data: name, source file in
//! `examples/apps/`, and the argument sets of each mode — the traced problem, the small
//! problem of the "small problem size" baseline and the different problem of the negative
//! control. The CLI embeds the sources and builds them.

use super::scenario::Mpi;

/// The arguments an application gets in one mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// The problem that is traced and predicted.
    pub traced: &'static [&'static str],
    /// A much smaller problem (about 1/20 of the time): the "small problem size"
    /// baseline runs it in base and in each scenario and applies the slowdown.
    pub small: &'static [&'static str],
    /// A different problem, about twice the work: the negative control gives it to the
    /// application but not to the skeleton.
    pub different: &'static [&'static str],
}

/// LAMMPS's command line for the melt (`scripts/real-apps/in.melt`, written into the
/// work directory's `src/`) at `cells`^3 fcc cells and `steps` time steps.
macro_rules! melt {
    ($cells:literal, $steps:literal) => {
        &[
            "-in",
            "src/in.melt",
            "-var",
            "cells",
            $cells,
            "-var",
            "steps",
            $steps,
            "-log",
            "none",
            "-screen",
            "none",
        ]
    };
}

/// How an installed program reads its problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// The arguments are its command line (paths relative to the work directory).
    Args,
    /// HPCC: the one argument is N, which the runner writes with a P x Q grid of the
    /// ranks into `hpccinf.txt` (from the embedded template) in a run directory of its own.
    HpccInf,
}

/// A program Debian installs, run as it is: the harness does not build it, so it is
/// timed with the shim preloaded (`LD_PRELOAD`) instead of linked in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Installed {
    /// The program, found on `PATH`.
    pub program: &'static str,
    /// The Debian package that installs it (`scripts/setup.sh` does).
    pub package: &'static str,
    /// The only MPI it runs with: Debian builds it against Open MPI.
    pub mpi: Mpi,
    pub input: Input,
}

/// One application of the harness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppSpec {
    pub name: &'static str,
    /// The file name in `examples/apps/`, or in `tests/apps/` for the programs that
    /// reproduce a real code's pattern; for an installed program, its input file
    /// (embedded as well).
    pub source_file: &'static str,
    /// `Some`: a program Debian installs (LAMMPS, HPCC), not built from a source here.
    pub installed: Option<Installed>,
    /// What the application does, for `--list`.
    pub summary: &'static str,
    /// Full mode: the traced problem runs for about 4–5 s at 2 ranks on an idle
    /// 2-core machine, about 3 ms per iteration (coarse enough that the busy-polling
    /// `pinned` scenario, where every synchronization can cost a time slice, stays
    /// within the run limit), so that at K = 100 the skeleton runs for 40–50 ms.
    pub full: Sizes,
    /// Quick mode: well under a second per run.
    pub quick: Sizes,
}

/// Every C example application, in the order of the reports. The Fortran versions of
/// `ring`, `cg` and `stencil` are left out: they repeat the C ones, and the timing shim
/// the harness links into the applications wraps the C bindings of `MPI_Init` and
/// `MPI_Finalize` only.
pub const APPS: &[AppSpec] = &[
    AppSpec {
        name: "stencil",
        source_file: "stencil.c",
        installed: None,
        summary: "2-D Jacobi stencil: four Sendrecv halo exchanges and an Allreduce per iteration",
        full: Sizes {
            traced: &["1400", "1500"],
            small: &["700", "300"],
            different: &["1980", "1500"],
        },
        quick: Sizes {
            traced: &["256", "400"],
            small: &["128", "100"],
            different: &["362", "400"],
        },
    },
    AppSpec {
        name: "cg",
        source_file: "cg.c",
        installed: None,
        summary: "CG-like 1-D Laplacian solver: Irecv/Isend halo exchange and two Allreduce dot products per iteration",
        full: Sizes {
            traced: &["1000000", "1500"],
            small: &["200000", "375"],
            different: &["2000000", "1500"],
        },
        quick: Sizes {
            traced: &["50000", "400"],
            small: &["10000", "100"],
            different: &["100000", "400"],
        },
    },
    AppSpec {
        name: "ring",
        source_file: "ring.c",
        installed: None,
        summary: "ring pipeline: each rank receives a block from the left, transforms it and sends it right",
        full: Sizes {
            traced: &["200000", "1500"],
            small: &["40000", "375"],
            different: &["400000", "1500"],
        },
        quick: Sizes {
            traced: &["50000", "100"],
            small: &["10000", "25"],
            different: &["100000", "100"],
        },
    },
    AppSpec {
        name: "transpose",
        source_file: "transpose.c",
        installed: None,
        summary: "all-to-all transpose: one Alltoall of B x B blocks per iteration, then a local smoothing",
        full: Sizes {
            traced: &["512", "800"],
            small: &["256", "160"],
            different: &["724", "1100"],
        },
        quick: Sizes {
            traced: &["128", "200"],
            small: &["64", "50"],
            different: &["181", "275"],
        },
    },
    AppSpec {
        name: "tree_reduce",
        source_file: "tree_reduce.c",
        installed: None,
        summary: "tree reduction: partial sums sent up a binary tree with Send/Recv, then a Bcast",
        full: Sizes {
            traced: &["2000000", "1500"],
            small: &["400000", "375"],
            different: &["4000000", "1500"],
        },
        quick: Sizes {
            traced: &["500000", "100"],
            small: &["100000", "25"],
            different: &["1000000", "100"],
        },
    },
    AppSpec {
        name: "rowcol",
        source_file: "rowcol.c",
        installed: None,
        summary: "row and column communicators from Comm_split: Allreduce along rows, Bcast down columns",
        full: Sizes {
            traced: &["400000", "1200"],
            small: &["80000", "300"],
            different: &["800000", "1200"],
        },
        quick: Sizes {
            traced: &["50000", "100"],
            small: &["10000", "25"],
            different: &["100000", "100"],
        },
    },
    AppSpec {
        name: "master_worker",
        source_file: "master_worker.c",
        installed: None,
        summary: "master/worker: rank 0 hands out ranges, workers count primes and answer (MPI_ANY_SOURCE)",
        full: Sizes {
            traced: &["100000", "120"],
            small: &["20000", "70"],
            different: &["200000", "120"],
        },
        quick: Sizes {
            traced: &["20000", "20"],
            small: &["5000", "10"],
            different: &["40000", "20"],
        },
    },
    AppSpec {
        name: "halo_dims",
        source_file: "halo_dims.c",
        installed: None,
        summary: "3-D ghost exchange as LAMMPS's CommBrick writes it: x, y, z in turn, two Irecv/Send/Wait swaps per dimension, faces of three sizes; an Allreduce every 10th step",
        full: Sizes {
            traced: &["96", "64", "48", "3800"],
            small: &["48", "32", "24", "1000"],
            different: &["120", "80", "60", "3800"],
        },
        quick: Sizes {
            traced: &["48", "32", "24", "400"],
            small: &["24", "16", "12", "200"],
            different: &["60", "40", "30", "400"],
        },
    },
    AppSpec {
        name: "bucket_sort",
        source_file: "bucket_sort.c",
        installed: None,
        summary: "integer bucket sort: Alltoall of the bucket counts, Alltoallv of the keys (sizes vary with the data), a counting sort, an Allreduce",
        full: Sizes {
            traced: &["500000", "1400"],
            small: &["100000", "250"],
            different: &["1000000", "1400"],
        },
        quick: Sizes {
            traced: &["100000", "200"],
            small: &["20000", "100"],
            different: &["200000", "200"],
        },
    },
    AppSpec {
        name: "multigrid",
        source_file: "multigrid.c",
        installed: None,
        summary: "3-D multigrid V-cycle: six-face Irecv/Isend/Waitall exchanges on every level (faces from 32 KiB to 32 B), an Allreduce on the coarsest level and one per cycle",
        full: Sizes {
            traced: &["64", "460"],
            small: &["32", "180"],
            different: &["64", "920"],
        },
        quick: Sizes {
            traced: &["32", "40"],
            small: &["16", "40"],
            different: &["32", "80"],
        },
    },
    AppSpec {
        name: "lammps-melt",
        source_file: "in.melt",
        installed: Some(Installed {
            program: "lmp",
            package: "lammps",
            mpi: Mpi::OpenMpi,
            input: Input::Args,
        }),
        summary: "LAMMPS (Debian's lmp), the Lennard-Jones melt: 3-D ghost exchanges, atom migration every 20 steps, thermo output every 50",
        full: Sizes {
            traced: melt!("20", "500"),
            small: melt!("8", "500"),
            different: melt!("25", "500"),
        },
        quick: Sizes {
            traced: melt!("8", "100"),
            small: melt!("5", "100"),
            different: melt!("10", "100"),
        },
    },
    AppSpec {
        name: "hpcc",
        source_file: "hpccinf.txt",
        installed: Some(Installed {
            program: "hpcc",
            package: "hpcc",
            mpi: Mpi::OpenMpi,
            input: Input::HpccInf,
        }),
        summary: "HPC Challenge (Debian's hpcc): HPL, PTRANS, RandomAccess, FFT, STREAM, latency and bandwidth rings; the argument is N",
        full: Sizes {
            traced: &["2500"],
            small: &["900"],
            different: &["3000"],
        },
        quick: Sizes {
            traced: &["500"],
            small: &["300"],
            different: &["700"],
        },
    },
];

/// The applications quick mode runs when `--apps` is not given.
pub const QUICK_APPS: &[&str] = &["stencil", "cg"];

impl AppSpec {
    /// Whether it runs with `mpi` (an installed program only with the MPI it was built
    /// against).
    pub fn runs_with(&self, mpi: Mpi) -> bool {
        self.installed.is_none_or(|i| i.mpi == mpi)
    }
}

/// The application called `name`.
pub fn find(name: &str) -> Option<&'static AppSpec> {
    APPS.iter().find(|a| a.name == name)
}
