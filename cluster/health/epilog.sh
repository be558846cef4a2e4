#!/usr/bin/env bash
# SLURM Epilog: runs on every node of a job after it ends. Cleans up what the job leaves behind, then
# re-checks the cheap invariants so a node that broke during the job (a GPU fell off the bus, ECC errors,
# a full disk) is drained before the next job lands on it. Settings: see lib.sh, plus
#   HEALTH_KILL_STRAY=0   1: kill the job user's leftover processes when that user has no other job here
#   SQUEUE=squeue         used to look for the user's other jobs on this node
set -uo pipefail

HEALTH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HEALTH_DIR/lib.sh"

health_load_config
health_defaults
: "${HEALTH_KILL_STRAY:=0}" "${SQUEUE:=squeue}"

job_id="${SLURM_JOB_ID:-}"
job_uid="${SLURM_JOB_UID:-}"

# The per-job scratch directory the prolog made.
if [[ -n "$HEALTH_SCRATCH_PATH" && -n "$job_id" && -d "$HEALTH_SCRATCH_PATH/slurm-$job_id" ]]; then
	rm -rf --one-file-system "${HEALTH_SCRATCH_PATH:?}/slurm-$job_id"
	echo "health: removed $HEALTH_SCRATCH_PATH/slurm-$job_id"
fi

user_has_other_jobs() {
	local node="${SLURMD_NODENAME:-}" jobs
	[[ -n "$node" && -n "${SLURM_JOB_USER:-}" ]] || return 0
	# When squeue cannot answer, assume other jobs exist: never kill on a guess.
	jobs="$(health_run "$SQUEUE" -h -w "$node" -u "$SLURM_JOB_USER" -t RUNNING,COMPLETING,CONFIGURING -o %A)" || return 0
	grep -qv -x -e "$job_id" -e '' <<<"$jobs"
}

# Shared-memory segments (NCCL, torch dataloader workers) and stray processes of the job's user.
# Never for root: root's processes and files here belong to the system, not the job.
if [[ "$job_uid" =~ ^[0-9]+$ ]] && ((job_uid != 0)) && ! user_has_other_jobs; then
	if [[ -d "$HEALTH_DEV_ROOT/shm" ]]; then
		removed="$(find "$HEALTH_DEV_ROOT/shm" -mindepth 1 -maxdepth 1 -uid "$job_uid" -print -exec rm -rf {} + | grep -c . || true)"
		echo "health: removed $removed shared-memory entries of uid $job_uid"
	fi
	if [[ "$HEALTH_KILL_STRAY" == 1 ]] && pkill -KILL -U "$job_uid"; then
		echo "health: killed leftover processes of uid $job_uid"
	fi
fi

health_run_checks
if ! health_drain_on_failure epilog; then
	exit 1
fi
exit 0
