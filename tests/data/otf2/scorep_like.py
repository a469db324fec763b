#!/usr/bin/python3
"""Writes an OTF2 archive as Score-P writes one for a 2-rank MPI program, through the
reference library's Python bindings (Debian's python3-otf2), for tests/otf2.rs: a
microsecond clock whose first timestamp is far from 0, user regions around the MPI
calls (the call sites), a halo exchange and an allreduce per iteration, an OpenMP
thread in rank 0's process that is no MPI rank, no perfskel attributes.

With --unwinding, as Score-P writes it with SCOREP_ENABLE_UNWINDING: no Enter/Leave
records, the MPI routines entered and left through a calling-context tree whose caller
nodes carry the source line of each call (exchange's send at app.c:45 and its receive
at app.c:47 are two call sites).

    scorep_like.py OUT_DIR [ITERATIONS] [--unwinding]
"""
import sys

import otf2
from otf2.enums import CollectiveOp, GroupType, LocationType, Paradigm, RegionRole

args = [a for a in sys.argv[1:] if a != "--unwinding"]
unwinding = "--unwinding" in sys.argv[1:]
out = args[0]
iterations = int(args[1]) if len(args) > 1 else 50
TAG, BYTES = 7, 4096
START = 1_700_000_000_000_000  # µs: the epoch-based clock of a real run

with otf2.writer.open(out, timer_resolution=1_000_000) as trace:
    defs = trace.definitions
    machine = defs.system_tree_node("machine")
    node = defs.system_tree_node("node0", parent=machine)
    procs = [defs.location_group(f"MPI Rank {r}", system_tree_parent=node) for r in range(2)]
    threads = [defs.location(f"Master thread {r}", group=procs[r]) for r in range(2)]
    omp = defs.location("OpenMP thread 1", group=procs[0], type=LocationType.CPU_THREAD)
    comm_locations = defs.group(
        "MPI_COMM_WORLD locations",
        group_type=GroupType.COMM_LOCATIONS,
        paradigm=Paradigm.MPI,
        members=threads,
    )
    world_group = defs.group(
        "MPI_COMM_WORLD group", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[0, 1]
    )
    world = defs.comm("MPI_COMM_WORLD", group=world_group)

    def mpi_region(name, role):
        return defs.region(name, region_role=role, paradigm=Paradigm.MPI)

    main = defs.region("main", source_file="app.c", begin_line_number=10)
    exchange = defs.region("exchange", source_file="app.c", begin_line_number=42)
    reduce_site = defs.region("norm", source_file="app.c", begin_line_number=60)
    parallel = defs.region("!$omp parallel @app.c:30", paradigm=Paradigm.OPENMP)
    init = mpi_region("MPI_Init", RegionRole.FUNCTION)
    send = mpi_region("MPI_Send", RegionRole.POINT2POINT)
    recv = mpi_region("MPI_Recv", RegionRole.POINT2POINT)
    allreduce = mpi_region("MPI_Allreduce", RegionRole.COLL_ALL2ALL)
    finalize = mpi_region("MPI_Finalize", RegionRole.FUNCTION)

    # The calling-context tree: a caller node is a region at the line of its call.
    def scl(line):
        return defs.source_code_location("app.c", line)

    def node(region, line=None, parent=None):
        return defs.calling_context(
            region, source_code_location=scl(line) if line else None, parent=parent
        )

    # The MPI routine -> its path, leaf first.
    paths = {}
    if unwinding:
        for mpi, frames in [
            (init, [(main, 11)]),
            (send, [(exchange, 45), (main, 12)]),
            (recv, [(exchange, 47), (main, 12)]),
            (allreduce, [(reduce_site, 62), (main, 13)]),
            (finalize, [(main, 20)]),
        ]:
            parent, path = None, []
            for region, line in reversed(frames):
                key = (region, line, parent)
                if key not in paths:
                    paths[key] = node(region, line, parent)
                parent = paths[key]
                path.insert(0, parent)
            paths[mpi] = [node(mpi, parent=parent)] + path

    class Writer:
        """Enter/Leave records, or, unwinding, calling-context records (MPI routines only:
        the user's functions are not instrumented, their frames come from the unwinder)."""

        def __init__(self, w):
            self.w, self.previous = w, []

        def enter(self, t, region):
            if not unwinding:
                self.w.enter(t, region)
            elif region in paths:
                path = paths[region]
                new = 0
                while new < len(path) and path[new] not in self.previous:
                    new += 1
                self.w.calling_context_enter(t, path[0], new + 1)
                self.previous = path

        def leave(self, t, region):
            if not unwinding:
                self.w.leave(t, region)
            elif region in paths:
                self.w.calling_context_leave(t, paths[region][0])
                self.previous = paths[region][1:]

        def __getattr__(self, name):
            return getattr(self.w, name)

    for rank in range(2):
        w = Writer(trace.event_writer_from_location(threads[rank]))
        other = 1 - rank
        t = START
        w.enter(t, main)
        w.enter(t, init)
        t += 200_000
        w.leave(t, init)
        for i in range(iterations):
            t += 1000  # 1 ms of compute
            w.enter(t, exchange)
            order = [send, recv] if rank == 0 else [recv, send]
            for call in order:
                w.enter(t, call)
                if call is send:
                    w.mpi_send(t, other, world, TAG, BYTES)
                    t += 20
                else:
                    t += 30
                    w.mpi_recv(t, other, world, TAG, BYTES)
                w.leave(t, call)
            w.leave(t, exchange)
            w.enter(t, reduce_site)
            w.enter(t, allreduce)
            w.mpi_collective_begin(t)
            t += 15
            w.mpi_collective_end(t, CollectiveOp.ALLREDUCE, world, 0xFFFFFFFF, 8, 8)
            w.leave(t, allreduce)
            w.leave(t, reduce_site)
        w.enter(t, finalize)
        t += 100
        w.leave(t, finalize)
        w.leave(t, main)
    w = trace.event_writer_from_location(omp)
    w.enter(START + 300_000, parallel)
    w.leave(START + 301_000, parallel)
