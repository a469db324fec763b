#!/usr/bin/env bash
# Validation in simulation (issue 20): the example and pattern applications and LAMMPS's
# LJ melt under SimGrid's SMPI against their skeletons under SMPI on the same platforms (a
# flat cluster and a torus by default), at 4, 16 and 64 ranks, traced for real on this
# machine (oversubscribed). LAMMPS is built from Debian's source of its packaged version
# (fetched from deb.debian.org and checked against the .dsc's checksum) with mpicxx and
# with smpicxx, about 12 minutes on two cores, once: the builds are kept in
# ~/.cache/perfskel (--lammps-cache). Prints a Markdown table (simulated times, errors, the wall time of
# each simulation) and writes it, with JSON and CSV, into the work directory. See
# scripts/real-apps/simgrid_validate.py for the details.
#
#   scripts/simgrid-validate.sh --quick --ranks 4 --apps stencil   # smoke test
#   scripts/simgrid-validate.sh --ranks 16,64 --out /tmp/sim
#   scripts/simgrid-validate.sh --apps lammps-melt --out /tmp/sim-lammps
#
# Uses the perfskel built from this repository (`cargo build --release`, honouring
# CARGO_TARGET_DIR) unless PERFSKEL names a binary. scripts/setup.sh installs SimGrid.
exec "$(dirname "$0")/real-apps/run-helper.sh" simgrid_validate.py "$@"
