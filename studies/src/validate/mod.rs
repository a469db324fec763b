//! The validation harness's pure parts: takes the names the user chose (applications,
//! scenarios, ratio, mode), gives a [`Plan`]; [`driver::drive`] runs a plan through any
//! [`driver::Runner`] (the CLI's runs real MPI programs) into observations;
//! [`evaluate::evaluate`] turns observations into errors of the skeleton's prediction and
//! of the two baselines of the seed ("average slowdown", "small problem size");
//! [`report`] and [`plot`] render tables, JSON, CSV and an SVG plot into strings.
//!
//! The method is the seed's validation of skeletons of the NAS benchmarks: trace an
//! application once in a base configuration, build its skeleton at ratio 1:K, then in
//! each new scenario run both and compare the application's measured time with the
//! skeleton's time × K.

pub mod apps;
pub mod driver;
pub mod evaluate;
pub mod plot;
pub mod report;
pub mod scenario;

use perfskel_compiler::back::Backend;

pub use apps::{AppSpec, Input, Installed, Sizes, APPS};
pub use scenario::{Expectation, Mpi, Problem, Scenario, BASE, SCENARIOS};

/// Every run uses this many ranks: the machine the harness was written for has 2 cores,
/// MPICH busy-polls and is far slower oversubscribed, and timings of oversubscribed base
/// runs are dominated by the scheduler (see `docs/validate.md`).
pub const N_RANKS: u32 = 2;

/// The default K of the target ratio 1:K, in full and in quick mode.
pub const DEFAULT_RATIO_FULL: u64 = 100;
pub const DEFAULT_RATIO_QUICK: u64 = 10;

/// Full validation, or the quick check that the harness runs end to end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Full,
    Quick,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::Quick => "quick",
        }
    }
}

/// What one validation run does.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub mode: Mode,
    pub apps: Vec<&'static AppSpec>,
    /// Base first, then the others in the order of [`SCENARIOS`].
    pub scenarios: Vec<&'static Scenario>,
    /// K of the ratio 1:K.
    pub ratio: u64,
    pub backends: Vec<Backend>,
    pub n_ranks: u32,
    /// Runs of each application per scenario; the median counts.
    pub app_repeats: u32,
    /// Runs of each skeleton per scenario (`perfskel run --repeat N`); `None` leaves the
    /// count to `run`, as a user who gives no flag gets it (3 to 10 runs, more while they
    /// spread): its answer, the median run, is the prediction.
    pub skeleton_repeats: Option<u32>,
    /// Traced runs of each application (`perfskel record --runs`): the median one is
    /// the trace, so the skeleton stands for a typical run.
    pub record_runs: u32,
}

/// What the user asked for; `None` means the mode's default.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub apps: Option<Vec<String>>,
    pub scenarios: Option<Vec<String>>,
    pub ratio: Option<u64>,
    pub backends: Option<Vec<Backend>>,
    pub repeats: Option<u32>,
}

impl Plan {
    /// The ranks the application and the skeleton run with in `scenario`.
    pub fn ranks_in(&self, scenario: &Scenario) -> u32 {
        scenario.traced_ranks.unwrap_or(self.n_ranks)
    }

    /// Checks the names and fills in the defaults of `mode`. The base scenario is always
    /// run (the trace and both baselines refer to it), even when not named.
    pub fn new(mode: Mode, request: &Request) -> Result<Plan, String> {
        let apps = match &request.apps {
            Some(names) => names
                .iter()
                .map(|n| {
                    apps::find(n)
                        .ok_or_else(|| unknown("application", n, APPS.iter().map(|a| a.name)))
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => match mode {
                Mode::Full => APPS.iter().collect(),
                Mode::Quick => apps::QUICK_APPS
                    .iter()
                    .filter_map(|n| apps::find(n))
                    .collect(),
            },
        };
        let chosen: Vec<&'static Scenario> = match &request.scenarios {
            Some(names) => names
                .iter()
                .map(|n| {
                    scenario::find(n)
                        .ok_or_else(|| unknown("scenario", n, SCENARIOS.iter().map(|s| s.name)))
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => match mode {
                Mode::Full => SCENARIOS.iter().collect(),
                Mode::Quick => scenario::QUICK_SCENARIOS
                    .iter()
                    .filter_map(|n| scenario::find(n))
                    .collect(),
            },
        };
        // Keep the documented order, base first, each scenario once.
        let scenarios: Vec<&'static Scenario> = SCENARIOS
            .iter()
            .filter(|s| s.name == BASE || chosen.iter().any(|c| c.name == s.name))
            .collect();
        let mut app_list: Vec<&'static AppSpec> = Vec::new();
        for app in apps {
            if !app_list.iter().any(|a| a.name == app.name) {
                app_list.push(app);
            }
        }
        if app_list.is_empty() {
            return Err("no application chosen".into());
        }
        let ratio = request.ratio.unwrap_or(match mode {
            Mode::Full => DEFAULT_RATIO_FULL,
            Mode::Quick => DEFAULT_RATIO_QUICK,
        });
        if ratio == 0 {
            return Err("the ratio 1:K needs K ≥ 1".into());
        }
        let mut backends = request.backends.clone().unwrap_or_else(|| vec![Backend::C]);
        backends.sort();
        backends.dedup();
        if backends.is_empty() {
            return Err("no back end chosen".into());
        }
        // Three runs of the application in full mode: a single run carries the machine's
        // noise into its row (rowcol's runs on this VM are bimodal, 9.4 or 14.5 s), and the
        // spread of three is the noise shown beside each error.
        let repeats = request
            .repeats
            .unwrap_or(match mode {
                Mode::Full => 3,
                Mode::Quick => 1,
            })
            .max(1);
        Ok(Plan {
            mode,
            apps: app_list,
            scenarios,
            ratio,
            backends,
            n_ranks: N_RANKS,
            app_repeats: repeats,
            // The prediction is what `perfskel run` answers with no flag (the default
            // path); the quick check runs each skeleton once.
            skeleton_repeats: match mode {
                Mode::Full => None,
                Mode::Quick => Some(1),
            },
            // The runs of the memory-bound applications vary by ±8 % on the idle machine,
            // and a skeleton stands for its traced run in every scenario.
            record_runs: match mode {
                Mode::Full => 3,
                Mode::Quick => 1,
            },
        })
    }

    /// The MPIs some chosen scenario uses, in a fixed order.
    pub fn mpis(&self) -> Vec<Mpi> {
        Mpi::ALL
            .into_iter()
            .filter(|m| self.scenarios.iter().any(|s| s.mpi == *m))
            .collect()
    }

    /// The argument sets of `app` in this plan's mode.
    pub fn sizes(&self, app: &AppSpec) -> Sizes {
        match self.mode {
            Mode::Full => app.full,
            Mode::Quick => app.quick,
        }
    }
}

fn unknown<'a>(what: &str, name: &str, known: impl Iterator<Item = &'a str>) -> String {
    let known: Vec<&str> = known.collect();
    let closest = known
        .iter()
        .map(|k| (strsim::levenshtein(name, k), *k))
        .min()
        .filter(|(d, _)| *d <= 3)
        .map(|(_, k)| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default();
    format!(
        "unknown {what} `{name}`{closest}; known: {}",
        known.join(", ")
    )
}

/// A stage of the pipeline, to say where something failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    Calibrate,
    Build,
    Record,
    Skeletonize,
    Compile,
    RunApp,
    RunSmall,
    RunSkeleton,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::Calibrate => "calibrate",
            Step::Build => "build",
            Step::Record => "record",
            Step::Skeletonize => "skeletonize",
            Step::Compile => "compile",
            Step::RunApp => "run-app",
            Step::RunSmall => "run-small",
            Step::RunSkeleton => "run-skeleton",
        }
    }
}

/// Why a runner's step did not give a result.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RunError {
    /// The per-run time limit was reached and the process group was killed.
    pub timed_out: bool,
    pub message: String,
}

impl RunError {
    pub fn failed(message: impl Into<String>) -> RunError {
        RunError {
            timed_out: false,
            message: message.into(),
        }
    }
}

/// A step that failed, with where.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Failure {
    /// `None` for the steps of the whole validation (calibrate).
    pub app: Option<String>,
    /// `None` for the steps before the scenarios (calibrate, build, record, skeletonize,
    /// compile).
    pub scenario: Option<String>,
    pub step: Step,
    /// The back end, for compile and skeleton runs.
    pub backend: Option<String>,
    #[serde(flatten)]
    pub error: RunError,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_per_mode() {
        let full = Plan::new(Mode::Full, &Request::default()).unwrap();
        assert_eq!(full.apps.len(), APPS.len());
        assert_eq!(full.scenarios.len(), SCENARIOS.len());
        assert_eq!(full.ratio, 100);
        assert_eq!(full.mpis(), vec![Mpi::OpenMpi, Mpi::Mpich]);
        assert_eq!(full.record_runs, 3);
        assert_eq!((full.app_repeats, full.skeleton_repeats), (3, None));
        let quick = Plan::new(Mode::Quick, &Request::default()).unwrap();
        let names: Vec<&str> = quick.scenarios.iter().map(|s| s.name).collect();
        assert_eq!(names, ["base", "competing"]);
        assert_eq!(quick.apps.len(), 2);
        assert_eq!(quick.ratio, 10);
        assert_eq!(quick.mpis(), vec![Mpi::OpenMpi]);
        assert_eq!(quick.record_runs, 1);
        assert_eq!((quick.app_repeats, quick.skeleton_repeats), (1, Some(1)));
        let five = Plan::new(
            Mode::Full,
            &Request {
                repeats: Some(5),
                ..Request::default()
            },
        )
        .unwrap();
        assert_eq!((five.app_repeats, five.skeleton_repeats), (5, None));
    }

    #[test]
    fn base_is_always_run_and_order_is_fixed() {
        let request = Request {
            scenarios: Some(vec!["slow-net".into(), "mpich".into(), "mpich".into()]),
            apps: Some(vec!["cg".into(), "stencil".into(), "cg".into()]),
            ..Request::default()
        };
        let plan = Plan::new(Mode::Full, &request).unwrap();
        let names: Vec<&str> = plan.scenarios.iter().map(|s| s.name).collect();
        assert_eq!(names, ["base", "mpich", "slow-net"]);
        let apps: Vec<&str> = plan.apps.iter().map(|a| a.name).collect();
        assert_eq!(apps, ["cg", "stencil"]);
    }

    #[test]
    fn unknown_names_are_errors_with_a_suggestion() {
        let request = Request {
            scenarios: Some(vec!["slownet".into()]),
            ..Request::default()
        };
        let err = Plan::new(Mode::Full, &request).unwrap_err();
        assert!(
            err.contains("unknown scenario `slownet` (did you mean `slow-net`?)"),
            "{err}"
        );
        let request = Request {
            apps: Some(vec!["lulesh".into()]),
            ..Request::default()
        };
        let err = Plan::new(Mode::Full, &request).unwrap_err();
        assert!(
            err.starts_with("unknown application `lulesh`; known: stencil"),
            "{err}"
        );
        let request = Request {
            ratio: Some(0),
            ..Request::default()
        };
        assert!(Plan::new(Mode::Quick, &request).is_err());
    }
}
