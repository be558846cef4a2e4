#!/bin/bash
# shellcheck shell=bash
# Shared by every rendered job script (after its settings block): the log header, the first node's address,
# signal forwarding to the training step, and the requeue decision when the step ends.
#
# Settings it reads: RUN_DIR, MAX_REQUEUES, STEP_STOP_SIGNAL (what the step gets when the batch shell gets USR1),
# EXIT_REQUEUE, NO_REQUEUE_CODES (exit codes a retry cannot fix), EXIT_STATUS_FILE ("" when the step writes none).
set -uo pipefail # no -e: the requeue decision runs after a failed step

STEP_PID=""
STOP_SIGNAL=""
SIGNAL_ARRIVED=""

job_log() { echo "job[$(date -u +%FT%TZ)]: $*"; }

# The environment the job runs with, first in its log; values of secret-looking variables are hidden.
job_start() {
	job_log "job ${SLURM_JOB_ID:-?} (${SLURM_JOB_NAME:-?}) restart ${SLURM_RESTART_COUNT:-0} of at most $MAX_REQUEUES"
	job_log "nodes ${SLURM_JOB_NODELIST:-?} (${SLURM_JOB_NUM_NODES:-?}), batch host $(hostname)"
	echo "---- environment ----"
	env | LC_ALL=C sort | sed -E 's/^([A-Za-z0-9_]*(SECRET|TOKEN|PASSWORD|CREDENTIAL|PRIVATE)[A-Za-z0-9_]*)=.*/\1=<hidden>/'
	echo "---- end of environment ----"
}

# The address of the job's first node as SLURM knows it (NodeAddr): the rendezvous host.
first_node_addr() {
	local first addr
	first="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
	addr="$(scontrol show node -o "$first" | sed -n 's/.* NodeAddr=\([^ ]*\) .*/\1/p')"
	echo "${addr:-$first}"
}

# A TCP port free on this (the first) node right now, for the rendezvous store.
free_port() {
	"${PYTHON:-python3}" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# USR1: SLURM's warning before the time limit (#SBATCH --signal=B:USR1@...) or `scancel --signal=USR1 --batch`:
#   the step checkpoints and stops, and the job requeues itself.
# USR2 (`scancel --signal=USR2 --batch`): the step checkpoints and stops, and the job ends (resume: submit again).
# TERM: scancel, preemption or the time limit itself; SLURM signals the step's tasks directly, nothing to add.
forward_signal() {
	local name="$1"
	STOP_SIGNAL="$name"
	SIGNAL_ARRIVED=1
	if [[ "$name" == TERM ]]; then
		job_log "got SIGTERM (cancel, preemption or time limit); SLURM signals the training step itself"
		return
	fi
	job_log "got SIG$name; sending SIG$STEP_STOP_SIGNAL to the training step"
	# Through slurmstepd to the step's tasks (all steps but the batch shell), never to srun itself:
	# srun answers TERM by killing its tasks outright.
	scancel --signal="$STEP_STOP_SIGNAL" "$SLURM_JOB_ID" || job_log "could not signal the training step"
}
trap 'forward_signal USR1' USR1
trap 'forward_signal USR2' USR2
trap 'forward_signal TERM' TERM

# Runs the step in the background so the traps fire while it runs; returns its exit status.
run_step() {
	job_log "step: $*"
	"$@" &
	STEP_PID=$!
	local rc
	while true; do
		wait "$STEP_PID"
		rc=$?
		# A trapped signal ends `wait` early (status > 128) while the step still runs: wait again.
		if [[ -n "$SIGNAL_ARRIVED" ]] && ((rc > 128)); then
			SIGNAL_ARRIVED=""
			continue
		fi
		break
	done
	STEP_PID=""
	return "$rc"
}

# finish_job STEP_STATUS: exit, or requeue this job (bounded by MAX_REQUEUES through SLURM_RESTART_COUNT).
finish_job() {
	local step_rc="$1" code="$1" reason="step exit status $1"
	if [[ -n "$EXIT_STATUS_FILE" && -r "$EXIT_STATUS_FILE" ]]; then
		# The trainer's own exit code: torchrun replaces worker exit codes with its own.
		code="$(sed -n 's/.*"exit_code": *\(-\{0,1\}[0-9][0-9]*\).*/\1/p' "$EXIT_STATUS_FILE")"
		reason="$(sed -n 's/.*"reason": *"\([^"]*\)".*/\1/p' "$EXIT_STATUS_FILE")"
		code="${code:-$step_rc}"
	fi
	if ((code == 0)); then
		job_log "finished"
		exit 0
	fi
	if [[ " $NO_REQUEUE_CODES " == *" $code "* ]]; then
		job_log "failed with exit $code ($reason): a retry cannot fix this, not requeued"
		exit "$code"
	fi
	if [[ "$STOP_SIGNAL" == TERM ]]; then
		job_log "stopped by SIGTERM (cancelled or preempted; exit $code): not requeued by this script"
		exit "$code"
	fi
	if [[ "$STOP_SIGNAL" == USR2 ]]; then
		job_log "stopped on request (SIGUSR2; $reason): not requeued; submit the same command to resume"
		exit "$code"
	fi
	local why
	if [[ "$STOP_SIGNAL" == USR1 || "$code" == "$EXIT_REQUEUE" ]]; then
		why="stopped on request with a checkpoint ($reason)"
	else
		why="step failed ($reason): a rank died, hung or lost its node"
	fi
	local restarts="${SLURM_RESTART_COUNT:-0}"
	if ((restarts >= MAX_REQUEUES)); then
		job_log "$why; giving up after $restarts requeues (MAX_REQUEUES=$MAX_REQUEUES)"
		exit "$((code == 0 ? 1 : code))"
	fi
	job_log "$why; requeueing (requeue $((restarts + 1)) of at most $MAX_REQUEUES)"
	if ! scontrol requeue "$SLURM_JOB_ID"; then
		job_log "scontrol requeue $SLURM_JOB_ID failed"
		exit "$code"
	fi
	exit 0
}
