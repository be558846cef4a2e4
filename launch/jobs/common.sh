#!/bin/bash
# shellcheck shell=bash
# Shared by every rendered job script (after its settings block): the log header, the first node's address,
# signal forwarding to the training step, and the requeue decision when the step ends.
#
# Settings it reads: RUN_DIR, MAX_REQUEUES (requeues after failures; time-limit requeues are not counted),
# STEP_STOP_SIGNAL (what the step gets when the batch shell gets USR1), STEP_CHECKPOINTS_ON_STOP (1 when the step
# checkpoints before it stops on that signal, 0 when it resumes from its last periodic checkpoint), EXIT_REQUEUE,
# NO_REQUEUE_CODES (exit codes a retry cannot fix), EXIT_STATUS_FILE ("" when the step writes none), EXIT_HANG (the
# trainer's hang watchdog; absent: none).
set -uo pipefail # no -e: the requeue decision runs after a failed step

STEP_PID=""
STOP_SIGNAL=""
SIGNAL_ARRIVED=""

job_log() { echo "job[$(date -u +%FT%TZ)]: $*"; }

# Failed attempts of this job so far (SLURM_RESTART_COUNT also counts healthy time-limit requeues).
failure_count_file() { echo "$RUN_DIR/.requeue-failures.${SLURM_JOB_ID:-0}"; }
failures_so_far() {
	local count
	count="$(cat "$(failure_count_file)" 2>/dev/null || true)"
	[[ "$count" =~ ^[0-9]+$ ]] && echo "$count" || echo 0
}

# The environment the job runs with, first in its log; values of secret-looking variables are hidden.
job_start() {
	job_log "job ${SLURM_JOB_ID:-?} (${SLURM_JOB_NAME:-?}) restart ${SLURM_RESTART_COUNT:-0}; $(failures_so_far) failed attempts requeued of at most $MAX_REQUEUES"
	job_log "nodes ${SLURM_JOB_NODELIST:-?} (${SLURM_JOB_NUM_NODES:-?}), batch host $(hostname)"
	echo "---- environment ----"
	env | LC_ALL=C sort | sed -E 's/^([A-Za-z0-9_]*(SECRET|TOKEN|PASSWORD|CREDENTIAL|PRIVATE)[A-Za-z0-9_]*)=.*/\1=<hidden>/'
	echo "---- end of environment ----"
}

# LIBRARY_DIRS (a setting, may be empty) first on LD_LIBRARY_PATH: the AMI's EFA libfabric and aws-ofi-nccl.
prepend_library_dirs() {
	local dirs
	dirs="$(IFS=:; echo "${LIBRARY_DIRS[*]}")"
	if [[ -n "$dirs" ]]; then
		export LD_LIBRARY_PATH="$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		job_log "LD_LIBRARY_PATH starts with $dirs"
	fi
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

# drain_hung_nodes REASON: after the trainer's hang watchdog ended the step (training/watchdog.py), drain the nodes
# of the ranks that sent no report, so Slurm places neither the requeued job nor any other there (ParallelCluster
# replaces a drained static node once it is idle). Slurm takes `scontrol update jobid=... excnodes=...` only from a
# pending job, never from a running or completing one: the drain is what keeps the requeue off the node. Draining
# needs Slurm operator rights (root, SlurmUser, or AdminLevel=Operator); without them the line says so.
drain_hung_nodes() {
	local reason="$1" suspects="$RUN_DIR/hang/suspect_nodes" node
	local evidence="$RUN_DIR/hang-${SLURM_JOB_ID:-0}.${SLURM_RESTART_COUNT:-0}"
	[[ -s "$suspects" ]] || job_log "hang: no rank went silent (every rank reported); no node drained"
	while read -r node; do
		[[ -n "$node" ]] || continue
		if scontrol update nodename="$node" state=drain reason="hang watchdog, job ${SLURM_JOB_ID:-?}: $reason"; then
			job_log "hang: drained $node (a rank there sent no report); the requeued job runs elsewhere"
		else
			job_log "hang: could not drain $node (needs Slurm operator rights); the requeued job may land on it again"
		fi
	done < <(cat "$suspects" 2>/dev/null)
	# This attempt's traces and reports, kept: the requeued trainer starts an empty hang/.
	mv "$RUN_DIR/hang" "$evidence" 2>/dev/null && job_log "hang: stack traces and reports in $evidence"
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
	[[ "$code" == "${EXIT_HANG:-none}" ]] && drain_hung_nodes "$reason"
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
	local restarts="${SLURM_RESTART_COUNT:-0}"
	if [[ "$STOP_SIGNAL" == USR1 || "$code" == "$EXIT_REQUEUE" ]]; then
		# A healthy stop before the time limit: requeued without counting against MAX_REQUEUES.
		if [[ "$code" == "$EXIT_REQUEUE" || "$STEP_CHECKPOINTS_ON_STOP" == 1 ]]; then
			job_log "stopped before the time limit with a checkpoint ($reason); requeueing (restart $((restarts + 1)), not a failure)"
		else
			job_log "stopped before the time limit ($reason); this step writes no checkpoint on the signal: the requeued job resumes from its last periodic checkpoint; requeueing (restart $((restarts + 1)), not a failure)"
		fi
	else
		local failures
		failures="$(failures_so_far)"
		if ((failures >= MAX_REQUEUES)); then
			job_log "step failed ($reason): a rank died, hung or lost its node; giving up after $failures failed attempts (MAX_REQUEUES=$MAX_REQUEUES)"
			exit "$((code == 0 ? 1 : code))"
		fi
		mkdir -p "$RUN_DIR"
		echo "$((failures + 1))" >"$(failure_count_file)"
		job_log "step failed ($reason): a rank died, hung or lost its node; requeueing (failure $((failures + 1)) of at most $MAX_REQUEUES)"
	fi
	if ! scontrol requeue "$SLURM_JOB_ID"; then
		job_log "scontrol requeue $SLURM_JOB_ID failed"
		exit "$code"
	fi
	exit 0
}
