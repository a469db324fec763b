//! The orchestration: takes a [`Plan`] and a [`Runner`] that knows how to build, trace,
//! skeletonize, compile and run, gives [`Observations`] (timings and failures). The
//! order of the steps and what happens after a failure live here, so they are tested
//! with a fake runner; the CLI's runner does the real work with subprocesses.

use std::collections::BTreeSet;

use super::evaluate::median;
use super::{AppSpec, Failure, Mpi, Plan, Problem, RunError, Scenario, Step, BASE};
use perfskel_compiler::back::{Backend, RunResult};

/// What the harness needs done. Each method is one step; an error stops what depends
/// on it, never the whole validation.
pub trait Runner {
    /// Measures the latency/bandwidth model in the base scenario (`perfskel calibrate`),
    /// for `compile` to scale with; without it `compile` uses its defaults.
    fn calibrate(&mut self, base: &Scenario) -> Result<(), RunError>;
    /// Builds `app` with `mpi`'s compiler wrapper.
    fn build(&mut self, app: &AppSpec, mpi: Mpi) -> Result<(), RunError>;
    /// Traces `app` with `args` in `traced_in` (base, or a scenario with its own trace:
    /// [`Scenario::traced_ranks`]) with `perfskel record`, keeping the median of `runs`
    /// runs; gives each traced run's application time in seconds (empty where the
    /// trace does not say).
    fn record(
        &mut self,
        app: &AppSpec,
        args: &[&str],
        traced_in: &Scenario,
        runs: u32,
    ) -> Result<Vec<f64>, RunError>;
    /// Turns the trace taken in `traced_in` into a skeleton (`perfskel skeletonize`).
    fn skeletonize(&mut self, app: &AppSpec, traced_in: &Scenario) -> Result<(), RunError>;
    /// Generates the program of the skeleton traced in `traced_in` at 1:`ratio` for
    /// `backend`, to be built with `mpi` (`perfskel compile`).
    fn compile(
        &mut self,
        app: &AppSpec,
        traced_in: &Scenario,
        backend: Backend,
        mpi: Mpi,
        ratio: u64,
    ) -> Result<(), RunError>;
    /// Runs the (untraced) application in `scenario`; gives its time in seconds between
    /// `MPI_Init` and `MPI_Finalize`.
    fn run_app(
        &mut self,
        app: &AppSpec,
        args: &[&str],
        scenario: &Scenario,
    ) -> Result<f64, RunError>;
    /// Builds if needed and runs the skeleton in `scenario` (`perfskel run`, with
    /// `--repeat N` when `repeat` is given, else as many runs as `run` decides): base's,
    /// or the scenario's own when it has [`Scenario::traced_ranks`]; gives each run's
    /// result line and `run`'s answer, the median run's.
    fn run_skeleton(
        &mut self,
        app: &AppSpec,
        backend: Backend,
        scenario: &Scenario,
        repeat: Option<u32>,
    ) -> Result<SkeletonRuns, RunError>;
    /// Told before each step, for a progress display.
    fn progress(&mut self, _message: &str) {}
}

/// Timings of one application in one scenario; `None` where the run failed.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub app: &'static str,
    pub scenario: &'static str,
    /// Each run of the application (its problem in this scenario), seconds.
    pub app_runs: Vec<f64>,
    /// Each run of the application at the small problem size.
    pub small_runs: Vec<f64>,
    /// Where the skeleton of this cell was traced here (base, or a scenario traced at its
    /// own rank count): each traced run of the application (`record --runs`), seconds;
    /// the trace is the median one. Runs of the same application in the same
    /// conditions, with the tracer: the machine's noise shows in them too.
    pub traced_runs: Vec<f64>,
    pub skeletons: Vec<SkeletonObservation>,
}

/// What one `perfskel run` of a skeleton printed.
#[derive(Clone, Debug, PartialEq)]
pub struct SkeletonRuns {
    /// Each run's result line, in order.
    pub runs: Vec<RunResult>,
    /// `run`'s answer: the median run's line, which it prints last.
    pub answer: RunResult,
    /// What `run` warned of (its `perfskel run: warning:` lines, without that prefix):
    /// a run too short to time, other work on the machine, runs that spread.
    pub warnings: Vec<String>,
}

impl SkeletonRuns {
    /// Reads `perfskel run`'s output: one result line per run, then (after more than one
    /// run) the median run's line again.
    pub fn find_in(output: &str) -> Option<SkeletonRuns> {
        let mut lines: Vec<RunResult> = output.lines().filter_map(RunResult::parse).collect();
        let answer = lines.last()?.clone();
        if lines.len() > 1 {
            lines.pop();
        }
        Some(SkeletonRuns {
            runs: lines,
            answer,
            warnings: Vec::new(),
        })
    }

    /// With the warnings `run` wrote to its standard error.
    pub fn with_warnings_of(mut self, stderr: &str) -> SkeletonRuns {
        self.warnings = stderr
            .lines()
            .filter_map(|l| l.strip_prefix(RUN_WARNING))
            .map(|w| w.trim().to_string())
            .collect();
        self
    }
}

/// How `perfskel run` starts each warning on its standard error.
pub const RUN_WARNING: &str = "perfskel run: warning:";

/// The runs of one back end's skeleton.
#[derive(Clone, Debug, PartialEq)]
pub struct SkeletonObservation {
    pub backend: Backend,
    /// `skeleton_s` of each run.
    pub skeleton_runs: Vec<f64>,
    /// The skeleton time `perfskel run` answered (its median run): the prediction is
    /// this × the ratio reached, what a user running the skeleton gets.
    pub skeleton_s: Option<f64>,
    /// `app_time_s` of the skeleton: the traced application's time.
    pub app_time_s: Option<f64>,
    /// The ratio the scaled skeleton reaches, which its time is multiplied by where it
    /// ran no measuring pass.
    pub reached: Option<f64>,
    /// `run`'s prediction (its median run's `predicted_s`): the time × the ratio
    /// reached, or, where the measuring pass timed communication that loops cut less
    /// than K, that part by its own ratios and the rest by the rest ratio.
    pub predicted_s: Option<f64>,
    /// What `run` warned of (see [`SkeletonRuns::warnings`]).
    pub warnings: Vec<String>,
}

impl SkeletonObservation {
    /// The skeleton's time: `run`'s answer, or the median of the runs.
    pub fn answer(&self) -> Option<f64> {
        self.skeleton_s.or_else(|| median(&self.skeleton_runs))
    }
}

impl Observation {
    pub fn app_s(&self) -> Option<f64> {
        median(&self.app_runs)
    }

    pub fn small_s(&self) -> Option<f64> {
        median(&self.small_runs)
    }
}

/// Everything a validation run observed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observations {
    /// One per application and scenario of the plan, in plan order.
    pub cells: Vec<Observation>,
    pub failures: Vec<Failure>,
}

/// Runs the plan: per application, build it with every MPI the scenarios need, trace
/// it in base, skeletonize, compile for every back end and MPI; then per scenario run
/// the application (traced problem, or the different one for the negative control),
/// the small problem and the skeletons.
pub fn drive(plan: &Plan, runner: &mut impl Runner) -> Observations {
    let mut observations = Observations::default();
    let base = plan
        .scenarios
        .iter()
        .copied()
        .find(|s| s.name == BASE)
        .or_else(|| super::scenario::find(BASE));
    if let Some(base) = base {
        runner.progress("calibrate the latency/bandwidth model in base");
        if let Err(error) = runner.calibrate(base) {
            observations.failures.push(Failure {
                app: None,
                scenario: Some(base.name.to_string()),
                step: Step::Calibrate,
                backend: None,
                error,
            });
        }
    }
    for app in &plan.apps {
        let sizes = plan.sizes(app);
        let fail = |step: Step, scenario: Option<&str>, backend: Option<Backend>, error| Failure {
            app: Some(app.name.to_string()),
            scenario: scenario.map(str::to_string),
            step,
            backend: backend.map(|b| b.name().to_string()),
            error,
        };
        let mut built = BTreeSet::new();
        // An installed program runs only with the MPI it was built against: scenarios of
        // another MPI leave its cells empty.
        let mpis: Vec<Mpi> = plan
            .mpis()
            .into_iter()
            .filter(|m| app.runs_with(*m))
            .collect();
        for &mpi in &mpis {
            runner.progress(&format!("{}: build with {}", app.name, mpi.mpicc()));
            match runner.build(app, mpi) {
                Ok(()) => {
                    built.insert(mpi);
                }
                Err(e) => observations.failures.push(fail(Step::Build, None, None, e)),
            }
        }
        let mut compiled = BTreeSet::new();
        let mut base_traced = Vec::new();
        if let (Some(base), true) = (base, built.contains(&Mpi::OpenMpi)) {
            (compiled, base_traced) = prepare(
                runner,
                plan,
                app,
                sizes.traced,
                base,
                &mpis,
                &mut observations.failures,
            );
        }
        for scenario in &plan.scenarios {
            let mut cell = Observation {
                app: app.name,
                scenario: scenario.name,
                app_runs: Vec::new(),
                small_runs: Vec::new(),
                traced_runs: if scenario.name == BASE {
                    base_traced.clone()
                } else {
                    Vec::new()
                },
                skeletons: Vec::new(),
            };
            if built.contains(&scenario.mpi) {
                let args = match scenario.problem {
                    Problem::Traced => sizes.traced,
                    Problem::Different => sizes.different,
                };
                // A scenario traced at its own rank count has its own skeleton, and no
                // small-problem baseline (base runs another rank count).
                let own = scenario.traced_ranks.is_some();
                let compiled = if own {
                    let (compiled, traced_runs) = prepare(
                        runner,
                        plan,
                        app,
                        sizes.traced,
                        scenario,
                        &[scenario.mpi],
                        &mut observations.failures,
                    );
                    cell.traced_runs = traced_runs;
                    compiled
                } else {
                    compiled.clone()
                };
                let what = format!("{} in {}", app.name, scenario.name);
                let small: &[&str] = if own { &[] } else { sizes.small };
                for (step, args, runs) in [
                    (Step::RunApp, args, &mut cell.app_runs),
                    (Step::RunSmall, small, &mut cell.small_runs),
                ] {
                    if args.is_empty() {
                        continue;
                    }
                    for _ in 0..plan.app_repeats {
                        runner.progress(&format!("{what}: {}", step.name()));
                        match runner.run_app(app, args, scenario) {
                            Ok(seconds) => runs.push(seconds),
                            Err(e) => {
                                observations.failures.push(fail(
                                    step,
                                    Some(scenario.name),
                                    None,
                                    e,
                                ));
                                break;
                            }
                        }
                    }
                }
                for &backend in &plan.backends {
                    if !compiled.contains(&(backend, scenario.mpi)) {
                        continue;
                    }
                    let mut skeleton = SkeletonObservation {
                        backend,
                        skeleton_runs: Vec::new(),
                        skeleton_s: None,
                        app_time_s: None,
                        reached: None,
                        predicted_s: None,
                        warnings: Vec::new(),
                    };
                    runner.progress(&format!("{what}: {backend} skeleton"));
                    let result = runner
                        .run_skeleton(app, backend, scenario, plan.skeleton_repeats)
                        .and_then(|r| {
                            for line in r.runs.iter().chain([&r.answer]) {
                                consistent(line, plan, scenario)?;
                            }
                            Ok(r)
                        });
                    match result {
                        Ok(r) => {
                            skeleton.skeleton_runs =
                                r.runs.iter().map(|line| line.skeleton_s).collect();
                            skeleton.skeleton_s = Some(r.answer.skeleton_s);
                            skeleton.app_time_s = Some(r.answer.app_time_s);
                            skeleton.reached = Some(r.answer.reached);
                            skeleton.predicted_s = Some(r.answer.predicted_s);
                            skeleton.warnings = r.warnings;
                        }
                        Err(e) => {
                            observations.failures.push(fail(
                                Step::RunSkeleton,
                                Some(scenario.name),
                                Some(backend),
                                e,
                            ));
                        }
                    }
                    cell.skeletons.push(skeleton);
                }
            }
            observations.cells.push(cell);
        }
    }
    observations
}

/// Traces `app` in `traced_in`, skeletonizes the trace and compiles it for every back end
/// and each of `mpis`; gives what compiled, the failures into `failures`.
fn prepare(
    runner: &mut impl Runner,
    plan: &Plan,
    app: &AppSpec,
    args: &[&str],
    traced_in: &Scenario,
    mpis: &[Mpi],
    failures: &mut Vec<Failure>,
) -> (BTreeSet<(Backend, Mpi)>, Vec<f64>) {
    let own = (traced_in.name != BASE).then(|| traced_in.name.to_string());
    let fail = |step: Step, backend: Option<Backend>, error| Failure {
        app: Some(app.name.to_string()),
        scenario: own.clone(),
        step,
        backend: backend.map(|b| b.name().to_string()),
        error,
    };
    let mut compiled = BTreeSet::new();
    let mut traced_runs = Vec::new();
    runner.progress(&format!("{}: record in {}", app.name, traced_in.name));
    let skeleton = runner
        .record(app, args, traced_in, plan.record_runs)
        .map_err(|e| fail(Step::Record, None, e))
        .and_then(|runs| {
            traced_runs = runs;
            runner.progress(&format!("{}: skeletonize", app.name));
            runner
                .skeletonize(app, traced_in)
                .map_err(|e| fail(Step::Skeletonize, None, e))
        });
    if let Err(failure) = skeleton {
        failures.push(failure);
        return (compiled, traced_runs);
    }
    for &backend in &plan.backends {
        for &mpi in mpis {
            runner.progress(&format!(
                "{}: compile 1:{} for {backend} under {}",
                app.name,
                plan.ratio,
                mpi.name()
            ));
            match runner.compile(app, traced_in, backend, mpi, plan.ratio) {
                Ok(()) => {
                    compiled.insert((backend, mpi));
                }
                Err(e) => failures.push(fail(Step::Compile, Some(backend), e)),
            }
        }
    }
    (compiled, traced_runs)
}

/// A result line must be for the ratio and rank count the harness asked for.
fn consistent(result: &RunResult, plan: &Plan, scenario: &Scenario) -> Result<(), RunError> {
    let ranks = plan.ranks_in(scenario);
    if result.ratio != plan.ratio || result.ranks != u64::from(ranks) {
        return Err(RunError::failed(format!(
            "the skeleton reported ratio 1:{} at {} ranks, the harness asked for 1:{} at {ranks}",
            result.ratio, result.ranks, plan.ratio
        )));
    }
    if !(result.skeleton_s.is_finite() && result.skeleton_s >= 0.0) {
        return Err(RunError::failed(format!(
            "the skeleton reported a time of {} s",
            result.skeleton_s
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{Mode, Request};
    use super::*;

    /// A runner that answers from a table of times and fails where told; it records
    /// the calls so the order of the steps is tested too.
    #[derive(Default)]
    struct Fake {
        calls: Vec<String>,
        fail_skeletonize: Option<&'static str>,
        time_out_scenario: Option<&'static str>,
        /// Times the skeleton reports, in order (then 0.1 × the scenario's slowdown).
        skeleton_times: std::collections::VecDeque<f64>,
    }

    fn slowdown(scenario: &Scenario) -> f64 {
        match scenario.name {
            "competing" => 1.5,
            "slow-net" => 1.2,
            _ => 1.0,
        }
    }

    impl Runner for Fake {
        fn calibrate(&mut self, base: &Scenario) -> Result<(), RunError> {
            self.calls.push(format!("calibrate {}", base.name));
            Ok(())
        }
        fn build(&mut self, app: &AppSpec, mpi: Mpi) -> Result<(), RunError> {
            self.calls
                .push(format!("build {} {}", app.name, mpi.name()));
            Ok(())
        }
        fn record(
            &mut self,
            app: &AppSpec,
            args: &[&str],
            traced_in: &Scenario,
            runs: u32,
        ) -> Result<Vec<f64>, RunError> {
            self.calls.push(format!(
                "record {} {} {} runs {runs}",
                app.name,
                args.join(" "),
                traced_in.name
            ));
            Ok(Vec::new())
        }
        fn skeletonize(&mut self, app: &AppSpec, traced_in: &Scenario) -> Result<(), RunError> {
            if traced_in.name == BASE {
                self.calls.push(format!("skeletonize {}", app.name));
            } else {
                self.calls
                    .push(format!("skeletonize {} {}", app.name, traced_in.name));
            }
            if self.fail_skeletonize == Some(app.name) {
                return Err(RunError::failed("no loops found"));
            }
            Ok(())
        }
        fn compile(
            &mut self,
            app: &AppSpec,
            traced_in: &Scenario,
            backend: Backend,
            mpi: Mpi,
            ratio: u64,
        ) -> Result<(), RunError> {
            let from = if traced_in.name == BASE {
                String::new()
            } else {
                format!(" from {}", traced_in.name)
            };
            self.calls.push(format!(
                "compile {} {backend} {} 1:{ratio}{from}",
                app.name,
                mpi.name()
            ));
            Ok(())
        }
        fn run_app(
            &mut self,
            app: &AppSpec,
            args: &[&str],
            scenario: &Scenario,
        ) -> Result<f64, RunError> {
            self.calls.push(format!(
                "app {} {} {}",
                app.name,
                args.join(" "),
                scenario.name
            ));
            if self.time_out_scenario == Some(scenario.name) {
                return Err(RunError {
                    timed_out: true,
                    message: "killed after 60 s".into(),
                });
            }
            let size: f64 = args.iter().filter_map(|a| a.parse::<f64>().ok()).product();
            Ok(size * 1e-6 * slowdown(scenario))
        }
        fn run_skeleton(
            &mut self,
            app: &AppSpec,
            backend: Backend,
            scenario: &Scenario,
            repeat: Option<u32>,
        ) -> Result<SkeletonRuns, RunError> {
            self.calls
                .push(format!("skeleton {} {backend} {}", app.name, scenario.name));
            // `run` without `--repeat` runs at least three times.
            let runs: Vec<RunResult> = (0..repeat.unwrap_or(3))
                .map(|_| {
                    let skeleton_s = self
                        .skeleton_times
                        .pop_front()
                        .unwrap_or(0.1 * slowdown(scenario));
                    RunResult {
                        skeleton: app.name.into(),
                        backend: backend.name().into(),
                        ranks: scenario.traced_ranks.unwrap_or(2).into(),
                        ratio: 10,
                        skeleton_s,
                        predicted_s: 10.0 * skeleton_s,
                        app_time_s: 1.0,
                        warmup_s: 0.0,
                        reached: 10.0,
                        own_s: 0.0,
                        own_app_s: 0.0,
                        rest: 10.0,
                        fill_s: 0.0,
                        simulation_s: None,
                    }
                })
                .collect();
            let mut sorted = runs.clone();
            sorted.sort_by(|a, b| a.skeleton_s.total_cmp(&b.skeleton_s));
            let answer = sorted[(sorted.len() - 1) / 2].clone();
            Ok(SkeletonRuns {
                runs,
                answer,
                warnings: Vec::new(),
            })
        }
    }

    fn quick_plan(apps: &[&str], scenarios: &[&str]) -> Plan {
        let request = Request {
            apps: Some(apps.iter().map(|s| s.to_string()).collect()),
            scenarios: Some(scenarios.iter().map(|s| s.to_string()).collect()),
            ..Request::default()
        };
        Plan::new(Mode::Quick, &request).unwrap()
    }

    #[test]
    fn steps_run_in_order() {
        let plan = quick_plan(&["cg"], &["mpich", "negative-control"]);
        let mut fake = Fake::default();
        let obs = drive(&plan, &mut fake);
        assert_eq!(
            fake.calls,
            [
                "calibrate base",
                "build cg openmpi",
                "build cg mpich",
                "record cg 50000 400 base runs 1",
                "skeletonize cg",
                "compile cg c openmpi 1:10",
                "compile cg c mpich 1:10",
                "app cg 50000 400 base",
                "app cg 10000 100 base",
                "skeleton cg c base",
                "app cg 50000 400 mpich",
                "app cg 10000 100 mpich",
                "skeleton cg c mpich",
                "app cg 100000 400 negative-control",
                "app cg 10000 100 negative-control",
                "skeleton cg c negative-control",
            ]
        );
        assert!(obs.failures.is_empty());
        assert_eq!(obs.cells.len(), 3);
        assert_eq!(obs.cells[2].app_runs, [40.0]);
        assert_eq!(obs.cells[0].skeletons[0].skeleton_runs, [0.1]);
    }

    #[test]
    fn a_scenario_traced_at_its_own_rank_count_gets_its_own_skeleton() {
        let plan = quick_plan(&["cg"], &["traced-oversubscribed"]);
        let mut fake = Fake::default();
        let obs = drive(&plan, &mut fake);
        assert_eq!(
            fake.calls,
            [
                "calibrate base",
                "build cg openmpi",
                "record cg 50000 400 base runs 1",
                "skeletonize cg",
                "compile cg c openmpi 1:10",
                "app cg 50000 400 base",
                "app cg 10000 100 base",
                "skeleton cg c base",
                "record cg 50000 400 traced-oversubscribed runs 1",
                "skeletonize cg traced-oversubscribed",
                "compile cg c openmpi 1:10 from traced-oversubscribed",
                "app cg 50000 400 traced-oversubscribed",
                "skeleton cg c traced-oversubscribed",
            ]
        );
        assert!(obs.failures.is_empty(), "{:?}", obs.failures);
        assert!(obs.cells[1].small_runs.is_empty());
        assert_eq!(obs.cells[1].skeletons[0].skeleton_runs, [0.1]);
    }

    #[test]
    fn an_installed_program_runs_only_with_the_mpi_it_was_built_against() {
        let plan = quick_plan(&["hpcc"], &["mpich"]);
        let mut fake = Fake::default();
        let obs = drive(&plan, &mut fake);
        assert_eq!(
            fake.calls,
            [
                "calibrate base",
                "build hpcc openmpi",
                "record hpcc 500 base runs 1",
                "skeletonize hpcc",
                "compile hpcc c openmpi 1:10",
                "app hpcc 500 base",
                "app hpcc 300 base",
                "skeleton hpcc c base",
            ]
        );
        assert!(obs.failures.is_empty(), "{:?}", obs.failures);
        let mpich = obs.cells.iter().find(|c| c.scenario == "mpich").unwrap();
        assert!(mpich.app_runs.is_empty() && mpich.skeletons.is_empty());
    }

    #[test]
    fn the_prediction_is_what_run_answers_with_every_run_kept() {
        let mut plan = quick_plan(&["master_worker"], &["competing"]);
        plan.skeleton_repeats = None;
        // Base: three close runs. Competing: bimodal; `run`'s answer is its median run.
        let base = [0.045, 0.046, 0.045];
        let competing = [0.045, 0.093, 0.092];
        let mut fake = Fake {
            skeleton_times: base.iter().chain(&competing).copied().collect(),
            ..Fake::default()
        };
        let obs = drive(&plan, &mut fake);
        assert_eq!(obs.cells[0].skeletons[0].skeleton_runs, base);
        assert_eq!(obs.cells[0].skeletons[0].skeleton_s, Some(0.045));
        assert_eq!(obs.cells[1].skeletons[0].skeleton_runs, competing);
        assert_eq!(obs.cells[1].skeletons[0].skeleton_s, Some(0.092));
        assert!(fake.skeleton_times.is_empty());
    }

    #[test]
    fn runs_output_is_read_as_each_run_then_the_answer() {
        let line = |s: f64| {
            format!("perfskel-result skeleton=cg backend=c ranks=2 ratio=100 skeleton_s={s} predicted_s={} app_time_s=5 warmup_s=0.01 reached=100", s * 100.0)
        };
        let one = format!("{}\nskeleton `cg` on 2 ranks: ...\n", line(0.05));
        let r = SkeletonRuns::find_in(&one).unwrap();
        assert_eq!((r.runs.len(), r.answer.skeleton_s), (1, 0.05));
        let three = [line(0.05), line(0.07), line(0.06), line(0.06)].join("\n");
        let r = SkeletonRuns::find_in(&three).unwrap();
        let times: Vec<f64> = r.runs.iter().map(|l| l.skeleton_s).collect();
        assert_eq!((times, r.answer.skeleton_s), (vec![0.05, 0.07, 0.06], 0.06));
        assert_eq!(SkeletonRuns::find_in("no result\n"), None);
        // `run`'s warnings come from its standard error, without the prefix.
        let stderr = "make: nothing to do\nperfskel run: warning: the skeleton ran 48.0 ms, too short to time reliably\nperfskel run: warning: other work used 1.0 of this machine's 2 cores\n";
        let warned = r.with_warnings_of(stderr);
        assert_eq!(
            warned.warnings,
            vec![
                "the skeleton ran 48.0 ms, too short to time reliably".to_string(),
                "other work used 1.0 of this machine's 2 cores".to_string()
            ]
        );
    }

    #[test]
    fn a_failed_skeleton_still_measures_the_app_for_the_baselines() {
        let plan = quick_plan(&["cg", "stencil"], &["competing"]);
        let mut fake = Fake {
            fail_skeletonize: Some("stencil"),
            ..Fake::default()
        };
        let obs = drive(&plan, &mut fake);
        assert_eq!(obs.failures.len(), 1);
        assert_eq!(obs.failures[0].step, Step::Skeletonize);
        assert_eq!(obs.failures[0].app.as_deref(), Some("stencil"));
        let stencil: Vec<&Observation> = obs.cells.iter().filter(|c| c.app == "stencil").collect();
        assert_eq!(stencil.len(), 2);
        assert!(stencil
            .iter()
            .all(|c| c.skeletons.is_empty() && c.app_s().is_some()));
        assert!(!fake.calls.iter().any(|c| c.starts_with("compile stencil")));
    }

    #[test]
    fn a_timeout_is_recorded_and_the_next_scenario_runs() {
        let plan = quick_plan(&["cg"], &["competing", "slow-net"]);
        let mut fake = Fake {
            time_out_scenario: Some("competing"),
            ..Fake::default()
        };
        let obs = drive(&plan, &mut fake);
        let steps: Vec<(Step, Option<&str>, bool)> = obs
            .failures
            .iter()
            .map(|f| (f.step, f.scenario.as_deref(), f.error.timed_out))
            .collect();
        assert_eq!(
            steps,
            [
                (Step::RunApp, Some("competing"), true),
                (Step::RunSmall, Some("competing"), true)
            ]
        );
        let slow = obs.cells.iter().find(|c| c.scenario == "slow-net").unwrap();
        assert!((slow.app_s().unwrap() - 20.0 * 1.2).abs() < 1e-9);
    }

    #[test]
    fn a_result_for_another_ratio_is_rejected() {
        let mut plan = quick_plan(&["cg"], &["base"]);
        plan.ratio = 100;
        let obs = drive(&plan, &mut Fake::default());
        assert_eq!(obs.failures.len(), 1);
        assert_eq!(obs.failures[0].step, Step::RunSkeleton);
        assert!(obs.failures[0].error.message.contains("ratio 1:10"));
    }
}
