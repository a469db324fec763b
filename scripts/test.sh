#!/usr/bin/env bash
# The whole test suite: installs what the tests need, then runs every test of the
# workspace (real mpirun with OpenMPI and MPICH included).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# OpenMPI refuses to run as root without these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo test --workspace --locked "$@"
