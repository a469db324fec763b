#!/usr/bin/env python3
"""The real-application set of scripts/real-apps.sh (standard library only).

For each application and rank count: records a trace with `perfskel record` under Open
MPI (`mpirun --oversubscribe`), skeletonizes it (`--format json`, wall time measured),
checks the skeleton with `perfskel check`, and prints one Markdown table per application
(a row per rank count). A second table compares the 1:1 skeleton's time (`compile
--ratio 1:1`, then `run`) with the application's own time at 2 ranks (4 for applications
that need at least 4), where the application's time is that of an untraced run, measured
between MPI_Init and MPI_Finalize by a preloaded timing shim (runtime/c/app_time.c); the traced
time of the manifest (the skeleton's `app_time`) is shown beside it.

Everything goes into the work directory (--out): per case a directory with the trace,
the skeleton, the summary JSON, the logs; and the tables as real-apps.md, real-apps.json
and real-apps.csv. The work directory is marked with a `.perfskel-real-apps` file; the
script refuses a non-empty directory without it and only ever replaces case directories
it made itself.

Problem sizes: the example applications are weak-scaled (a fixed size per rank), so
16 ranks do 8 times the work of 2 on the same cores; sizes are chosen so that a 16-rank
run takes tens of seconds on 2 cores.
"""

import argparse
import csv
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# The application timer perfskel validate links in too.
APP_TIME = ROOT / "runtime" / "c" / "app_time.c"
MARKER = ".perfskel-real-apps"
LAMMPS_EXAMPLES = Path("/usr/share/doc/lammps-examples/examples")


def run_step(cmd, cwd, log_path, env, timeout):
    """Runs `cmd` in its own process group within `timeout` seconds, its standard error
    into `log_path`; gives (exit status or None on time-out, wall seconds, stdout)."""
    start = time.monotonic()
    with open(log_path, "w") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=err, text=True, start_new_session=True)
        try:
            stdout, _ = proc.communicate(timeout=timeout)
            status = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, _ = proc.communicate()
            status = None
    return status, time.monotonic() - start, stdout


class App:
    """One application: how to run it, at which sizes, and its smallest rank count for
    the comparison table."""

    def __init__(self, name, kind, full, quick, compare_ranks=2, about="", long=None):
        self.name = name
        # "lammps", "hpcc", "example" (examples/apps) or "pattern" (tests/apps: our own
        # programs with a real code's pattern, built with mpicc)
        self.kind = kind
        self.full = full
        self.quick = quick
        # `--long`: the same per-iteration problem for about 5 s at 2 ranks, so that a
        # 1:100 skeleton runs about 50 ms (None: `full` already runs that long).
        self.long = long
        self.compare_ranks = compare_ranks
        self.about = about


APPS = [
    App(
        "lammps-melt",
        "lammps",
        full={"input": "in.melt", "vars": {"cells": "20", "steps": "500"}},
        quick={"input": "in.melt", "vars": {"cells": "8", "steps": "100"}},
        about="LAMMPS LJ melt (scripts/real-apps/in.melt): 3-D halo exchange, "
        "migration at fixed re-neighbour steps",
    ),
    App(
        "lammps-peptide",
        "lammps",
        full={"input": "in.peptide", "vars": {"steps": "100"}},
        quick={"input": "in.peptide", "vars": {"steps": "20"}},
        about="LAMMPS peptide (scripts/real-apps/in.peptide): PPPM with 3-D FFTs, "
        "SHAKE, bonds; data-dependent re-neighbouring",
        long={"input": "in.peptide", "vars": {"steps": "800"}},
    ),
    App(
        "hpcc",
        "hpcc",
        full={"n": "1000"},
        quick={"n": "500"},
        about="HPC Challenge (scripts/real-apps/hpccinf.txt): HPL, PTRANS, "
        "RandomAccess, FFT, STREAM, latency/bandwidth rings",
        long={"n": "2500"},
    ),
    App(
        "stencil",
        "example",
        full={"args": ["700", "800"]},
        quick={"args": ["256", "400"]},
        about="examples/apps/stencil.c: 2-D halo exchange (Sendrecv), Allreduce",
        long={"args": ["700", "6400"]},
    ),
    App(
        "cg",
        "example",
        full={"args": ["250000", "800"]},
        quick={"args": ["50000", "400"]},
        about="examples/apps/cg.c: 1-D Irecv/Isend halo, two Allreduce",
        long={"args": ["250000", "6400"]},
    ),
    App(
        "rowcol",
        "example",
        full={"args": ["100000", "600"]},
        quick={"args": ["50000", "100"]},
        compare_ranks=4,
        about="examples/apps/rowcol.c: row/column communicators (Comm_split), "
        "Allreduce and Bcast",
        long={"args": ["100000", "6000"]},
    ),
    App(
        "transpose",
        "example",
        full={"args": ["128", "400"]},
        quick={"args": ["64", "200"]},
        about="examples/apps/transpose.c: Alltoall of B x B blocks",
        long={"args": ["128", "25600"]},
    ),
    App(
        "sparse_scatter",
        "pattern",
        full={"args": ["50000", "300"]},
        quick={"args": ["20000", "40"]},
        about="tests/apps/sparse_scatter.c: irregular ghost scatter (partners differ by "
        "rank) on a duplicate of the world, a ring halo",
        long={"args": ["50000", "6000"]},
    ),
    App(
        "grid_doubling",
        "pattern",
        full={"args": ["50000", "300"]},
        quick={"args": ["4000", "30"]},
        about="tests/apps/grid_doubling.c: a CG solver's communication on a 2-D grid "
        "(recursive doubling in rows, transpose partner); 2^k ranks",
        long={"args": ["50000", "4000"]},
    ),
    App(
        "bucket_sort",
        "pattern",
        full={"args": ["4000000", "20"]},
        quick={"args": ["200000", "4"]},
        about="tests/apps/bucket_sort.c: an integer bucket sort (Alltoall of counts, "
        "Alltoallv of keys whose sizes vary with the data, Allreduce)",
        long={"args": ["4000000", "160"]},
    ),
    App(
        "multigrid",
        "pattern",
        full={"args": ["64", "20"]},
        quick={"args": ["16", "4"]},
        about="tests/apps/multigrid.c: a 3-D multigrid V-cycle (six-face Irecv/Isend/"
        "Waitall exchanges on every level, faces from 32 KiB to 32 B, Allreduce)",
        long={"args": ["64", "460"]},
    ),
    App(
        "halo_dims",
        "pattern",
        full={"args": ["48", "32", "24", "400"]},
        quick={"args": ["24", "16", "12", "20"]},
        about="tests/apps/halo_dims.c: a 3-D ghost exchange along x, y, z in turn, two "
        "swaps per dimension, faces of three sizes (LAMMPS's CommBrick)",
        long={"args": ["48", "32", "24", "20000"]},
    ),
]


def main():
    parser = argparse.ArgumentParser(
        prog="scripts/real-apps.sh",
        description="Records, skeletonizes and checks real MPI applications "
        "(LAMMPS, HPCC, the example apps) at several rank counts and prints "
        "Markdown tables; then compares 1:1 skeletons with the applications' times.",
    )
    parser.add_argument("--perfskel", required=True, help="the perfskel binary")
    parser.add_argument("--quick", action="store_true",
                        help="one small case per application, 4 ranks only "
                        "(the comparison reuses the 4-rank traces)")
    parser.add_argument("--long", action="store_true",
                        help="problems of about 5 s at 2 ranks for the example and pattern "
                        "programs (the same iterations, more of them), so that 1:100 "
                        "skeletons run about 50 ms")
    parser.add_argument("--apps", help="comma-separated (default: all): "
                        + ",".join(a.name for a in APPS))
    parser.add_argument("--ranks", help="comma-separated rank counts (default 4,8,16)")
    parser.add_argument("--out", default="/tmp/perfskel-real-apps",
                        help="work directory (default /tmp/perfskel-real-apps)")
    parser.add_argument("--no-compare", action="store_true",
                        help="skip the 1:1 skeleton against application table")
    parser.add_argument("--repeats", type=int,
                        help="runs of the untraced application and of its 1:1 skeleton, "
                        "in turn (default 5; 2 with --quick)")
    parser.add_argument("--record-runs", type=int,
                        help="runs recorded for the comparison's trace, the median one "
                        "kept (`perfskel record --runs`; default 3; 1 with --quick, which "
                        "reuses the 4-rank trace)")
    parser.add_argument("--ratios", default="1",
                        help="comma-separated K of the ratios 1:K the comparison "
                        "compiles and runs on the default path (default 1)")
    parser.add_argument("--compare-ranks", type=int,
                        help="rank count of the comparison for every application "
                        "(default 2, 4 for rowcol; 4 with --quick)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds allowed to each step (default 900)")
    args = parser.parse_args()
    for name in ("repeats", "record_runs"):
        value = getattr(args, name)
        if value is not None and value < 1:
            sys.exit(f"real-apps: --{name.replace('_', '-')} {value}: at least 1")

    apps = APPS
    if args.apps:
        wanted = [a.strip() for a in args.apps.split(",") if a.strip()]
        names = {a.name for a in APPS}
        unknown = [w for w in wanted if w not in names]
        if unknown:
            sys.exit(f"real-apps: unknown application(s) {', '.join(unknown)}; "
                     f"known: {', '.join(sorted(names))}")
        apps = [a for a in APPS if a.name in wanted]
    if args.ranks:
        try:
            ranks = [int(r) for r in args.ranks.split(",") if r.strip()]
        except ValueError:
            sys.exit(f"real-apps: --ranks {args.ranks}: not a list of integers")
    else:
        ranks = [4] if args.quick else [4, 8, 16]

    runner = Runner(args, apps)
    runner.prepare()
    rows = []
    for app in apps:
        for n_ranks in ranks:
            rows.append(runner.skeletonize_case(app, n_ranks))
    compare = []
    if not args.no_compare:
        for app in apps:
            compare.append(runner.compare_case(app, rows))
    runner.report(rows, compare)


class Runner:
    """Runs the steps of every case in the work directory."""

    def __init__(self, args, apps):
        self.args = args
        self.apps = apps
        self.perfskel = str(Path(args.perfskel).resolve())
        self.out = Path(args.out).resolve()
        self.mode = "quick" if args.quick else "full"
        self.repeats = args.repeats if args.repeats else (2 if args.quick else 5)
        try:
            self.ratios = [int(k) for k in args.ratios.split(",") if k.strip()]
        except ValueError:
            sys.exit(f"real-apps: --ratios {args.ratios}: not a list of integers")
        if not self.ratios or min(self.ratios) < 1:
            sys.exit(f"real-apps: --ratios {args.ratios}: K of 1:K is at least 1")
        self.record_runs = args.record_runs if args.record_runs else (1 if args.quick else 3)
        self.mpirun = shutil.which("mpirun.openmpi") or "mpirun"
        self.mpicc = shutil.which("mpicc.openmpi") or "mpicc"
        self.env = dict(os.environ)
        if os.geteuid() == 0:
            self.env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    # Set-up.

    def prepare(self):
        """Checks the tools, claims the work directory, builds the example apps and the
        timing shim."""
        kinds = {a.kind for a in self.apps}
        needed = [self.mpirun]
        if "lammps" in kinds:
            needed.append("lmp")
        if "hpcc" in kinds:
            needed.append("hpcc")
        if kinds & {"example", "pattern"} or not self.args.no_compare:
            needed += [self.mpicc, "make"]
        missing = [t for t in needed if shutil.which(t) is None]
        if missing:
            sys.exit(f"real-apps: {', '.join(missing)} not found; "
                     "scripts/setup.sh installs them (lammps, lammps-examples, hpcc, openmpi)")
        if not os.access(self.perfskel, os.X_OK):
            sys.exit(f"real-apps: {self.perfskel} is not an executable")
        if self.out.exists():
            if not self.out.is_dir():
                sys.exit(f"real-apps: {self.out} exists and is not a directory")
            if any(self.out.iterdir()) and not (self.out / MARKER).exists():
                sys.exit(f"real-apps: {self.out} has files this script did not write "
                         f"(no {MARKER}); choose another --out")
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / MARKER).write_text("work directory of perfskel scripts/real-apps.sh\n")
        if "example" in kinds:
            self.step("make", ["make", "-s", "-C", str(ROOT / "examples/apps"),
                               f"MPICC={self.mpicc}", f"OUT={self.out / 'build'}"],
                      self.out, self.out / "make.log", check=True)
        for app in self.apps:
            if app.kind == "pattern":
                (self.out / "build").mkdir(exist_ok=True)
                self.step("mpicc", [self.mpicc, "-O2", "-g", "-o",
                                    str(self.out / "build" / app.name),
                                    str(ROOT / "tests/apps" / f"{app.name}.c")],
                          self.out, self.out / f"build-{app.name}.log", check=True)
        if not self.args.no_compare:
            self.step("mpicc", [self.mpicc, "-O2", "-shared", "-fPIC", "-o",
                                str(self.out / "app_time.so"), str(APP_TIME)],
                      self.out, self.out / "app_time.log", check=True)
        log(f"work directory {self.out}; perfskel {self.perfskel}; {self.mpirun}")

    def case_dir(self, name):
        """A fresh directory for one case (replacing only the one this script made)."""
        path = self.out / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    # Applications.

    def size(self, app):
        """The problem of `app` in this run's mode."""
        if self.args.quick:
            return app.quick
        if self.args.long and app.long:
            return app.long
        return app.full

    def app_command(self, app, n_ranks, cwd):
        """The application's command line (after `mpirun -np N`), writing the input files
        it needs into `cwd`."""
        size = self.size(app)
        if app.kind == "lammps":
            cmd = ["lmp", "-in", str(HERE / size["input"]), "-log", "none",
                   "-screen", "none"]
            for key, value in size["vars"].items():
                cmd += ["-var", key, value]
            if size["input"] == "in.peptide":
                cmd += ["-var", "data", str(peptide_data(cwd))]
            return cmd
        if app.kind == "hpcc":
            write_hpccinf(cwd / "hpccinf.txt", size["n"], n_ranks)
            return ["hpcc"]
        return [str(self.out / "build" / app.name)] + size["args"]

    def case_label(self, app):
        size = self.size(app)
        if app.kind == "lammps":
            return " ".join(f"{k}={v}" for k, v in size["vars"].items())
        if app.kind == "hpcc":
            return f"N={size['n']}"
        return " ".join(size["args"])

    # Steps.

    def step(self, what, cmd, cwd, log_path, check=False):
        """Runs `cmd` (run_step); exits on failure with `check`."""
        status, seconds, stdout = run_step(cmd, cwd, log_path, self.env, self.args.timeout)
        if check and status != 0:
            sys.exit(f"real-apps: {what} failed ({describe(status)}); see {log_path}")
        return status, seconds, stdout

    def record(self, app, n_ranks, cwd, runs=1):
        trace = cwd / "trace"
        cmd = [self.perfskel, "record", "--force", "-o", str(trace)]
        if runs > 1:
            cmd += ["--runs", str(runs)]
        cmd += ["--", self.mpirun,
               "--oversubscribe", "-np", str(n_ranks)] + self.app_command(app, n_ranks, cwd)
        status, seconds, stdout = self.step("record", cmd, cwd, cwd / "record.log")
        (cwd / "record.out").write_text(stdout)
        return status, seconds, trace

    def skeletonize_case(self, app, n_ranks):
        """Record → skeletonize (timed) → check at one rank count; gives the table row."""
        cwd = self.case_dir(f"{app.name}/np{n_ranks}")
        log(f"{app.name} at {n_ranks} ranks: record")
        row = {"app": app.name, "case": self.case_label(app), "ranks": n_ranks,
               "mode": self.mode, "dir": str(cwd), "status": "ok"}
        status, seconds, trace = self.record(app, n_ranks, cwd)
        row["record_s"] = round(seconds, 2)
        if status != 0:
            row["status"] = f"record failed ({describe(status)})"
            return row
        row["app_time_traced_s"] = manifest_app_time(trace)
        log(f"{app.name} at {n_ranks} ranks: skeletonize")
        skel = cwd / "app.skel"
        status, seconds, stdout = self.step(
            "skeletonize",
            [self.perfskel, "skeletonize", str(trace), "-o", str(skel), "--force",
             "--format", "json"],
            cwd, cwd / "skeletonize.log")
        row["skeletonize_s"] = round(seconds, 2)
        (cwd / "summary.json").write_text(stdout)
        try:
            summary = json.loads(stdout)
        except json.JSONDecodeError:
            summary = None
        # skeletonize exits 1 when its own check of the skeleton finds errors, but still
        # writes the skeleton and the summary: those rows are reported, not dropped.
        row["skeletonize_exit"] = status
        if summary is None or not skel.exists():
            row["status"] = f"skeletonize failed ({describe(status)})"
            return row
        for key in ["raw_events", "dropped_events", "statements", "rank_conditionals",
                    "explicit_peer_statements", "loop_time_pct", "topology", "loops",
                    "compression_ratio", "app_time_s"]:
            row[key] = summary.get(key)
        # The written skeleton's compute against the trace's (skeletonize's own check).
        checked = summary.get("compute_check") or {}
        row["compute_error_pct"] = checked.get("error_pct")
        row["compute_worst_rank_pct"] = (checked.get("worst_error_pct")
                                         if checked.get("by_rank") else None)
        status, _, stdout = self.step("check", [self.perfskel, "check", str(skel)], cwd,
                                      cwd / "check.log")
        (cwd / "check.out").write_text(stdout)
        row["check"] = check_status(status, (cwd / "check.log").read_text() + stdout)
        return row

    def compare_case(self, app, rows):
        """The 1:1 skeleton against the untraced application at the comparison rank count
        (quick mode: the 4-rank trace already recorded)."""
        n_ranks = (self.args.compare_ranks or 4) if self.args.quick else (
            self.args.compare_ranks or app.compare_ranks)
        row = {"app": app.name, "case": self.case_label(app), "ranks": n_ranks,
               "mode": self.mode, "status": "ok"}
        done = [r for r in rows if r["app"] == app.name and r["ranks"] == n_ranks]
        if done and done[0]["status"] != "ok":
            row["status"] = done[0]["status"]
            return row
        if done and self.record_runs == 1:
            cwd = Path(done[0]["dir"])
            row["app_time_traced_s"] = done[0].get("app_time_traced_s")
        else:
            # Its own trace, the median of --record-runs runs (`record --runs`): one
            # run taken in a slow phase of a shared machine would make the skeleton
            # replay that phase.
            cwd = self.case_dir(f"{app.name}/compare-np{n_ranks}")
            log(f"{app.name} at {n_ranks} ranks: record (comparison, "
                f"{self.record_runs} runs)")
            status, _, trace = self.record(app, n_ranks, cwd, self.record_runs)
            if status != 0:
                row["status"] = f"record failed ({describe(status)})"
                return row
            row["app_time_traced_s"] = manifest_app_time(trace)
            status, _, _ = self.step(
                "skeletonize",
                [self.perfskel, "skeletonize", str(trace), "-o", str(cwd / "app.skel"),
                 "--force", "--format", "json"],
                cwd, cwd / "skeletonize.log")
            if not (cwd / "app.skel").exists():
                row["status"] = f"skeletonize failed ({describe(status)})"
                return row
        row["dir"] = str(cwd)
        # The default path: `compile --ratio 1:K` and `run` with no other flag; each
        # prediction is the skeleton's time times the ratio it reaches.
        ratios = self.ratios
        out_dirs = {}
        for k in ratios:
            log(f"{app.name} at {n_ranks} ranks: compile 1:{k}")
            out_dirs[k] = cwd / f"skeleton-1to{k}"
            if out_dirs[k].exists():
                shutil.rmtree(out_dirs[k])
            status, _, _ = self.step(
                "compile",
                [self.perfskel, "compile", str(cwd / "app.skel"), "--ratio", f"1:{k}",
                 "-o", str(out_dirs[k])],
                cwd, cwd / f"compile-1to{k}.log")
            if status != 0:
                row["status"] = f"compile 1:{k} failed ({describe(status)})"
                return row
        # The application and its skeleton in turn, so that a slow phase of the machine
        # falls on both; medians, and the application's own spread as the noise.
        untraced, walls = [], []
        predicted = {k: [] for k in ratios}
        cmd = [self.mpirun, "--oversubscribe", "-np", str(n_ranks), "-x",
               f"LD_PRELOAD={self.out / 'app_time.so'}"] + self.app_command(app, n_ranks, cwd)
        # One run each: the runs of the application and of its skeletons are interleaved
        # here, so that a slow phase of the machine falls on all of them.
        steps = [("untraced run", cmd, "untraced",
                  r"perfskel-app-time seconds=([0-9.]+)", untraced)]
        # At 1:1 the skeleton runs as long as the application: one run a round, as the
        # application. Above, `run` as a user runs it (its default: the median of 3 to
        # 10 runs, more while they spread), a prediction a round.
        for k in ratios:
            repeat = ["--repeat", "1"] if k == 1 else []
            steps.append((f"run 1:{k}",
                          [self.perfskel, "run", str(out_dirs[k]), "-np", str(n_ranks)]
                          + repeat,
                          f"run-1to{k}", r"perfskel-result .*\bpredicted_s=([0-9.]+)",
                          predicted[k]))
        for run in range(self.repeats):
            log(f"{app.name} at {n_ranks} ranks: untraced run and skeletons "
                f"({run + 1} of {self.repeats})")
            for what, command, name, pattern, into in steps:
                status, seconds, stdout = self.step(what, command, cwd,
                                                    cwd / f"{name}-{run}.log")
                (cwd / f"{name}-{run}.out").write_text(stdout)
                # The last match: `run` prints each run's result line, then the
                # median run's.
                matches = re.findall(pattern, stdout)
                if status != 0 or not matches:
                    row["status"] = f"{what} failed ({describe(status)})"
                    return row
                into.append(float(matches[-1]))
                if into is untraced:
                    walls.append(seconds)
        row["runs"] = self.repeats
        row["app_untraced_runs_s"] = untraced
        row["app_time_untraced_s"] = median(untraced)
        row["mpirun_wall_s"] = round(median(walls), 3)
        row["app_spread"] = spread(untraced)
        row["ratios"] = ratios
        for k in ratios:
            row[f"predicted_1to{k}_runs_s"] = predicted[k]
            row[f"predicted_1to{k}_s"] = median(predicted[k])
            row[f"predicted_1to{k}_spread"] = spread(predicted[k])
            row[f"error_1to{k}"] = round(
                row[f"predicted_1to{k}_s"] / row["app_time_untraced_s"] - 1, 4)
        first = ratios[0]
        row["skeleton_runs_s"] = predicted[first]
        row["skeleton_s"] = median(predicted[first])
        row["skeleton_spread"] = spread(predicted[first])
        row["skeleton_over_app"] = round(row["skeleton_s"] / row["app_time_untraced_s"], 3)
        if row.get("app_time_traced_s"):
            row["skeleton_over_traced"] = round(row["skeleton_s"] / row["app_time_traced_s"], 3)
        return row

    # Output.

    def report(self, rows, compare):
        lines = [f"## perfskel real applications ({self.mode} mode)", ""]
        for app in self.apps:
            app_rows = [r for r in rows if r["app"] == app.name]
            if not app_rows:
                continue
            lines += [f"### {app.name} ({app_rows[0]['case']})", "", app.about, "",
                      "| ranks | events | dropped events | statements | rank conditionals "
                      "| explicit-peer statements | % time in loops | topology | check "
                      "| compute against the trace (all ranks / worst rank) "
                      "| skeletonize (s) |",
                      "|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|"]
            for r in app_rows:
                if r["status"] != "ok":
                    lines.append(f"| {r['ranks']} | {r['status']} | | | | | | | | | |")
                    continue
                lines.append(
                    f"| {r['ranks']} | {r['raw_events']} | {r['dropped_events']} "
                    f"| {r['statements']} | {r['rank_conditionals']} "
                    f"| {r['explicit_peer_statements']} | {r['loop_time_pct']:.1f} "
                    f"| {r['topology']} | {r['check']} | {compute_cell(r)} "
                    f"| {r['skeletonize_s']:.2f} |")
            lines.append("")
        if compare:
            lines += [
                "### 1:1 skeleton against the application",
                "",
                "Application time: untraced runs, from the end of MPI_Init to the start "
                "of MPI_Finalize (barriers at both ends), measured by the preloaded shim "
                f"runtime/c/app_time.c; {self.repeats} runs of the application and "
                f"{self.repeats} of its 1:1 skeleton in turn, medians; `spread` is "
                "(slowest - fastest) / median of the application's own runs, this "
                "machine's run-to-run noise; `traced` is the time of the traced run the "
                "skeleton was made from (the skeleton's `app_time`; "
                + ("one recorded run" if self.record_runs == 1 else
                   f"the median of {self.record_runs} recorded runs")
                + "), and `/ traced` the skeleton's time "
                "over it, how closely the skeleton replays its trace; `mpirun wall` is "
                "the whole untraced command, launch included (median)."
                + (f" More ranks than this machine's {os.cpu_count()} cores: the "
                   "trace leaves the time ranks waited for a core out of the compute "
                   "spans (trace format 6), and the skeleton's ranks wait for theirs "
                   "again when they share the cores."
                   if any(r["ranks"] > (os.cpu_count() or 1) for r in compare) else ""),
                "",
                "| app | ranks | app untraced (s) | spread | app traced (s) "
                "| mpirun wall (s) | skeleton 1:1 (s) | spread | / traced "
                "| skeleton / app |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for r in compare:
                if r["status"] != "ok":
                    lines.append(f"| {r['app']} | {r['ranks']} | {r['status']} "
                                 "| | | | | | | |")
                    continue
                lines.append(
                    f"| {r['app']} | {r['ranks']} | {r['app_time_untraced_s']:.3f} "
                    f"| {100 * r['app_spread']:.1f} % "
                    f"| {fmt(r.get('app_time_traced_s'))} | {r['mpirun_wall_s']:.3f} "
                    f"| {r['skeleton_s']:.3f} | {100 * r['skeleton_spread']:.1f} % "
                    f"| {fmt(r.get('skeleton_over_traced'))} "
                    f"| {r['skeleton_over_app']:.3f} |")
            lines.append("")
            ratios = self.ratios
            lines += [
                "### Default path: prediction against the application",
                "",
                "`compile --ratio 1:K` and `run` with no other flag; prediction = the "
                "skeleton's time x the ratio it reaches; error = prediction / the "
                "untraced application's median - 1 (medians of the interleaved runs); "
                "`app spread` is the application's own run-to-run spread.",
                "",
                "| app | ranks | app untraced (s) | app spread | "
                + " | ".join(f"1:{k} predicted (s) | 1:{k} error" for k in ratios) + " |",
                "|---|---:|---:|---:|" + "---:|---:|" * len(ratios),
            ]
            errors = {k: [] for k in ratios}
            for r in compare:
                if r["status"] != "ok":
                    lines.append(f"| {r['app']} | {r['ranks']} | {r['status']} |")
                    continue
                cells = []
                for k in ratios:
                    errors[k].append(abs(r[f"error_1to{k}"]))
                    cells.append(f"{r[f'predicted_1to{k}_s']:.3f} | "
                                 f"{100 * r[f'error_1to{k}']:+.1f} %")
                lines.append(f"| {r['app']} | {r['ranks']} | "
                             f"{r['app_time_untraced_s']:.3f} | "
                             f"{100 * r['app_spread']:.1f} % | " + " | ".join(cells) + " |")
            summary = ", ".join(
                f"1:{k}: median |error| {100 * median(errors[k]):.1f} %, "
                f"worst {100 * max(errors[k]):.1f} %" for k in ratios if errors[k])
            lines += ["", summary, ""]
        text = "\n".join(lines)
        print(text)
        (self.out / "real-apps.md").write_text(text + "\n")
        (self.out / "real-apps.json").write_text(
            json.dumps({"mode": self.mode, "perfskel": self.perfskel,
                        "load_average": os.getloadavg(), "skeletonize": rows,
                        "compare": compare}, indent=2) + "\n")
        write_csv(self.out / "real-apps.csv", rows)
        write_csv(self.out / "real-apps-compare.csv", compare)
        log(f"tables in {self.out}/real-apps.md, .json, .csv, -compare.csv")


def peptide_data(cwd):
    """LAMMPS's peptide data file (Debian may ship it gzipped: unpacked into `cwd`)."""
    plain = LAMMPS_EXAMPLES / "peptide/data.peptide"
    if plain.exists():
        return plain
    packed = plain.with_name("data.peptide.gz")
    if packed.exists():
        target = cwd / "data.peptide"
        with gzip.open(packed, "rb") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        return target
    sys.exit(f"real-apps: {plain} not found (Debian package lammps-examples)")


def write_hpccinf(path, n, n_ranks):
    """scripts/real-apps/hpccinf.txt with the problem size and a P x Q grid of all ranks
    (P the largest divisor not above the square root)."""
    p = max(d for d in range(1, int(n_ranks ** 0.5) + 1) if n_ranks % d == 0)
    q = n_ranks // p
    out = []
    for line in (HERE / "hpccinf.txt").read_text().splitlines():
        label = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
        if label == "Ns":
            line = f"{n:<13}{label}"
        elif label == "Ps":
            line = f"{p:<13}{label}"
        elif label == "Qs":
            line = f"{q:<13}{label}"
        out.append(line)
    path.write_text("\n".join(out) + "\n")


def spread(values):
    """(slowest - fastest) / median of a set of run times."""
    return round((max(values) - min(values)) / median(values), 3)


def manifest_app_time(trace):
    """The traced application time (the slowest rank's MPI_Init..MPI_Finalize span)."""
    try:
        manifest = json.loads((trace / "manifest.json").read_text())
        return round(max(r["app_ns"] for r in manifest["ranks"]) / 1e9, 3)
    except (OSError, ValueError, KeyError):
        return None


def compute_cell(row):
    """The skeleton's compute against the trace's, as skeletonize checked it: over all
    ranks, and on the rank where they differ most (not for a task farm, whose workers
    take the tasks that come to them)."""
    total = row.get("compute_error_pct")
    if total is None:
        return "-"
    worst = row.get("compute_worst_rank_pct")
    return f"{total:+.1f} %" + (f" / {worst:+.1f} %" if worst is not None else "")


def check_status(status, output):
    """clean / N warnings / N errors, from `perfskel check`'s exit status and summary."""
    if status == 0:
        return "clean"
    match = re.search(r"(\d+) errors?, (\d+) warnings?", output)
    if not match:
        return f"failed ({describe(status)})"
    errors, warnings = int(match.group(1)), int(match.group(2))
    if errors:
        return f"{errors} errors" + (f", {warnings} warnings" if warnings else "")
    return f"{warnings} warnings"


def describe(status):
    return "time-out" if status is None else f"exit {status}"


def fmt(value):
    return "" if value is None else f"{value:.3f}"


def write_csv(path, rows):
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


def log(message):
    print(f"real-apps: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
