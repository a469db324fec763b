//! The scenarios, as data: each is a named, documented configuration of one machine (MPI
//! library, placement of the ranks, network path, competing load, problem size) and gives
//! the launcher wrapper script the harness runs the application and the skeleton with.
//! `docs/validate.md` explains why each one is what it is.

/// An MPI implementation on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mpi {
    OpenMpi,
    Mpich,
}

impl Mpi {
    pub const ALL: [Mpi; 2] = [Mpi::OpenMpi, Mpi::Mpich];

    /// The name `perfskel record --mpi` and `perfskel run --mpi` take.
    pub fn name(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "openmpi",
            Mpi::Mpich => "mpich",
        }
    }

    /// The launcher; Debian installs both MPIs with suffixed names.
    pub fn mpirun(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "mpirun.openmpi",
            Mpi::Mpich => "mpirun.mpich",
        }
    }

    /// The C compiler wrapper.
    pub fn mpicc(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "mpicc.openmpi",
            Mpi::Mpich => "mpicc.mpich",
        }
    }
}

/// Which problem the application gets in a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The problem that was traced: the skeleton models it.
    Traced,
    /// Another problem size: the skeleton does not know (negative control).
    Different,
}

/// What the harness expects of the skeleton's prediction in a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expectation {
    /// The prediction should be accurate: the scenario counts in the summary.
    Accurate,
    /// The prediction must be off by at least [`NEGATIVE_CONTROL_MIN_ERROR_PCT`]:
    /// a harness whose skeleton "predicts" a problem it was never shown is broken.
    ErrorMustShow,
}

/// The error (absolute, percent) a negative control must reach to show.
pub const NEGATIVE_CONTROL_MIN_ERROR_PCT: f64 = 20.0;

/// One configuration the application and the skeleton run in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scenario {
    pub name: &'static str,
    /// One line for `--list` and the reports.
    pub summary: &'static str,
    pub mpi: Mpi,
    /// `taskset -c LIST` around the launcher: the launcher and every rank inherit the
    /// CPU mask.
    pub cpu_list: Option<&'static str>,
    /// Options given to the launcher before the harness's own (`-np`, the program).
    pub mpirun_options: &'static [&'static str],
    /// CPU-bound competing processes started before each run and killed after it.
    pub competing_jobs: u32,
    pub problem: Problem,
    pub expectation: Expectation,
    /// `Some(n)`: this scenario runs `n` ranks, more than the machine has cores, and the
    /// application is traced in it: the skeleton is its own, made from that trace (compute
    /// recorded as work, the time a rank waited for a core left out), and predicts the
    /// application in the same conditions. The relative methods and the baselines, defined
    /// against base at the plan's rank count, predict nothing here. `None`: the plan's
    /// rank count and base's skeleton.
    pub traced_ranks: Option<u32>,
}

/// The scenario everything else is compared with; the trace is taken in it.
pub const BASE: &str = "base";

/// Every scenario, base first. The machine has 2 cores and every run uses 2 ranks (see
/// `docs/validate.md` for why), so "more ranks per core" and "ranks pinned to one core"
/// both put the two ranks on core 0; they differ in how a waiting rank behaves (it
/// yields the core, or spins on it).
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: BASE,
        summary: "Open MPI, one rank per core and bound to it (its default at 2 ranks), shared-memory transport",
        mpi: Mpi::OpenMpi,
        cpu_list: None,
        mpirun_options: &["--map-by", "core", "--bind-to", "core"],
        competing_jobs: 0,
        problem: Problem::Traced,
        expectation: Expectation::Accurate,
        traced_ranks: None,
    },
    Scenario {
        name: "mpich",
        summary: "another MPI library: MPICH (Hydra), traced under Open MPI",
        mpi: Mpi::Mpich,
        cpu_list: None,
        mpirun_options: &[],
        competing_jobs: 0,
        problem: Problem::Traced,
        expectation: Expectation::Accurate,
        traced_ranks: None,
    },
    Scenario {
        name: "oversubscribed",
        summary: "both ranks on core 0 (taskset), unbound; waiting ranks yield the core",
        mpi: Mpi::OpenMpi,
        cpu_list: Some("0"),
        mpirun_options: &[
            "--oversubscribe",
            "--bind-to",
            "none",
            "--mca",
            "mpi_yield_when_idle",
            "1",
        ],
        competing_jobs: 0,
        problem: Problem::Traced,
        expectation: Expectation::Accurate,
        traced_ranks: None,
    },
    Scenario {
        name: "competing",
        summary: "base placement with one CPU-bound competing process running alongside",
        mpi: Mpi::OpenMpi,
        cpu_list: None,
        mpirun_options: &["--map-by", "core", "--bind-to", "core"],
        competing_jobs: 1,
        problem: Problem::Traced,
        expectation: Expectation::Accurate,
        traced_ranks: None,
    },
    Scenario {
        name: "pinned",
        summary: "both ranks bound to core 0 by Open MPI; waiting ranks spin (busy polling)",
        mpi: Mpi::OpenMpi,
        cpu_list: None,
        mpirun_options: &[
            "--oversubscribe",
            "--cpu-set",
            "0",
            "--bind-to",
            "core:overload-allowed",
            "--mca",
            "mpi_yield_when_idle",
            "0",
        ],
        competing_jobs: 0,
        problem: Problem::Traced,
        expectation: Expectation::Accurate,
        traced_ranks: None,
    },
    Scenario {
        name: "spread",
        summary: "ranks unbound: the OS spreads them over both cores and may migrate them",
        mpi: Mpi::OpenMpi,
        cpu_list: None,
        mpirun_options: &["--bind-to", "none"],
        competing_jobs: 0,
        problem: Problem::Traced,
        expectation: Expectation::Accurate,
        traced_ranks: None,
    },
    Scenario {
        name: "slow-net",
        summary: "a slower network: Open MPI's TCP transport over loopback instead of shared memory",
        mpi: Mpi::OpenMpi,
        cpu_list: None,
        mpirun_options: &[
            "--map-by",
            "core",
            "--bind-to",
            "core",
            "--mca",
            "pml",
            "ob1",
            "--mca",
            "btl",
            "tcp,self",
            "--mca",
            "btl_tcp_if_include",
            "lo",
        ],
        competing_jobs: 0,
        problem: Problem::Traced,
        expectation: Expectation::Accurate,
        traced_ranks: None,
    },
    Scenario {
        name: "negative-control",
        summary: "base configuration, but the application gets a different problem size and the skeleton does not",
        mpi: Mpi::OpenMpi,
        cpu_list: None,
        mpirun_options: &["--map-by", "core", "--bind-to", "core"],
        competing_jobs: 0,
        problem: Problem::Different,
        expectation: Expectation::ErrorMustShow,
        traced_ranks: None,
    },
    Scenario {
        name: "traced-oversubscribed",
        summary: "4 ranks on the 2 cores, traced there: the skeleton of that trace against the application, both oversubscribed (Open MPI yields when it sees more ranks than cores)",
        mpi: Mpi::OpenMpi,
        cpu_list: None,
        mpirun_options: &["--oversubscribe", "--bind-to", "none"],
        competing_jobs: 0,
        problem: Problem::Traced,
        expectation: Expectation::Accurate,
        traced_ranks: Some(4),
    },
];

/// The scenarios quick mode runs when `--scenarios` is not given.
pub const QUICK_SCENARIOS: &[&str] = &[BASE, "competing"];

/// The scenario called `name`.
pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

impl Scenario {
    /// The launcher wrapper: a POSIX shell script that runs the scenario's launcher with
    /// its options and then the arguments it was given (`-np 2 ./app args`). The
    /// application, the traced run and the skeleton (`perfskel run --mpirun`) all go
    /// through it, so they see exactly the same configuration.
    pub fn launcher_script(&self) -> String {
        let mut script = String::from("#!/bin/sh\n");
        script.push_str(&format!(
            "# perfskel validate, scenario `{}`: {}\n",
            self.name, self.summary
        ));
        if self.mpi == Mpi::OpenMpi {
            // Open MPI refuses to run as root without these; harmless otherwise.
            script.push_str("export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n");
        }
        script.push_str("exec ");
        if let Some(cpus) = self.cpu_list {
            script.push_str(&format!("taskset -c {cpus} "));
        }
        script.push_str(self.mpi.mpirun());
        for option in self.mpirun_options {
            script.push(' ');
            script.push_str(option);
        }
        script.push_str(" \"$@\"\n");
        script
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_base_comes_first() {
        assert_eq!(SCENARIOS[0].name, BASE);
        let mut names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SCENARIOS.len());
        for name in QUICK_SCENARIOS {
            assert!(find(name).is_some(), "{name}");
        }
    }

    #[test]
    fn mpich_runs_under_mpich_and_only_the_negative_control_changes_the_problem() {
        for s in SCENARIOS {
            assert_eq!(s.mpi == Mpi::Mpich, s.name == "mpich", "{}", s.name);
            assert_eq!(
                s.problem == Problem::Different,
                s.expectation == Expectation::ErrorMustShow,
                "{}",
                s.name
            );
        }
    }

    #[test]
    fn launcher_scripts_wrap_the_launcher() {
        let script = find("oversubscribed").map(Scenario::launcher_script);
        assert_eq!(
            script.as_deref(),
            Some(
                "#!/bin/sh\n\
                 # perfskel validate, scenario `oversubscribed`: both ranks on core 0 (taskset), unbound; waiting ranks yield the core\n\
                 export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n\
                 exec taskset -c 0 mpirun.openmpi --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \"$@\"\n"
            )
        );
        let mpich = find("mpich")
            .map(Scenario::launcher_script)
            .unwrap_or_default();
        assert!(mpich.ends_with("exec mpirun.mpich \"$@\"\n"), "{mpich}");
        assert!(!mpich.contains("OMPI_"));
    }
}
