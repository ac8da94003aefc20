#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, for testing profiles/slurm (root; Debian/Ubuntu).
#
#   tools/slurm-local.sh install   apt-get install slurm-wlm munge (slurmctld, slurmd, sbatch, squeue)
#   tools/slurm-local.sh start     write slurm.conf, start munged + slurmctld + slurmd, wait for the node
#   tools/slurm-local.sh env       print `export SLURM_CONF=...` (eval it to use sbatch/squeue by hand)
#   tools/slurm-local.sh status    sinfo + squeue
#   tools/slurm-local.sh stop      stop the three daemons (by their pid files)
#
# Everything lives under $KPAD_SLURM_DIR (default /tmp/kpad-slurm): config, munge key and socket, state,
# logs, pid files. One thing outside it: /etc/slurm/slurm.conf becomes a symlink to our slurm.conf (only
# where there is none, or it is already that link), because snakemake-executor-plugin-slurm drops every
# SLURM_* variable (SLURM_CONF too) inside a job before it calls srun, so srun must find the default path.
# `stop` removes that link again. The node is this host with its real CPU count and
# memory, one partition `debug`; no GPUs (gres), no cgroups (proctrack/linuxproc, task/none), no
# accounting database: MinJobAge=3600 keeps finished jobs in `squeue --states=all`, which is what
# snakemake-executor-plugin-slurm polls with `--slurm-status-command squeue`.
set -euo pipefail
DIR=${KPAD_SLURM_DIR:-/tmp/kpad-slurm}
CTLD_PORT=${KPAD_SLURM_CTLD_PORT:-6817}
SLURMD_PORT=${KPAD_SLURM_SLURMD_PORT:-6818}
CONF=$DIR/etc/slurm.conf
HOST=$(hostname -s)

die() { echo "slurm-local: $*" >&2; exit 1; }

install() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        && command -v sbatch >/dev/null && { echo "slurm-local: already installed"; return; }
    [ "$(id -u)" = 0 ] || die "install needs root (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    # the packages' own services are not started (policy-rc.d in containers; we start ours by hand)
    apt-get update -q
    apt-get install -y -q --no-install-recommends slurm-wlm munge
}

write_conf() {
    mkdir -p "$DIR"/{etc,state/ctld,state/d,log,run,munge}
    chmod 700 "$DIR/munge"
    local cpus mem
    cpus=$(nproc)
    mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))  # MiB, 1 GiB left to the OS
    cat >"$CONF" <<EOF
# written by tools/slurm-local.sh: a single-node test cluster on $HOST
ClusterName=kpadlocal
SlurmctldHost=$HOST
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state/ctld
SlurmdSpoolDir=$DIR/state/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$DIR/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=3600
InactiveLimit=0
KillWait=30
Waittime=0
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
    : >"$DIR/etc/plugstack.conf"
    if [ ! -e /etc/slurm/slurm.conf ] && [ ! -L /etc/slurm/slurm.conf ]; then
        mkdir -p /etc/slurm && ln -s "$CONF" /etc/slurm/slurm.conf
    elif [ "$(readlink /etc/slurm/slurm.conf)" != "$CONF" ]; then
        die "/etc/slurm/slurm.conf exists and is not ours: this machine has its own SLURM, use that"
    fi
    [ -s "$DIR/munge/munge.key" ] || { dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none; chmod 400 "$DIR/munge/munge.key"; }
}

running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
    command -v slurmctld >/dev/null || die "slurmctld not found: run '$0 install' first"
    [ "$(id -u)" = 0 ] || die "start needs root (slurmd runs jobs as their user)"
    write_conf
    export SLURM_CONF=$CONF
    if ! running "$DIR/run/munged.pid"; then
        munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
            --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
    fi
    running "$DIR/run/slurmctld.pid" || slurmctld -c -f "$CONF"
    running "$DIR/run/slurmd.pid" || slurmd -c -f "$CONF"
    for _ in $(seq 60); do
        state=$(sinfo -h -N -o %t 2>/dev/null || true)
        case "$state" in
            idle|mix|alloc) echo "slurm-local: node $HOST is $state (SLURM_CONF=$CONF)"; return 0 ;;
            drain*|down*) scontrol update nodename="$HOST" state=resume 2>/dev/null || true ;;
        esac
        sleep 1
    done
    tail -20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
    die "node did not come up in 60 s (state: ${state:-none}); logs above"
}

stop() {
    for d in slurmd slurmctld munged; do
        if running "$DIR/run/$d.pid"; then
            pid=$(cat "$DIR/run/$d.pid")
            kill "$pid"
            for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            echo "slurm-local: stopped $d ($pid)"
        fi
    done
    if [ -L /etc/slurm/slurm.conf ] && [ "$(readlink /etc/slurm/slurm.conf)" = "$CONF" ]; then rm /etc/slurm/slurm.conf; fi
}

case "${1:-}" in
    install) install ;;
    start) start ;;
    stop) stop ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    status) export SLURM_CONF=$CONF; sinfo; squeue --states=all ;;
    *) die "usage: $0 install|start|stop|env|status" ;;
esac
