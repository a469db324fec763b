#!/usr/bin/env python3
"""Validation in simulation (issue 20): each application under SimGrid's SMPI against its
skeleton under SMPI on the same platform (standard library only; run through
scripts/simgrid-validate.sh).

For each application and rank count N:

1. build it twice: with Open MPI's mpicc (to be traced for real) and with SimGrid's
   smpicc, with the application timer (runtime/c/app_time.c) linked in, to be simulated
   (LAMMPS: from Debian's source, with mpicxx and smpicxx, see build_lammps);
2. record it for real on this machine (`perfskel record -- mpirun --oversubscribe -np N`):
   more ranks than cores is what the tracer's compute-as-work record is for;
3. skeletonize the trace and compile the skeleton at each ratio 1:K (the default path:
   no other flag);
4. for each platform shape, `perfskel platform` writes the platform and its host file;
   then `smpirun` simulates the application (`--cfg=smpi/host-speed:1Gf`, the speed
   `perfskel run --simgrid` gives skeletons: one second of this machine's compute is
   one second on a 1 Gf host) and `perfskel run --simgrid` the skeleton. Each prints
   its simulated time; the wall time of each simulation is measured.

The table: the application's simulated time, the prediction (skeleton x K), the error,
and the two simulations' wall times with their ratio (how much cheaper the skeleton is
to simulate). The skeleton's simulation is deterministic (its compute is smpi_execute):
one run. The application's is not: SMPI times its compute bursts on this machine as it
runs them, so it is simulated --app-runs times (3) and the median counts, its spread
beside it.

Everything goes into the work directory (--out, marked with a `.perfskel-simgrid-validate`
file; a non-empty directory without it is refused).
"""

import argparse
import csv
import hashlib
import json
import os
import re
import shutil
import sys
import tarfile
import urllib.request
from pathlib import Path
from statistics import median

from real_apps import run_step

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
APP_TIME = ROOT / "runtime" / "c" / "app_time.c"
MARKER = ".perfskel-simgrid-validate"
HOST_SPEED = "1Gf"

# The applications (C programs of examples/apps and tests/apps), their arguments (a
# fixed problem per rank: the simulated application runs every rank's compute for real,
# one rank after another, so the problem is chosen for about 0.2-0.5 s of compute per
# rank; `quick` for a smoke test) and the rank counts they accept.
APPS = {
    "stencil": {"src": "examples/apps/stencil.c", "args": ["500", "600"],
                "quick": ["128", "50"]},
    "cg": {"src": "examples/apps/cg.c", "args": ["100000", "600"],
           "quick": ["20000", "50"]},
    "rowcol": {"src": "examples/apps/rowcol.c", "args": ["50000", "600"],
               "quick": ["20000", "50"]},
    "transpose": {"src": "examples/apps/transpose.c", "args": ["64", "200"],
                  "quick": ["32", "20"]},
    "sparse_scatter": {"src": "tests/apps/sparse_scatter.c", "args": ["20000", "400"],
                       "quick": ["5000", "40"]},
    "grid_doubling": {"src": "tests/apps/grid_doubling.c", "args": ["20000", "300"],
                      "quick": ["4000", "30"]},
    "bucket_sort": {"src": "tests/apps/bucket_sort.c", "args": ["500000", "20"],
                    "quick": ["100000", "4"]},
    # multigrid and halo_dims: 100 V-cycles and 48x32x24 cells a rank (session 45; 20
    # cycles and 24x16x12 before: 22-25 ms of compute a rank, too short for 1:100, and
    # their application simulations too short for the 1:100 skeleton's to be 50x cheaper).
    "multigrid": {"src": "tests/apps/multigrid.c", "args": ["32", "100"],
                  "quick": ["16", "4"]},
    "halo_dims": {"src": "tests/apps/halo_dims.c", "args": ["48", "32", "24", "400"],
                  "quick": ["12", "8", "6", "40"]},
    # LAMMPS's LJ melt (scripts/real-apps/in.melt), one problem for every rank count
    # (16^3 fcc cells: 16,384 atoms, 500 steps, about 5 s of compute in all). Debian's
    # `lmp` is linked against Open MPI, so LAMMPS is built here from Debian's source of
    # the same version, twice with the same flags: with Open MPI's mpicxx (traced for
    # real) and with smpicxx (simulated). See build_lammps.
    "lammps-melt": {"lammps": True,
                    "args": ["-in", str(HERE / "in.melt"), "-var", "cells", "16", "-var",
                             "steps", "500", "-log", "none"],
                    "quick": ["-in", str(HERE / "in.melt"), "-var", "cells", "6", "-var",
                              "steps", "100", "-log", "none"]},
}

# Debian bookworm's LAMMPS source (the version of its `lammps` package), fetched from
# the archive and checked against the checksum of its .dsc.
LAMMPS_VERSION = "20220106.git7586adbb6a+ds1"
LAMMPS_ORIG = f"lammps_{LAMMPS_VERSION}.orig.tar.xz"
LAMMPS_URL = "http://deb.debian.org/debian/pool/main/l/lammps/" + LAMMPS_ORIG.replace("+", "%2B")
LAMMPS_SHA256 = "65146c615ad24d8b8bc64f4e05e86226a7f1fdb45c0b5ea9416562b9f3863082"


def log(message):
    print(f"simgrid-validate: {message}", file=sys.stderr, flush=True)


def torus_dims(n):
    """Three factors of n as close to each other as possible, largest first."""
    best = None
    for a in range(1, n + 1):
        if n % a:
            continue
        for b in range(1, n // a + 1):
            if (n // a) % b:
                continue
            c = n // a // b
            dims = sorted([a, b, c], reverse=True)
            if best is None or dims[0] - dims[2] < best[0] - best[2]:
                best = dims
    return best


def fat_tree(n):
    """Leaves of 4 nodes (or fewer for tiny counts) under two top switches."""
    per_leaf = 4 if n % 4 == 0 and n > 4 else n
    return f"fat-tree:{per_leaf},{n // per_leaf}"


def shape_of(kind, n):
    if kind == "cluster":
        return f"cluster:{n}"
    if kind == "torus":
        return "torus:" + "x".join(str(d) for d in torus_dims(n))
    if kind == "fat-tree":
        return fat_tree(n)
    sys.exit(f"simgrid-validate: unknown shape {kind} (cluster, torus, fat-tree)")


class Harness:
    def __init__(self, args):
        self.args = args
        self.perfskel = args.perfskel
        self.out = Path(args.out).resolve()
        self.mpirun = shutil.which("mpirun.openmpi") or "mpirun"
        self.mpicc = shutil.which("mpicc.openmpi") or "mpicc"
        self.env = dict(os.environ)
        self.lammps_cache = Path(args.lammps_cache).resolve()
        if os.geteuid() == 0:
            self.env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    def step(self, what, cmd, cwd, log_path):
        """Runs `cmd` (real_apps.run_step), its standard output kept beside the log;
        gives (exit status or None on time-out, wall seconds, stdout). `what` names it
        in the caller's messages."""
        status, seconds, stdout = run_step(cmd, cwd, log_path, self.env, self.args.timeout)
        Path(log_path).with_suffix(".out").write_text(stdout)
        return status, seconds, stdout

    def prepare(self):
        missing = [t for t in [self.mpirun, self.mpicc, "smpicc", "smpirun"]
                   if shutil.which(t) is None]
        if missing:
            sys.exit(f"simgrid-validate: {', '.join(missing)} not found; scripts/setup.sh "
                     "installs them (openmpi, libsimgrid-dev)")
        if self.out.exists():
            if not self.out.is_dir():
                sys.exit(f"simgrid-validate: {self.out} exists and is not a directory")
            if any(self.out.iterdir()) and not (self.out / MARKER).exists():
                sys.exit(f"simgrid-validate: {self.out} has files this script did not "
                         f"write (no {MARKER}); choose another --out")
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / MARKER).write_text("work directory of scripts/simgrid-validate.sh\n")
        build = self.out / "build"
        build.mkdir(exist_ok=True)
        for name in self.args.apps:
            if APPS[name].get("lammps"):
                self.build_lammps()
                continue
            src = str(ROOT / APPS[name]["src"])
            for what, cmd in [
                ("mpicc", [self.mpicc, "-O2", "-g", "-o", str(build / name), src, "-lm"]),
                # SMPI_NO_OVERRIDE_MALLOC: smpicc's helpers otherwise turn malloc and
                # calloc into SMPI functions without the `malloc` attribute, so the
                # compiler can no longer tell the arrays from a variable whose address
                # went to MPI, and keeps that variable in memory inside the loops: the
                # stencil's sweep ran 4x slower under SMPI than natively (0.50 s
                # against 0.13 s at one rank), a difference of the build, not of MPI.
                ("smpicc", ["smpicc", "-O2", "-DSMPI_NO_OVERRIDE_MALLOC", "-o",
                            str(build / f"{name}-smpi"), src, str(APP_TIME), "-lm"]),
            ]:
                status, _, _ = self.step(what, cmd, build, build / f"{what}-{name}.log")
                if status != 0:
                    sys.exit(f"simgrid-validate: {what} of {name} failed; see "
                             f"{build / f'{what}-{name}.log'}")

    def binary(self, name, smpi):
        """The application's executable: built with Open MPI (traced) or smpicc."""
        if APPS[name].get("lammps"):
            return self.lammps_cache / ("lmp_smpi" if smpi else "lmp_ompi")
        return self.out / "build" / (f"{name}-smpi" if smpi else name)

    def build_lammps(self):
        """LAMMPS from Debian's source (LAMMPS_VERSION), its core styles only (the melt
        needs nothing else), built with its own makefiles twice with the same flags:
        `lmp_ompi` with Open MPI's mpicxx, `lmp_smpi` with smpicxx and the application
        timer. About 12 minutes on two cores; kept in --lammps-cache and reused."""
        cache = self.lammps_cache
        done = cache / "built.ok"
        if done.exists() and all((cache / b).exists() for b in ["lmp_ompi", "lmp_smpi"]):
            return
        if shutil.which("smpicxx") is None or shutil.which("mpicxx.openmpi") is None:
            sys.exit("simgrid-validate: LAMMPS needs smpicxx and mpicxx.openmpi; "
                     "scripts/setup.sh installs them (libsimgrid-dev, libopenmpi-dev)")
        cache.mkdir(parents=True, exist_ok=True)
        orig = cache / LAMMPS_ORIG

        def sha256(path):
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            return h.hexdigest()

        if not orig.exists() or sha256(orig) != LAMMPS_SHA256:
            log(f"LAMMPS: fetching {LAMMPS_URL}")
            part = orig.with_suffix(".part")
            try:
                with urllib.request.urlopen(LAMMPS_URL, timeout=120) as r, open(part, "wb") as f:
                    shutil.copyfileobj(r, f)
            except OSError as e:
                sys.exit(f"simgrid-validate: cannot fetch LAMMPS's source ({LAMMPS_URL}): {e}")
            if sha256(part) != LAMMPS_SHA256:
                part.unlink()
                sys.exit(f"simgrid-validate: {LAMMPS_URL} does not have the checksum of "
                         "Debian's .dsc; not used")
            part.replace(orig)
        tree = cache / "src"
        if tree.exists():
            shutil.rmtree(tree)
        tree.mkdir()
        log("LAMMPS: unpacking")
        with tarfile.open(orig) as t:
            if hasattr(tarfile, "data_filter"):
                t.extractall(tree, filter="data")
            else:
                t.extractall(tree)
        tops = [d for d in tree.iterdir() if d.is_dir()]
        if len(tops) != 1 or not (tops[0] / "src" / "MAKE" / "Makefile.mpi").exists():
            sys.exit(f"simgrid-validate: {orig} is not the LAMMPS source this script knows")
        src = tops[0] / "src"
        timer = src / "perfskel_app_time.o"
        status, _, _ = self.step("smpicc", ["smpicc", "-O2", "-c", str(APP_TIME), "-o",
                                            str(timer)], src, cache / "app-time.log")
        if status != 0:
            sys.exit(f"simgrid-validate: the application timer did not build under "
                     f"smpicc; see {cache / 'app-time.log'}")
        base = (src / "MAKE" / "Makefile.mpi").read_text()
        flags = "-g -O2 -std=c++11"
        for machine, cxx, extra, lib in [
            ("ompi", "mpicxx.openmpi", "", ""),
            # SMPI_NO_OVERRIDE_MALLOC: as for the C applications (see prepare).
            ("smpi", "smpicxx", " -DSMPI_NO_OVERRIDE_MALLOC", str(timer)),
        ]:
            text = base
            for key, value in [("CC", cxx), ("LINK", cxx), ("CCFLAGS", flags + extra),
                               ("LINKFLAGS", flags), ("LIB", lib)]:
                text, n = re.subn(rf"(?m)^{key} =.*$", f"{key} =\t{value}", text)
                if n != 1:
                    sys.exit(f"simgrid-validate: LAMMPS's Makefile.mpi has no single "
                             f"`{key} =` line")
            (src / "MAKE" / "MINE" / f"Makefile.{machine}").write_text(text)
            log(f"LAMMPS: building lmp_{machine} (core styles, {cxx})")
            status, wall, _ = self.step(
                "make", ["make", f"-j{os.cpu_count() or 2}", machine], src,
                cache / f"make-{machine}.log")
            if status != 0 or not (src / f"lmp_{machine}").exists():
                sys.exit(f"simgrid-validate: LAMMPS's build for {machine} failed; see "
                         f"{cache / f'make-{machine}.log'}")
            log(f"LAMMPS: lmp_{machine} built in {wall:.0f} s")
            shutil.copy2(src / f"lmp_{machine}", cache / f"lmp_{machine}")
        shutil.rmtree(tree)
        done.write_text(f"LAMMPS {LAMMPS_VERSION}: lmp_ompi, lmp_smpi\n")

    def args_of(self, name):
        return APPS[name]["quick" if self.args.quick else "args"]

    def case(self, name, n):
        cwd = self.out / name / f"np{n}"
        if cwd.exists():
            shutil.rmtree(cwd)
        cwd.mkdir(parents=True)
        rows = []
        base = {"app": name, "args": " ".join(self.args_of(name)), "ranks": n}
        log(f"{name} at {n} ranks: record")
        trace = cwd / "trace"
        status, wall, _ = self.step(
            "record",
            [self.perfskel, "record", "--force", "-o", str(trace), "--", self.mpirun,
             "--oversubscribe", "-np", str(n), str(self.binary(name, smpi=False))]
            + self.args_of(name),
            cwd, cwd / "record.log")
        if status != 0:
            return [dict(base, status=f"record failed ({status})")]
        base["record_wall_s"] = round(wall, 2)
        status, _, _ = self.step(
            "skeletonize",
            [self.perfskel, "skeletonize", str(trace), "-o", str(cwd / "app.skel"),
             "--force"],
            cwd, cwd / "skeletonize.log")
        if not (cwd / "app.skel").exists():
            return [dict(base, status=f"skeletonize failed ({status})")]
        for k in self.args.ratios:
            status, _, _ = self.step(
                "compile",
                [self.perfskel, "compile", str(cwd / "app.skel"), "--ratio", f"1:{k}",
                 "-o", str(cwd / f"skeleton-1to{k}"), "--force"],
                cwd, cwd / f"compile-1to{k}.log")
            if status != 0:
                return [dict(base, status=f"compile 1:{k} failed ({status})")]
        for kind in self.args.shapes:
            row = dict(base, platform=kind, shape=shape_of(kind, n), status="ok")
            platform = cwd / f"platform-{kind}.xml"
            status, _, _ = self.step(
                "platform",
                [self.perfskel, "platform", "--shape", row["shape"], "-o", str(platform),
                 "--force"],
                cwd, cwd / f"platform-{kind}.log")
            if status != 0:
                rows.append(dict(row, status=f"platform failed ({status})"))
                continue
            # SMPI times the application's compute bursts on this machine as it runs
            # them, so its noise enters the simulated time: the median of several
            # simulations, their spread beside it.
            sims, walls, failed = [], [], None
            for run in range(self.args.app_runs):
                log(f"{name} at {n} ranks on {row['shape']}: the application simulated "
                    f"({run + 1} of {self.args.app_runs})")
                status, wall, stdout = self.step(
                    "smpirun",
                    ["smpirun", "-np", str(n), "-platform", str(platform), "-hostfile",
                     str(platform.with_suffix(".hosts")),
                     f"--cfg=smpi/host-speed:{HOST_SPEED}", "--log=root.thres:warning",
                     str(self.binary(name, smpi=True))] + self.args_of(name),
                    cwd, cwd / f"app-{kind}-{run}.log")
                found = re.findall(r"perfskel-app-time seconds=([0-9.]+)", stdout)
                if status != 0 or not found:
                    failed = status
                    break
                sims.append(float(found[-1]))
                walls.append(wall)
            if failed is not None or not sims:
                rows.append(dict(row, status=f"smpirun of the application failed ({failed})"))
                continue
            row["app_sim_runs_s"] = sims
            row["app_sim_s"] = median(sims)
            row["app_sim_spread"] = round((max(sims) - min(sims)) / median(sims), 4)
            row["app_sim_wall_s"] = round(median(walls), 3)
            # The communication alone: the application with SMPI's computation timing
            # off (deterministic: its bursts take no simulated time) against the 1:1
            # skeleton with `--sim-compute none`. What the skeleton replays of the
            # network, apart from how SMPI times the application's compute on this host.
            if self.args.comm_only:
                log(f"{name} at {n} ranks on {row['shape']}: communication alone")
                status, _, stdout = self.step(
                    "smpirun",
                    ["smpirun", "-np", str(n), "-platform", str(platform), "-hostfile",
                     str(platform.with_suffix(".hosts")),
                     f"--cfg=smpi/host-speed:{HOST_SPEED}",
                     "--cfg=smpi/simulate-computation:no", "--log=root.thres:warning",
                     str(self.binary(name, smpi=True))] + self.args_of(name),
                    cwd, cwd / f"app-{kind}-comm.log")
                found = re.findall(r"perfskel-app-time seconds=([0-9.]+)", stdout)
                status2, _, stdout2 = self.step(
                    "run --simgrid --sim-compute none",
                    [self.perfskel, "run", str(cwd / "skeleton-1to1"), "-np", str(n),
                     "--simgrid", str(platform), "--sim-compute", "none"],
                    cwd, cwd / f"skeleton-1to1-{kind}-comm.log")
                lines = re.findall(r"perfskel-result .*", stdout2)
                if status == 0 and found and status2 == 0 and lines and 1 in self.args.ratios:
                    fields = dict(w.split("=", 1) for w in lines[-1].split()[1:] if "=" in w)
                    row["app_comm_s"] = float(found[-1])
                    row["predicted_comm_1to1_s"] = float(fields["predicted_s"])
                    row["error_comm_1to1"] = round(
                        row["predicted_comm_1to1_s"] / max(row["app_comm_s"], 1e-9) - 1, 4)
            for k in self.args.ratios:
                log(f"{name} at {n} ranks on {row['shape']}: the 1:{k} skeleton simulated")
                status, wall, stdout = self.step(
                    "run --simgrid",
                    [self.perfskel, "run", str(cwd / f"skeleton-1to{k}"), "-np", str(n),
                     "--simgrid", str(platform), "--sim-compute", self.args.sim_compute],
                    cwd, cwd / f"skeleton-1to{k}-{kind}.log")
                lines = re.findall(r"perfskel-result .*", stdout)
                if status != 0 or not lines:
                    row["status"] = f"run --simgrid 1:{k} failed ({status})"
                    break
                fields = dict(w.split("=", 1) for w in lines[-1].split()[1:] if "=" in w)
                predicted = float(fields["predicted_s"])
                sim_wall = float(fields.get("simulation_s", wall))
                row[f"predicted_1to{k}_s"] = predicted
                row[f"error_1to{k}"] = round(predicted / row["app_sim_s"] - 1, 4)
                row[f"sim_wall_1to{k}_s"] = round(sim_wall, 3)
                row[f"cheaper_1to{k}"] = round(row["app_sim_wall_s"] / max(sim_wall, 1e-3), 1)
            rows.append(row)
        return rows


def table(rows, ratios):
    head = ("| application | ranks | platform | application simulated (s) | its spread | "
            "its simulation (s) | "
            + " | ".join(f"1:{k} predicted (s) | 1:{k} error | 1:{k} simulation (s) | "
                         f"1:{k} cheaper" for k in ratios) + " |")
    comm = any("error_comm_1to1" in r for r in rows)
    if comm:
        head += (" communication alone: application (s) | 1:1 skeleton (s) | "
                 "communication error |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if r.get("status") != "ok":
            lines.append(f"| {r['app']} | {r['ranks']} | {r.get('shape', '')} | "
                         f"{r['status']} |")
            continue
        cells = [r["app"], str(r["ranks"]), r["shape"], f"{r['app_sim_s']:.3f}",
                 f"{100 * r['app_sim_spread']:.1f} %", f"{r['app_sim_wall_s']:.1f}"]
        for k in ratios:
            cells += [f"{r[f'predicted_1to{k}_s']:.3f}", f"{100 * r[f'error_1to{k}']:+.1f} %",
                      f"{r[f'sim_wall_1to{k}_s']:.2f}", f"{r[f'cheaper_1to{k}']:.0f}x"]
        if comm:
            if "error_comm_1to1" in r:
                cells += [f"{r['app_comm_s']:.4f}", f"{r['predicted_comm_1to1_s']:.4f}",
                          f"{100 * r['error_comm_1to1']:+.1f} %"]
            else:
                cells += ["", "", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(rows, ratios):
    out = []
    for n in sorted({r["ranks"] for r in rows}):
        for k in ratios:
            errs = [abs(r[f"error_1to{k}"]) for r in rows
                    if r["ranks"] == n and r.get("status") == "ok"]
            cheap = [r[f"cheaper_1to{k}"] for r in rows
                     if r["ranks"] == n and r.get("status") == "ok"]
            if errs:
                out.append(f"{n} ranks, 1:{k}: median |error| {100 * median(errs):.1f} %, "
                           f"worst {100 * max(errs):.1f} % over {len(errs)} cases; "
                           f"simulation {median(cheap):.0f}x cheaper (median; "
                           f"{min(cheap):.0f}x-{max(cheap):.0f}x)")
        comm = [abs(r["error_comm_1to1"]) for r in rows
                if r["ranks"] == n and "error_comm_1to1" in r]
        if comm:
            out.append(f"{n} ranks, communication alone (1:1): median |error| "
                       f"{100 * median(comm):.1f} %, worst {100 * max(comm):.1f} % over "
                       f"{len(comm)} cases")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(
        prog="scripts/simgrid-validate.sh",
        description="Each application under SimGrid's SMPI against its skeleton under SMPI "
        "on the same platforms, at several rank counts (traced for real on this machine).")
    parser.add_argument("--perfskel", required=True, help="the perfskel binary")
    parser.add_argument("--apps", default=",".join(APPS),
                        help="comma-separated (default: all): " + ",".join(APPS))
    parser.add_argument("--ranks", default="4,16,64", help="rank counts (default 4,16,64)")
    parser.add_argument("--ratios", default="1,100", help="K of 1:K (default 1,100)")
    parser.add_argument("--shapes", default="cluster,torus",
                        help="platform shapes: cluster, torus, fat-tree (default "
                        "cluster,torus)")
    parser.add_argument("--quick", action="store_true", help="small problems")
    parser.add_argument("--app-runs", type=int, default=3,
                        help="simulations of each application, the median counts "
                        "(default 3: SMPI times its compute on this machine)")
    parser.add_argument("--no-comm-only", dest="comm_only", action="store_false",
                        help="skip the communication-alone comparison (the application "
                             "with smpi/simulate-computation:no against the 1:1 skeleton "
                             "with --sim-compute none)")
    parser.add_argument("--sim-compute", choices=["execute", "benched"], default="execute",
                        help="how the skeletons' compute spans take simulated time "
                        "(`perfskel run --sim-compute`; default execute)")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    parser.add_argument("--lammps-cache", default=str(cache / "perfskel" / f"lammps-{LAMMPS_VERSION}"),
                        help="where LAMMPS's source is fetched and its two builds kept "
                        "(default ~/.cache/perfskel/lammps-VERSION)")
    parser.add_argument("--out", default="/tmp/perfskel-simgrid-validate",
                        help="work directory")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds allowed to each step (default 1800)")
    args = parser.parse_args()
    args.apps = [a.strip() for a in args.apps.split(",") if a.strip()]
    unknown = [a for a in args.apps if a not in APPS]
    if unknown:
        sys.exit(f"simgrid-validate: unknown application(s) {', '.join(unknown)}; known: "
                 f"{', '.join(APPS)}")
    try:
        ranks = [int(r) for r in args.ranks.split(",") if r.strip()]
        args.ratios = [int(k) for k in args.ratios.split(",") if k.strip()]
    except ValueError:
        sys.exit("simgrid-validate: --ranks and --ratios are lists of integers")
    if not ranks or min(ranks) < 2 or not args.ratios or min(args.ratios) < 1:
        sys.exit("simgrid-validate: at least 2 ranks, ratios 1:K with K at least 1")
    if args.app_runs < 1:
        sys.exit("simgrid-validate: --app-runs is at least 1")
    args.shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    for s in args.shapes:
        shape_of(s, 4)
    harness = Harness(args)
    harness.prepare()
    rows = []
    for name in args.apps:
        for n in ranks:
            rows += [dict(r, sim_compute=args.sim_compute) for r in harness.case(name, n)]
            (harness.out / "simgrid-validate.json").write_text(json.dumps(rows, indent=1))
    keys = sorted({k for r in rows for k in r})
    with open(harness.out / "simgrid-validate.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    text = (f"Skeletons' compute spans: `run --sim-compute {args.sim_compute}`\n\n"
            + table(rows, args.ratios) + "\n\n" + summary(rows, args.ratios) + "\n")
    (harness.out / "simgrid-validate.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
