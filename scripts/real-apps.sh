#!/usr/bin/env bash
# The real-application set: LAMMPS (LJ melt, peptide with PPPM) and HPCC from Debian and
# the example applications (stencil, cg, rowcol, transpose), each recorded with
# `perfskel record` under Open MPI at 4, 8 and 16 ranks (`mpirun --oversubscribe`),
# skeletonized (timed), checked; then the 1:1 skeleton of each against the untraced
# application at 2 ranks (4 for rowcol). Prints Markdown tables and writes them, with JSON
# and CSV, into the work directory. See scripts/real-apps/real_apps.py for the details.
#
#   scripts/real-apps.sh --quick                 # smoke test: small cases, 4 ranks
#   scripts/real-apps.sh --apps lammps-melt --ranks 4,8,16 --out /tmp/melt
#   PERFSKEL=/path/to/perfskel scripts/real-apps.sh --no-compare
#
# Uses the perfskel built from this repository (`cargo build --release`, honouring
# CARGO_TARGET_DIR) unless PERFSKEL names a binary. scripts/setup.sh installs lammps,
# lammps-examples and hpcc.
exec "$(dirname "$0")/real-apps/run-helper.sh" real_apps.py "$@"
