#!/usr/bin/env bash
# The main job on the bundled examples: installs what is needed, builds perfskel and
# runs `perfskel demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo run --release --locked --quiet -- demo "$@"
