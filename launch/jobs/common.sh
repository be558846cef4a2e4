#!/bin/bash
# shellcheck shell=bash
# Shared by every rendered job script (after its settings block): the log header, the first node's address,
# signal forwarding to the training step, and the requeue decision when the step ends.
#
# Settings it reads: RUN_DIR, MAX_REQUEUES (requeues after failures; time-limit requeues are not counted),
# STEP_STOP_SIGNAL (what the step gets when the batch shell gets USR1), STEP_CHECKPOINTS_ON_STOP (1 when the step
# checkpoints before it stops on that signal, 0 when it resumes from its last periodic checkpoint), EXIT_REQUEUE,
# NO_REQUEUE_CODES (exit codes a retry cannot fix), EXIT_STATUS_FILE ("" when the step writes none), EXIT_HANG (the
# trainer's hang watchdog; absent: none), LIVENESS_TOOL (launch/liveness.py when the step's ranks run under it),
# LEASE_TOOL (launch/lease.py of the release; unset for a job that shares the run directory, as llm-eval's),
# EXIT_LEASE_HELD, LEASE_HEARTBEAT_S, OWNERSHIP_TOOL and EXIT_NOT_OWNED (training/checkpoint/ownership.py),
# ENDS_BY (epoch second a Capacity Block's instances start to terminate, or ""),
# TIME_LIMIT_S (the submitted --time, or "").
# Reads Slurm's SLURM_JOB_RESERVATION: the advance reservation (--reservation) this attempt runs in, if any.
set -uo pipefail # no -e: the requeue decision runs after a failed step

STEP_PID=""
STOP_SIGNAL=""
SIGNAL_ARRIVED=""
TERM_CAUSE=""
HEARTBEAT_PID=""

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
	check_run_dir_owner
	take_lease
	trim_time_limit
}

# In a Capacity Block (--ends-at) this attempt's time limit ends where EC2 starts terminating the instances, so
# SLURM's USR1 (the signal lead before the limit) leaves the stop's checkpoint the time to finish. A job may lower
# its own limit (raising it needs an administrator): this runs at every start, after any wait in the queue.
trim_time_limit() {
	[[ -n "${ENDS_BY:-}" ]] || return 0
	local left minutes
	left=$((ENDS_BY - $(date +%s)))
	minutes=$(((left < ${TIME_LIMIT_S:-$left} ? left : TIME_LIMIT_S) / 60))
	if ((minutes < 1)); then
		job_log "the Capacity Block's instances terminate in ${left} s: no time to train; not requeued"
		end_job 1
	fi
	if scontrol update JobId="$SLURM_JOB_ID" TimeLimit="$minutes"; then
		job_log "time limit $minutes min: the Capacity Block's instances terminate at $(date -u -d "@$ENDS_BY" +%FT%TZ)"
	else
		job_log "could not lower the time limit to $minutes min before the Capacity Block's end"
	fi
}

# The run directory must be the job user's, or one of its groups', and writable by no one else
# (training/checkpoint/ownership.py, run by path: stdlib only): another user who created it first could have
# planted a checkpoint or a config there. Checked before anything in it is read or written; the job ends, not
# requeued. OWNERSHIP_TOOL unset: no check.
check_run_dir_owner() {
	[[ -n "${OWNERSHIP_TOOL:-}" ]] || return 0
	local said
	if ! said="$("$PYTHON" "$OWNERSHIP_TOOL" --run-dir "$RUN_DIR" 2>&1)"; then
		job_log "refused: $said; this job read and wrote nothing there, not requeued (exit $EXIT_NOT_OWNED)"
		exit "$EXIT_NOT_OWNED"
	fi
}

# One job per run directory (launch/lease.py): taken before anything in RUN_DIR is touched; while another live job
# holds it this job ends at once (not requeued), leaving that job's files alone. A background loop refreshes the
# lease's time (the heartbeat) while the job runs.
take_lease() {
	[[ -n "${LEASE_TOOL:-}" ]] || return 0
	local said
	said="$("$PYTHON" "$LEASE_TOOL" take --run-dir "$RUN_DIR" --job-id "$SLURM_JOB_ID" 2>&1)"
	case $? in
	0) job_log "$said" ;;
	"$EXIT_LEASE_HELD")
		job_log "refused: $said; this job touched nothing there, not requeued"
		exit "$EXIT_LEASE_HELD"
		;;
	*)
		job_log "could not take the run directory's lease: $said; not requeued"
		exit "$EXIT_LEASE_HELD"
		;;
	esac
	(while sleep "$LEASE_HEARTBEAT_S"; do touch -c "$RUN_DIR/.lease"; done) &
	HEARTBEAT_PID=$!
}

# Ends the job for good: stops the heartbeat and gives the run directory's lease back.
end_job() {
	if [[ -n "${LEASE_TOOL:-}" ]]; then
		[[ -n "$HEARTBEAT_PID" ]] && kill "$HEARTBEAT_PID" 2>/dev/null
		"$PYTHON" "$LEASE_TOOL" release --run-dir "$RUN_DIR" --job-id "$SLURM_JOB_ID" ||
			job_log "could not release the run directory's lease"
	fi
	exit "$1"
}

# A job in an advance reservation (sbatch --reservation, SBATCH_RESERVATION) is ended by slurmctld when the
# reservation ends (ResvOverRun, default 0): TERM with Reason=TimeLimit, as at the time limit, with no USR1 before it
# (Slurm 22.05 counts the --signal lead from the job's own time limit, not from the reservation's end). A requeued
# job that still names the ended reservation is held for good: Slurm holds it (admin hold, "expired reservation") when
# it schedules it, or with Reason=ReservationDeleted when it purges the reservation. So the requeue of a job whose
# reservation has ended drops the reservation, and the job runs again in its partition like any other job; a
# reservation that still runs is kept (the requeued job goes back into it).

# True when the reservation this attempt ran in has ended or is gone (Slurm purges an ended one); false outside a
# reservation, for a list of reservations, and when Slurm does not answer.
reservation_ended() {
	local name="${SLURM_JOB_RESERVATION:-}" record end_s
	[[ -n "$name" && "$name" != *,* ]] || return 1
	# Explicit statuses: a bare `return` in the TERM trap would return the status the trap interrupted.
	if ! record="$(SLURM_TIME_FORMAT=standard scontrol show reservation -o "$name" 2>&1)"; then
		[[ "$record" == *"not found"* ]] && return 0
		return 1
	fi
	[[ " $record " =~ \ EndTime=([^ ]+)\  ]] || return 1
	end_s="$(date -d "${BASH_REMATCH[1]}" +%s 2>/dev/null)" || return 1
	((end_s <= $(date +%s)))
}

# Requeues this job; after its reservation's end, held while the reservation is taken off it (a job may change its
# own pending job), then released.
requeue_job() {
	if ! reservation_ended; then
		scontrol requeue "$SLURM_JOB_ID"
		return $?
	fi
	scontrol requeuehold "$SLURM_JOB_ID" || return 1
	scontrol update JobId="$SLURM_JOB_ID" Reservation= ||
		job_log "could not take the ended reservation $SLURM_JOB_RESERVATION off the job; Slurm may hold it"
	if scontrol release "$SLURM_JOB_ID"; then
		job_log "the reservation $SLURM_JOB_RESERVATION has ended: requeued outside it, in partition ${SLURM_JOB_PARTITION:-?}"
	else
		job_log "requeued held: release it with: scontrol update JobId=$SLURM_JOB_ID Reservation= && scontrol release $SLURM_JOB_ID"
	fi
}

# Why SIGTERM came, from the job's record in slurmctld, which sets it before slurmd signals the job. Measured on
# Slurm 22.05 (tests/launch/test_job_faults_slurm.py); slurmctld's job_state_string() shows every terminating job as
# COMPLETING, so the base state (CANCELLED, TIMEOUT, PREEMPTED) is not readable here, but these fields are:
#   requeued    Restarts above this attempt's: `scontrol requeue`, or Slurm's own (PreemptMode=REQUEUE); the job
#               runs again by itself
#   preempted   PreemptTime set: preemption (PreemptMode CANCEL) at the end of its GraceTime
#   time limit  Reason=TimeLimit: the time limit itself (the USR1 before it did not end the step in time)
#   reservation end  Reason=TimeLimit too, and the reservation this attempt ran in has ended (reservation_ended)
#   signal      still RUNNING: a TERM sent to this script alone (`scancel --signal=TERM --batch`, a site's tool)
#   cancelled   anything else: `scancel` by a user or an administrator; the job must end
term_cause() {
	local record
	record=" $(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null) "
	if [[ "$record" =~ \ Restarts=([0-9]+)\  ]] && ((BASH_REMATCH[1] > ${SLURM_RESTART_COUNT:-0})); then
		echo requeued
	elif [[ "$record" =~ \ PreemptTime=([^ ]+) && "${BASH_REMATCH[1]}" != None ]]; then
		echo preempted
	elif [[ "$record" == *" Reason=TimeLimit "* ]] && reservation_ended; then
		echo "reservation end"
	elif [[ "$record" == *" Reason=TimeLimit "* ]]; then
		echo "time limit"
	elif [[ "$record" == *" JobState=RUNNING "* ]]; then
		echo signal
	else
		echo cancelled
	fi
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
# TERM: a preemption, the time limit itself, a reservation's end or a TERM to the script: handled as USR1 (the step
#   also gets TERM from slurmd and saves within KillWait); after `scancel` by a user (term_cause) the job ends, not
#   requeued.
forward_signal() {
	local name="$1"
	STOP_SIGNAL="$name"
	SIGNAL_ARRIVED=1
	if [[ "$name" == TERM ]]; then
		TERM_CAUSE="$(term_cause)"
		if [[ "$TERM_CAUSE" == cancelled ]]; then
			STOP_SIGNAL=CANCEL
			job_log "got SIGTERM: cancelled (scancel); the job ends when the step does, not requeued"
			return
		fi
		if [[ "$TERM_CAUSE" == requeued ]]; then
			STOP_SIGNAL=REQUEUED
			job_log "got SIGTERM: requeued (scontrol requeue, or by Slurm); the job runs again by itself"
			return
		fi
		if [[ "$TERM_CAUSE" != signal ]]; then
			# Slurm is ending the job: slurmd sent TERM to the step as well, which saves within KillWait.
			job_log "got SIGTERM ($TERM_CAUSE): the training step got it too; requeueing after its stop"
			return
		fi
		job_log "got SIGTERM (to this script alone); sending SIG$STEP_STOP_SIGNAL to the training step, requeueing after it"
	else
		job_log "got SIG$name; sending SIG$STEP_STOP_SIGNAL to the training step"
	fi
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

# The spool where a job asks for a node of its own to be drained (cluster/health/epilog.sh): LLM_DRAIN_REQUESTS (the
# local cluster's environment), else the node's health settings (its bootstrap writes them), where the epilog that
# reads the spool finds it too; "" when the node has none.
drain_request_spool() {
	local settings="/etc/llm-health/health.env" spool fsx
	if [[ -n "${LLM_DRAIN_REQUESTS:-}" ]]; then
		echo "$LLM_DRAIN_REQUESTS"
		return
	fi
	spool="$(sed -n 's/^HEALTH_DRAIN_REQUESTS=//p' "$settings" 2>/dev/null | tail -n 1)"
	fsx="$(sed -n 's/^HEALTH_FSX_PATH=//p' "$settings" 2>/dev/null | tail -n 1)"
	echo "${spool:-${fsx:+$fsx/.slurm/drain-requests}}"
}

# drain_hung_nodes REASON: after the trainer's hang watchdog ended the step (training/watchdog.py), have the nodes of
# the ranks that sent no report drained, so Slurm places neither the requeued job nor any other there (ParallelCluster
# replaces a drained static node once it is idle). Slurm takes `scontrol update jobid=... excnodes=...` only from a
# pending job, never from a running or completing one: the drain is what keeps the requeue off the node. A drain needs
# Slurm operator rights, which a job's user lacks on ParallelCluster; so this script writes one request per node into
# the drain-request spool and the node's epilog, root, drains it as this attempt ends (before the requeue can start).
drain_hung_nodes() {
	local reason="$1" suspects="$RUN_DIR/hang/suspect_nodes" node spool request
	local evidence="$RUN_DIR/hang-${SLURM_JOB_ID:-0}.${SLURM_RESTART_COUNT:-0}"
	spool="$(drain_request_spool)"
	[[ -s "$suspects" ]] || job_log "hang: no rank went silent (every rank reported); no node drained"
	while read -r node; do
		[[ -n "$node" ]] || continue
		if [[ ! "$node" =~ ^[A-Za-z0-9._-]+$ ]]; then
			job_log "hang: '$node' is not a node name; not asked to drain"
			continue
		fi
		# mktemp: a name nobody could have taken first, mode 600 (the epilog reads it as root).
		if [[ -n "$spool" ]] && request="$(mktemp "$spool/${SLURM_JOB_ID:-0}.$node.XXXXXXXX" 2>/dev/null)" &&
			printf 'node=%s\nreason=%s\n' "$node" "hang watchdog: $reason" >"$request"; then
			job_log "hang: asked to drain $node (a rank there sent no report): its epilog drains it as this attempt ends, the requeued job runs elsewhere"
		else
			job_log "hang: could not ask to drain $node (no drain-request spool${spool:+ writable at $spool}); the requeued job may land on it again"
		fi
	done < <(cat "$suspects" 2>/dev/null)
	# This attempt's traces and reports, kept: the requeued trainer starts an empty hang/.
	mv "$RUN_DIR/hang" "$evidence" 2>/dev/null && job_log "hang: stack traces and reports in $evidence"
}

# collective_timeout_suspects RANKS_PER_NODE: after a step that ran with the flight recorder (nemo.sh) failed, the
# ranks that wrote no dump (RUN_DIR/hang/nccl-trace-rank-<rank>) while others did are the silent ones: a collective
# timed out waiting for them. Their nodes (block distribution: rank / RANKS_PER_NODE) go to hang/suspect_nodes, as
# the FSDP trainer's watchdog writes them, for drain_hung_nodes. Prints the reason; fails when no rank dumped (not
# a collective timeout).
collective_timeout_suspects() {
	local per_node="$1" hang="$RUN_DIR/hang" rank node dumped=0 silent=() nodes=()
	[[ "$per_node" =~ ^[1-9][0-9]*$ && -d "$hang" ]] || return 1
	mapfile -t nodes < <(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null)
	((${#nodes[@]} > 0)) || return 1
	for ((rank = 0; rank < ${#nodes[@]} * per_node; rank++)); do
		if [[ -s "$hang/nccl-trace-rank-$rank" ]]; then
			dumped=$((dumped + 1))
		else
			silent+=("$rank")
		fi
	done
	((dumped > 0)) || return 1
	: >"$hang/suspect_nodes"
	for rank in "${silent[@]}"; do
		node="${nodes[rank / per_node]}"
		grep -qxF "$node" "$hang/suspect_nodes" || echo "$node" >>"$hang/suspect_nodes"
	done
	local listed="${silent[*]:0:16}"
	((${#silent[@]} > 16)) && listed+=" ..."
	echo "a collective timed out: $dumped ranks wrote flight-recorder dumps, ${#silent[@]} did not (${listed:-none})"
}

# The S3 copy of a framework's checkpoints (NeMo 2, Megatron Bridge, NxDT: their trainers copy nothing), kept by
# training/checkpoint/framework_replica.py on this (the batch) host with the release's Python, only when
# LLM_CHECKPOINT_REPLICA is set. Settings: WORKDIR, CHECKPOINT_LAYOUT (slurm/backends.py's checkpoint_layout),
# REPLICA_FINAL_PASS_S (the bound on the last upload after the step ended).
REPLICA_WATCH_PID=""
REPLICA_STOP_FILE=""

# Before the step: the replica's newest copy back in its place when the file system has no checkpoint that recent.
# A copy that cannot be restored onto a file system with no checkpoint fails the attempt (exit 1: requeued as a
# failure); a malformed LLM_CHECKPOINT_REPLICA ends the job (exit 2, a configuration error); with a checkpoint
# here, or S3 out of reach, the job trains on and says so.
replica_restore() {
	[[ -n "${LLM_CHECKPOINT_REPLICA:-}" ]] || return 0
	local rc
	PYTHONPATH="$WORKDIR${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m training.checkpoint.framework_replica restore \
		--run-dir "$RUN_DIR" --layout "$CHECKPOINT_LAYOUT"
	rc=$?
	((rc == 0)) && return 0
	job_log "replica: nothing restored from $LLM_CHECKPOINT_REPLICA (above, exit $rc); not starting from step 0"
	finish_job "$rc"
}

# Beside the step: each newly committed checkpoint copied to S3 (failures logged and in RUN_DIR/replica.json).
replica_watch_start() {
	[[ -n "${LLM_CHECKPOINT_REPLICA:-}" ]] || return 0
	REPLICA_STOP_FILE="$RUN_DIR/.replica-watch.${SLURM_JOB_ID:-0}.stop"
	rm -f "$REPLICA_STOP_FILE"
	# A simple command, not replica_tool: $! must be the watcher itself, which the final pass waits for (a function
	# in the background is a subshell, which Slurm's TERM ends while the watcher goes on).
	PYTHONPATH="$WORKDIR${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m training.checkpoint.framework_replica watch \
		--run-dir "$RUN_DIR" --layout "$CHECKPOINT_LAYOUT" --stop-file "$REPLICA_STOP_FILE" &
	REPLICA_WATCH_PID=$!
}

# After the step, on every way out (its end, a stop signal, a requeue): the watcher's final pass uploads the last
# committed checkpoint, for at most REPLICA_FINAL_PASS_S; past it the watcher is killed and the next start's watcher
# uploads that checkpoint (the replica keeps the copy before it meanwhile).
replica_watch_stop() {
	[[ -n "$REPLICA_WATCH_PID" ]] || return 0
	local waited=0
	touch "$REPLICA_STOP_FILE"
	while kill -0 "$REPLICA_WATCH_PID" 2>/dev/null; do
		if ((waited >= REPLICA_FINAL_PASS_S)); then
			kill -KILL "$REPLICA_WATCH_PID" 2>/dev/null
			job_log "replica: the final upload did not finish in ${REPLICA_FINAL_PASS_S} s; the next start uploads the last checkpoint"
			break
		fi
		sleep 1
		waited=$((waited + 1))
	done
	wait "$REPLICA_WATCH_PID" 2>/dev/null
	rm -f "$REPLICA_STOP_FILE"
	REPLICA_WATCH_PID=""
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
	local timed_out
	if [[ -n "${FLIGHT_RECORDER_RANKS_PER_NODE:-}" && "$step_rc" != 0 && "$code" != 0 && -n "${EXIT_HANG:-}" ]] &&
		timed_out="$(collective_timeout_suspects "$FLIGHT_RECORDER_RANKS_PER_NODE")"; then
		code="$EXIT_HANG" reason="$timed_out"
		job_log "hang: $timed_out"
	elif [[ -n "${LIVENESS_TOOL:-}" && "$step_rc" != 0 && "$code" != 0 && -n "${EXIT_HANG:-}" ]] &&
		timed_out="$("$PYTHON" "$LIVENESS_TOOL" suspects --dir "$RUN_DIR/hang" \
			--nodes "$(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null | tr '\n' ' ')")"; then
		# launch/liveness.py: ranks whose heartbeat had stopped when the first rank failed.
		code="$EXIT_HANG" reason="$timed_out"
		job_log "hang: $timed_out"
	fi
	[[ "$code" == "${EXIT_HANG:-none}" ]] && drain_hung_nodes "$reason"
	if ((code == 0)); then
		job_log "finished"
		end_job 0
	fi
	if [[ " $NO_REQUEUE_CODES " == *" $code "* ]]; then
		job_log "failed with exit $code ($reason): a retry cannot fix this, not requeued"
		end_job "$code"
	fi
	if [[ "$STOP_SIGNAL" == REQUEUED ]]; then
		# Already pending again: it keeps the run directory's lease.
		job_log "requeued while running ($reason): resumes from the last checkpoint when it starts again"
		exit "$code"
	fi
	if [[ "$STOP_SIGNAL" == CANCEL ]]; then
		job_log "cancelled (scancel; $reason): not requeued; submit the same command to resume"
		end_job "$code"
	fi
	if [[ "$STOP_SIGNAL" == USR2 ]]; then
		job_log "stopped on request (SIGUSR2; $reason): not requeued; submit the same command to resume"
		end_job "$code"
	fi
	local restarts="${SLURM_RESTART_COUNT:-0}"
	if [[ "$STOP_SIGNAL" == TERM ]]; then
		# Preemption, the time limit or a reservation's end: Slurm ends the job, this script requeues it, as for USR1
		# not a failure.
		job_log "stopped by SIGTERM ($TERM_CAUSE; $reason); requeueing (restart $((restarts + 1)), not a failure)"
	elif [[ "$STOP_SIGNAL" == USR1 || "$code" == "$EXIT_REQUEUE" ]]; then
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
			end_job "$((code == 0 ? 1 : code))"
		fi
		mkdir -p "$RUN_DIR"
		echo "$((failures + 1))" >"$(failure_count_file)"
		job_log "step failed ($reason): a rank died, hung or lost its node; requeueing (failure $((failures + 1)) of at most $MAX_REQUEUES)"
	fi
	if ! requeue_job; then
		job_log "scontrol requeue $SLURM_JOB_ID failed"
		exit "$code"
	fi
	exit 0
}
