#!/usr/bin/env bash
# Runs one of the Python helpers of this directory with the perfskel binary it needs:
#   run-helper.sh HELPER.py ARGS...
# Uses the perfskel built from this repository (`cargo build --release`, honouring
# CARGO_TARGET_DIR) unless PERFSKEL names a binary; `-h`/`--help` needs no build.
# scripts/real-apps.sh and scripts/simgrid-validate.sh are its callers.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
helper="$root/scripts/real-apps/$1"
shift
for arg in "$@"; do
    if [ "$arg" = "-h" ] || [ "$arg" = "--help" ]; then
        exec python3 "$helper" --perfskel - --help
    fi
done
if [ -z "${PERFSKEL:-}" ]; then
    (cd "$root" && cargo build --release --locked --quiet --bin perfskel)
    target=${CARGO_TARGET_DIR:-target}
    case "$target" in
        /*) ;;
        *) target="$root/$target" ;;
    esac
    PERFSKEL="$target/release/perfskel"
fi
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
exec python3 "$helper" --perfskel "$PERFSKEL" "$@"
