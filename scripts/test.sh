#!/usr/bin/env bash
# The whole test suite: installs what the tests need, then runs every test of the
# workspace (real mpirun with OpenMPI and MPICH included) and ends with one summary
# line over all test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# OpenMPI refuses to run as root without these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked "$@" 2>&1 | tee "$log" || status=$?
passed=$(grep -Eo '^test result: [A-Za-z]+\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ failed;' "$log" | awk '{s += $1} END {print s + 0}')
echo
echo "tests: $passed passed, $failed failed"
exit "$status"
