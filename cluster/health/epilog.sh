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

# The per-job scratch directory the prolog made (lib.sh: removed without following a link at its name).
health_remove_job_scratch

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

# Drain requests (launch/jobs/common.sh drain_hung_nodes: the hang watchdog's silent ranks). Slurm lets only its
# operators drain a node and a job runs as its user, so the job leaves a request and this epilog, root on every node
# of the job (also when the job requeues itself), acts on it. The spool, <shared fs>/.slurm/drain-requests
# (head_node.sh), is root's with mode 1733: every user may add entries, none may list it, and the sticky bit keeps
# anyone from replacing or removing another user's entry. It lies on the shared file system because the batch host
# asks for the other nodes of the job. A request is <job id>.<node>.<random> (mktemp: no one can claim the name
# first) holding `node=NAME` and `reason=TEXT`. It counts only if it is a regular file with one link, owned by the
# job's uid, read without following a link, and names this node: a user drains the nodes of their own job, never
# another's, and only this node's epilog acts on it. One request names one node, so its node's epilog is its only
# reader and removes it; anything else named after the job is removed as rejected, and entries older than a day
# (their node never ran an epilog: it died and was replaced) are removed by any epilog.
DRAIN_REQUEST_MAX_AGE_MIN=1440
drain_requested() {
	local spool="$HEALTH_DRAIN_REQUESTS" node="${SLURMD_NODENAME:-}" owner_mode entry name meta owner links content line
	local asked reason
	[[ -n "$spool" && -n "$node" && "$job_id" =~ ^[0-9]+$ && "$job_uid" =~ ^[0-9]+$ && -d "$spool" ]] || return 0
	owner_mode="$(stat -c '%u %a' "$spool")"
	if [[ -L "$spool" || ! "$owner_mode" =~ ^0\ 1[0-7]{3}$ ]]; then
		echo "health: drain requests: $spool is not root's sticky directory (mode ${owner_mode#* }, owner ${owner_mode%% *}); ignored"
		return 0
	fi
	find "$spool" -mindepth 1 -maxdepth 1 ! -type d -mmin +"$DRAIN_REQUEST_MAX_AGE_MIN" -delete 2>/dev/null
	for entry in "$spool/$job_id".*; do
		[[ -e "$entry" || -L "$entry" ]] || continue
		name="${entry##*/}"
		meta="$(stat -c '%F|%u|%h|%d:%i' "$entry")" || continue
		if [[ "$meta" != "regular file|"* && "$meta" != "regular empty file|"* ]]; then
			echo "health: ignored drain request $name: a ${meta%%|*}, not a regular file"
			rm -f -- "$entry" 2>/dev/null # a directory stays: never a recursive removal as root in users' entries
			continue
		fi
		IFS='|' read -r _ owner links _ <<<"$meta"
		if [[ "$owner" != "$job_uid" ]]; then
			echo "health: ignored drain request $name: owned by uid $owner, not the job's $job_uid"
			rm -f -- "$entry"
			continue
		fi
		if [[ "$links" != 1 ]]; then # a hard link to a file of someone else's
			echo "health: ignored drain request $name: $links links to it"
			rm -f -- "$entry"
			continue
		fi
		# O_NOFOLLOW: never through a link put there after the check; O_NONBLOCK: never waits on a fifo; 4 KiB at most.
		content="$(dd if="$entry" iflag=nofollow,nonblock bs=4096 count=1 status=none)" || continue
		[[ "$(stat -c '%F|%u|%h|%d:%i' "$entry" 2>/dev/null)" == "$meta" ]] || continue # replaced while read
		asked="" reason=""
		while IFS= read -r line; do
			case "$line" in
			node=*) asked="${line#node=}" ;;
			reason=*) reason="${line#reason=}" ;;
			esac
		done <<<"$content"
		[[ "$asked" == "$node" ]] || continue # another node's request: its own epilog reads it
		reason="$(printf '%s' "job $job_id: $reason" | LC_ALL=C tr -cd '[:print:]')"
		reason="${reason:0:200}"
		if [[ "$HEALTH_DRAIN" != 1 ]]; then # by hand: report, and leave the request to the real epilog
			echo "health: not drained (HEALTH_DRAIN=0): $node on request of job $job_id, reason: $reason"
			continue
		elif health_run "$SCONTROL" update nodename="$node" state=drain reason="$reason" >/dev/null; then
			echo "health: drained $node on request of job $job_id, reason: $reason"
		else
			echo "health: could not drain $node on request of job $job_id with $SCONTROL" >&2
		fi
		rm -f -- "$entry"
	done
}
drain_requested

health_run_checks
if ! health_drain_on_failure epilog; then
	exit 1
fi
exit 0
