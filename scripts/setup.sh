#!/usr/bin/env bash
# Installs the system packages perfskel's demo and tests need, if they are missing:
# OpenMPI and MPICH (compilers, launchers, headers), zlib (the tracer's checksums), gfortran for the Fortran example,
# libclang for rsmpi, make for the example applications' Makefile, time (GNU time) for the
# peak-memory figure of scripts/bench-compress.sh, Slurm and munge for
# `perfskel record -- srun` (then starts a single-node Slurm with slurm-local.sh), and
# the real applications of scripts/real-apps.sh and tests/lammps.rs: LAMMPS (`lmp`, with
# its examples) and HPCC, both built against Debian's OpenMPI; SimGrid (smpicc, smpirun)
# for `perfskel run --simgrid`; mpi4py (Debian's python3-mpi4py, on its OpenMPI) for the
# Python task farm of tests/skeletonize.rs; OTF2 3.0 (the reference library, otf2-print,
# its Python bindings) for the OTF2 reader and writer (otf2/); Chromium, whose headless
# mode opens `perfskel report`'s HTML in tests/report.rs.
# Debian/Ubuntu; uses sudo when not root.
set -euo pipefail

packages=(openmpi-bin libopenmpi-dev mpich libmpich-dev zlib1g-dev gfortran libclang-dev pkg-config make time
    slurm-wlm munge lammps lammps-examples hpcc libsimgrid-dev python3-mpi4py
    libopen-trace-format2-dev otf2-tools python3-otf2 chromium)
missing=()
for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        sudo="sudo"
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
"$(dirname "$0")/slurm-local.sh"
