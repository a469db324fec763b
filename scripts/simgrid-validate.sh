#!/usr/bin/env bash
# Validation in simulation (issue 20): the example and pattern applications under
# SimGrid's SMPI against their skeletons under SMPI on the same platforms (a flat cluster
# and a torus by default), at 4, 16 and 64 ranks, traced for real on this machine
# (oversubscribed). Prints a Markdown table (simulated times, errors, the wall time of
# each simulation) and writes it, with JSON and CSV, into the work directory. See
# scripts/real-apps/simgrid_validate.py for the details.
#
#   scripts/simgrid-validate.sh --quick --ranks 4 --apps stencil   # smoke test
#   scripts/simgrid-validate.sh --ranks 16,64 --out /tmp/sim
#
# Uses the perfskel built from this repository (`cargo build --release`, honouring
# CARGO_TARGET_DIR) unless PERFSKEL names a binary. scripts/setup.sh installs SimGrid.
exec "$(dirname "$0")/real-apps/run-helper.sh" simgrid_validate.py "$@"
