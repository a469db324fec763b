#!/usr/bin/env bash
# Starts a single-node Slurm on this machine (munged, slurmctld, slurmd) for the tests of
# `perfskel record -- srun …`, unless a Slurm already answers. Writes
# /etc/slurm/slurm.conf only when there is none: this host is the controller and the
# one node, with 8 CPUs whatever the hardware (so 4-rank jobs fit on small machines),
# proctrack/linuxproc and task/none (no cgroups needed). Idempotent; uses sudo when not root.
set -euo pipefail

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
idle() { timeout 10 sinfo -h -o %T 2>/dev/null | grep -q idle; }
if idle; then
    exit 0
fi

host=$(hostname -s)
conf=/etc/slurm/slurm.conf
if [ ! -e "$conf" ]; then
    cpus=$(nproc)
    [ "$cpus" -lt 8 ] && cpus=8
    $sudo mkdir -p /etc/slurm
    $sudo tee "$conf" >/dev/null <<CONF
# Written by perfskel's scripts/slurm-local.sh: a single-node Slurm for its tests.
ClusterName=perfskel
SlurmctldHost=$host
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
fi
$sudo mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
$sudo chown munge:munge /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    $sudo runuser -u munge -- mungekey --create
fi
pgrep -x munged >/dev/null || $sudo runuser -u munge -- /usr/sbin/munged
pgrep -x slurmctld >/dev/null || $sudo slurmctld
pgrep -x slurmd >/dev/null || $sudo slurmd
for _ in $(seq 30); do
    if idle; then
        exit 0
    fi
    # A node left down or drained by an earlier run comes back.
    $sudo scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
    sleep 1
done
echo "slurm-local: the local Slurm node did not become idle; see /var/log/slurm/" >&2
sinfo >&2 || true
exit 1
