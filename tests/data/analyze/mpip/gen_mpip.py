#!/usr/bin/env python3
"""Writes the mpiP report fixtures in jacobi/ beside this script.

Synthetic runs of a Jacobi solver at 2, 4, 8 and 16 tasks, two replicates each, in the
layout mpiP 3.5 prints (section headings, column widths and %g formats as in its
report.c). The Waitall of the halo exchange absorbs a load imbalance that grows with the
task count; the other call sites keep their share up to noise. Deterministic (seeded).
Run from this directory: python3 gen_mpip.py
"""
import math
import random

WIDTH = 75
SITES = [
    # id, file, line, function, call, per-call ms at 2 tasks, calls per task, bytes per call
    (1, "jacobi.c", 88, "main", "Allreduce", 0.020, 200, 8),
    (2, "halo.c", 41, "exchange_halo", "Isend", 0.004, 800, 8192),
    (3, "halo.c", 37, "exchange_halo", "Irecv", 0.002, 800, 0),
    (4, "halo.c", 52, "exchange_halo", "Waitall", 0.050, 200, 0),
    (5, "jacobi.c", 120, "main", "Barrier", 0.030, 2, 0),
]


def heading(title):
    text = "@--- " + title + " "
    return ["-" * WIDTH, text + "-" * max(3, WIDTH - len(text)), "-" * WIDTH]


def g(value, digits=3):
    return "%.*g" % (digits, value)


def report(n_tasks, replicate, rng):
    app_time = [12.0 / math.sqrt(n_tasks) * rng.uniform(0.98, 1.02) for _ in range(n_tasks)]
    per_site = {}
    for sid, _f, _l, _fn, call, ms, calls, size in SITES:
        rows = []
        for rank in range(n_tasks):
            mean = ms * rng.uniform(0.85, 1.15)
            if call == "Waitall":
                # Load imbalance absorbed by the first wait grows with the task count.
                mean *= 1.0 + 0.9 * math.log2(n_tasks) * rng.uniform(0.8, 1.2)
            mean *= 12.0 / math.sqrt(n_tasks) / 8.5
            count = calls
            rows.append((rank, count, mean * 2.5, mean, mean * 0.3, size))
        per_site[sid] = rows
    mpi_time = [sum(r[rank][1] * r[rank][3] for r in per_site.values()) / 1000.0 for rank in range(n_tasks)]
    out = ["@ mpiP",
           "@ Command : /home/alice/jacobi/build/jacobi -n %d -iters 200" % (256 * n_tasks),
           "@ Version                  : 3.5.0",
           "@ MPIP Build date          : Oct 20 2020, 18:22:06",
           "@ Start time               : 2026 11 02 10:%02d:00" % (n_tasks + replicate),
           "@ Stop time                : 2026 11 02 10:%02d:12" % (n_tasks + replicate),
           "@ Timer Used               : PMPI_Wtime",
           "@ MPIP env var             : [null]",
           "@ Collector Rank           : 0",
           "@ Collector PID            : %d" % (41000 + 17 * n_tasks + replicate),
           "@ Final Output Dir         : .",
           "@ Report generation        : Single collector task"]
    for rank in range(n_tasks):
        out.append("@ MPI Task Assignment      : %d node%02d" % (rank, rank // 4))
    out.append("")
    out += heading("MPI Time (seconds)")
    out.append("Task    AppTime    MPITime     MPI%")
    for rank in range(n_tasks):
        out.append("%4d %10s %10s %8.2f" % (rank, g(app_time[rank]), g(mpi_time[rank]),
                                            100 * mpi_time[rank] / app_time[rank]))
    out.append("%4s %10s %10s %8.2f" % ("*", g(sum(app_time)), g(sum(mpi_time)),
                                        100 * sum(mpi_time) / sum(app_time)))
    out += heading("Callsites: %d" % len(SITES))
    out.append(" ID Lev File/Address        Line Parent_Funct             MPI_Call")
    for sid, f, l, fn, call, *_ in SITES:
        out.append("%3d %3d %-19s %4d %-24s %s" % (sid, 0, f, l, fn, call))
    totals = []
    for sid, _f, _l, _fn, call, *_ in SITES:
        t = sum(r[1] * r[3] for r in per_site[sid])
        totals.append((t, sid, call, sum(r[1] for r in per_site[sid])))
    totals.sort(reverse=True)
    out += heading("Aggregate Time (top twenty, descending, milliseconds)")
    out.append("Call                 Site       Time    App%    MPI%      Count    COV")
    for t, sid, call, count in totals:
        out.append("%-20s %4d %10s %7.2f %7.2f %10d %6.2f" % (
            call, sid, g(t), t / 10 / sum(app_time), 100 * t / 1000 / sum(mpi_time), count, 0.1))
    out += heading("Aggregate Sent Message Size (top twenty, descending, bytes)")
    out.append("Call                 Site      Count      Total       Avrg  Sent%")
    out.append("%-20s %4d %10d %10s %10s %6.2f" % ("Isend", 2, 800 * n_tasks,
                                                  g(8192.0 * 800 * n_tasks), g(8192.0), 100.0))
    n_rows = sum(len(r) for r in per_site.values())
    out += heading("Callsite Time statistics (all, milliseconds): %d" % n_rows)
    out.append("%-17s %4s %4s %6s %8s %8s %8s %6s %6s" % (
        "Name", "Site", "Rank", "Count", "Max", "Mean", "Min", "App%", "MPI%"))
    ordered = sorted(SITES, key=lambda s: (s[4], s[0]))
    for idx, (sid, _f, _l, _fn, call, *_r) in enumerate(ordered):
        for rank, count, mx, mean, mn, _size in per_site[sid]:
            out.append("%-17s %4d %4d %6d %8s %8s %8s %6.2f %6.2f" % (
                call, sid, rank, count, g(mx), g(mean), g(mn),
                100 * count * mean / 1000 / app_time[rank],
                100 * count * mean / 1000 / mpi_time[rank]))
        rows = per_site[sid]
        count = sum(r[1] for r in rows)
        cum = sum(r[1] * r[3] for r in rows)
        out.append("%-17s %4d %4s %6d %8s %8s %8s %6.2f %6.2f" % (
            call, sid, "*", count, g(max(r[2] for r in rows)), g(cum / count),
            g(min(r[4] for r in rows)), 100 * cum / 1000 / sum(app_time),
            100 * cum / 1000 / sum(mpi_time)))
        if idx + 1 < len(ordered):
            out.append("")
    out += heading("Callsite Message Sent statistics (all, sent bytes)")
    out.append("%-17s %4s %4s %7s %9s %9s %9s %9s" % (
        "Name", "Site", "Rank", "Count", "Max", "Mean", "Min", "Sum"))
    for rank, count, *_ in per_site[2]:
        out.append("%-17s %4d %4d %7d %9s %9s %9s %9s" % (
            "Isend", 2, rank, count, g(8192.0), g(8192.0), g(8192.0), g(8192.0 * count)))
    out.append("%-17s %4d %4s %7d %9s %9s %9s %9s" % (
        "Isend", 2, "*", 800 * n_tasks, g(8192.0), g(8192.0), g(8192.0), g(8192.0 * 800 * n_tasks)))
    out += heading("End of Report")
    return "\n".join(out) + "\n"


def main():
    rng = random.Random(7)
    for n_tasks in (2, 4, 8, 16):
        for replicate in (1, 2):
            name = "jacobi/jacobi.%d.%d.mpiP" % (n_tasks, replicate)
            with open(name, "w") as f:
                f.write(report(n_tasks, replicate, rng))


if __name__ == "__main__":
    main()
