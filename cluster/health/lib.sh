# shellcheck shell=bash
# Node health checks shared by prolog.sh and epilog.sh. Sourced, never executed.
#
# Every root, tool and threshold comes from the environment so the same checks run on a trn1/p5 node,
# on the local SLURM cluster and against fixture trees in the tests:
#   HEALTH_CONFIG                 file of KEY=value lines (rendered by `python -m cluster.health.facts`),
#                                 read first; variables already set in the environment win
#   HEALTH_EXPECTED_GPUS          GPUs the instance type has (0: skip the GPU checks)
#   HEALTH_EXPECTED_NEURON        Neuron devices (Trainium chips) the instance type has (0: skip)
#   HEALTH_EXPECTED_EFA           EFA interfaces (0: skip)
#   HEALTH_FSX_PATH               shared file system to check ("" skips), HEALTH_MIN_FSX_FREE_GIB
#   HEALTH_SCRATCH_PATH           node-local scratch ("" skips), HEALTH_MIN_SCRATCH_FREE_GIB
#   HEALTH_SYSFS_ROOT=/sys        HEALTH_DEV_ROOT=/dev
#   NVIDIA_SMI, NEURON_LS         the tools (default: found on PATH; absent: fall back to /dev and sysfs)
#   SCONTROL=scontrol             used to drain the node
#   HEALTH_TIMEOUT_S=15           a tool that hangs (nvidia-smi on a wedged GPU, df on a hung Lustre) fails
#   HEALTH_DRAIN=1                0: report only (for running the checks by hand)
#   HEALTH_USER_DIRS              parents (space-separated; enroot's on a GPU node) in which the prolog makes the
#                                 job user's own user-<uid>, mode 700 ("" makes none)
#   HEALTH_DRAIN_REQUESTS         the spool of jobs' drain requests the epilog reads (default
#                                 $HEALTH_FSX_PATH/.slurm/drain-requests; "" reads none)

# SLURM runs prolog/epilog with no PATH at all (ParallelCluster installs SLURM under /opt/slurm).
export PATH="${PATH:+$PATH:}/opt/slurm/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

HEALTH_FAILURES=()

health_load_config() {
	local file="${HEALTH_CONFIG:-/etc/llm-health/health.env}"
	[[ -r "$file" ]] || return 0
	local line key value
	local -A from_file=()
	while IFS= read -r line || [[ -n "$line" ]]; do
		[[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
		if [[ ! "$line" =~ ^([A-Z_][A-Z0-9_]*)=(.*)$ ]]; then
			echo "health: ignoring malformed line in $file: $line" >&2
			continue
		fi
		key="${BASH_REMATCH[1]}"
		value="${BASH_REMATCH[2]}"
		# Strip one level of quotes; the file is data, never evaluated.
		[[ "$value" =~ ^\"(.*)\"$ || "$value" =~ ^\'(.*)\'$ ]] && value="${BASH_REMATCH[1]}"
		# The environment wins over the file; within the file the last line wins.
		if [[ -z "${!key+set}" || -n "${from_file[$key]:-}" ]]; then
			printf -v "$key" '%s' "$value"
			export "${key?}"
			from_file[$key]=1
		fi
	done <"$file"
}

health_defaults() {
	: "${HEALTH_EXPECTED_GPUS:=0}" "${HEALTH_EXPECTED_NEURON:=0}" "${HEALTH_EXPECTED_EFA:=0}"
	: "${HEALTH_FSX_PATH:=}" "${HEALTH_MIN_FSX_FREE_GIB:=0}"
	: "${HEALTH_SCRATCH_PATH:=}" "${HEALTH_MIN_SCRATCH_FREE_GIB:=0}"
	: "${HEALTH_SYSFS_ROOT:=/sys}" "${HEALTH_DEV_ROOT:=/dev}"
	: "${HEALTH_TIMEOUT_S:=15}" "${HEALTH_DRAIN:=1}" "${SCONTROL:=scontrol}" "${HEALTH_USER_DIRS:=}"
	: "${HEALTH_DRAIN_REQUESTS=${HEALTH_FSX_PATH:+$HEALTH_FSX_PATH/.slurm/drain-requests}}"
	if [[ -z "${NVIDIA_SMI+set}" ]]; then NVIDIA_SMI="$(command -v nvidia-smi || true)"; fi
	if [[ -z "${NEURON_LS+set}" ]]; then NEURON_LS="$(command -v neuron-ls || true)"; fi
	local name
	for name in HEALTH_EXPECTED_GPUS HEALTH_EXPECTED_NEURON HEALTH_EXPECTED_EFA HEALTH_MIN_FSX_FREE_GIB \
		HEALTH_MIN_SCRATCH_FREE_GIB HEALTH_TIMEOUT_S; do
		if [[ ! "${!name}" =~ ^[0-9]+$ ]]; then
			health_fail "config: $name=${!name} is not a non-negative integer"
			printf -v "$name" '%s' 0
		fi
	done
}

health_ok() { echo "health: ok   $*"; }

health_fail() {
	echo "health: FAIL $*"
	HEALTH_FAILURES+=("$*")
}

# Runs a tool with the timeout; prints its stdout. Non-zero status when it fails or hangs.
health_run() {
	timeout --kill-after=2 "$HEALTH_TIMEOUT_S" "$@" 2>/dev/null
}

health_count_glob() {
	local pattern="$1" count=0 entry
	for entry in $pattern; do
		[[ -e "$entry" ]] && count=$((count + 1))
	done
	echo "$count"
}

check_gpus() {
	local expected="$HEALTH_EXPECTED_GPUS"
	((expected > 0)) || return 0
	local count source
	if [[ -n "$NVIDIA_SMI" ]]; then
		local listing
		if ! listing="$(health_run "$NVIDIA_SMI" --query-gpu=index --format=csv,noheader)"; then
			health_fail "gpu: $NVIDIA_SMI failed or hung (driver not loaded or a GPU is wedged)"
			return 0
		fi
		count="$(grep -c '[0-9]' <<<"$listing" || true)"
		source="nvidia-smi"
	else
		count="$(health_count_glob "$HEALTH_DEV_ROOT/nvidia[0-9]*")"
		source="$HEALTH_DEV_ROOT/nvidia*"
	fi
	if ((count != expected)); then
		health_fail "gpu count $count, expected $expected ($source)"
	else
		health_ok "gpu count $count ($source)"
	fi
}

check_gpu_ecc() {
	((HEALTH_EXPECTED_GPUS > 0)) && [[ -n "$NVIDIA_SMI" ]] || return 0
	local report
	if ! report="$(health_run "$NVIDIA_SMI" --query-gpu=index,ecc.errors.uncorrected.volatile.total \
		--format=csv,noheader,nounits)"; then
		health_fail "gpu ecc: $NVIDIA_SMI failed or hung"
		return 0
	fi
	local index errors bad=0
	while IFS=', ' read -r index errors; do
		[[ -n "$index" ]] || continue
		# "[N/A]" means ECC reporting is off on that GPU: nothing to count.
		if [[ "$errors" =~ ^[0-9]+$ ]] && ((errors > 0)); then
			health_fail "gpu $index: $errors uncorrected ECC errors (volatile)"
			bad=1
		fi
	done <<<"$report"
	((bad)) || health_ok "gpu ecc: no uncorrected errors"
}

check_neuron() {
	local expected="$HEALTH_EXPECTED_NEURON"
	((expected > 0)) || return 0
	local count source
	if [[ -n "$NEURON_LS" ]]; then
		local listing
		if ! listing="$(health_run "$NEURON_LS" --json-output)"; then
			health_fail "neuron: $NEURON_LS failed or hung (driver not loaded?)"
			return 0
		fi
		count="$(grep -o '"neuron_device"' <<<"$listing" | grep -c . || true)"
		source="neuron-ls"
	else
		count="$(health_count_glob "$HEALTH_DEV_ROOT/neuron[0-9]*")"
		source="$HEALTH_DEV_ROOT/neuron*"
	fi
	if ((count != expected)); then
		health_fail "neuron device count $count, expected $expected ($source)"
	else
		health_ok "neuron device count $count ($source)"
	fi
}

check_neuron_ecc() {
	((HEALTH_EXPECTED_NEURON > 0)) || return 0
	local device counter value name bad=0
	for device in "$HEALTH_SYSFS_ROOT"/devices/virtual/neuron_device/neuron[0-9]*; do
		[[ -d "$device" ]] || continue
		for name in mem_ecc_uncorrected sram_ecc_uncorrected; do
			counter="$device/stats/hardware/$name"
			# The driver exposes each counter as a directory holding `total` (and `present`).
			[[ -d "$counter" ]] && counter="$counter/total"
			[[ -r "$counter" ]] || continue
			value="$(<"$counter")"
			if [[ "$value" =~ ^[0-9]+$ ]] && ((value > 0)); then
				health_fail "${device##*/}: $value ${name//_/ } errors"
				bad=1
			fi
		done
	done
	((bad)) || health_ok "neuron ecc: no uncorrected errors"
}

check_efa() {
	local expected="$HEALTH_EXPECTED_EFA"
	((expected > 0)) || return 0
	local class="$HEALTH_SYSFS_ROOT/class/infiniband"
	local count down=() device state
	count="$(health_count_glob "$class/*")"
	for device in "$class"/*; do
		[[ -r "$device/ports/1/state" ]] || continue
		state="$(<"$device/ports/1/state")"
		[[ "$state" == *ACTIVE* ]] || down+=("${device##*/}")
	done
	if ((count != expected)); then
		health_fail "efa count $count, expected $expected ($class)"
	elif ((${#down[@]} > 0)); then
		health_fail "efa port not ACTIVE on ${down[*]}"
	else
		health_ok "efa count $count"
	fi
}

# check_free_space LABEL PATH MIN_GIB
check_free_space() {
	local label="$1" path="$2" min_gib="$3"
	[[ -n "$path" ]] || return 0
	if [[ ! -d "$path" ]]; then
		health_fail "$label: $path is missing (not mounted?)"
		return 0
	fi
	local line avail_kib
	if ! line="$(health_run df -Pk "$path" | tail -n 1)"; then
		health_fail "$label: df $path failed or hung"
		return 0
	fi
	avail_kib="$(awk '{print $4}' <<<"$line")"
	if [[ ! "$avail_kib" =~ ^[0-9]+$ ]]; then
		health_fail "$label: cannot read free space of $path"
		return 0
	fi
	local avail_gib=$((avail_kib / 1048576))
	if ((avail_gib < min_gib)); then
		health_fail "$label: $path has ${avail_gib} GiB free, below ${min_gib} GiB"
	else
		health_ok "$label: $path ${avail_gib} GiB free"
	fi
}

# The cheap invariants both scripts check.
health_run_checks() {
	check_gpus
	check_gpu_ecc
	check_neuron
	check_neuron_ecc
	check_efa
	check_free_space fsx "$HEALTH_FSX_PATH" "$HEALTH_MIN_FSX_FREE_GIB"
	check_free_space scratch "$HEALTH_SCRATCH_PATH" "$HEALTH_MIN_SCRATCH_FREE_GIB"
}

# Drains this node with the failures as the reason; returns 1 when there were failures.
health_drain_on_failure() {
	local stage="$1"
	((${#HEALTH_FAILURES[@]} == 0)) && return 0
	local reason
	reason="health-$stage: $(printf '%s; ' "${HEALTH_FAILURES[@]}")"
	reason="${reason%; }"
	# scontrol keeps reasons short in listings; the full text stays in the slurmd log.
	reason="${reason:0:200}"
	if [[ "$HEALTH_DRAIN" == 1 && -n "${SLURMD_NODENAME:-}" ]]; then
		# A job whose prolog failed still runs the epilog: keep the first health reason, it names the cause.
		local current
		current="$(health_run "$SCONTROL" show node "$SLURMD_NODENAME" || true)"
		if [[ "$current" =~ State=[A-Z+_]*DRAIN && "$current" =~ Reason=(health-[^[]*) ]]; then
			echo "health: $SLURMD_NODENAME already drained: ${BASH_REMATCH[1]% }"
			return 1
		fi
		if ! health_run "$SCONTROL" update nodename="$SLURMD_NODENAME" state=drain reason="$reason" >/dev/null; then
			echo "health: could not drain $SLURMD_NODENAME with $SCONTROL" >&2
		fi
		echo "health: drained ${SLURMD_NODENAME}: $reason"
	else
		echo "health: not drained (HEALTH_DRAIN=0 or not under SLURM): $reason"
	fi
	return 1
}

# ----- The job's private scratch, $HEALTH_SCRATCH_PATH/slurm-<job id> (prolog makes it, epilog removes it) -----
# Root makes it in a directory every user may write (ParallelCluster's /scratch is 1777), so anyone may have put
# something at that name before the job existed: a link to a root directory, a directory or a file of their own.
# Nothing found there is followed or reused: it is removed as the entry it is (rm never follows a link it is given,
# and walks a directory without following the links inside), the directory is made by mkdir without -p (it fails
# rather than reuses) with mode 700, then given to the job's user with chown -h. Once made it is root's in a parent
# that is sticky (or that users cannot write), so nobody else can swap it before the chown.
HEALTH_SCRATCH_ATTEMPTS=3 # someone who re-creates the entry between rm and mkdir this often gets the node drained

# 0 when the scratch parent keeps users from replacing root's entries: root's, and sticky or not writable by others.
health_scratch_parent_is_safe() {
	local owner_mode owner mode
	if ! owner_mode="$(stat -L -c '%u %a' "$HEALTH_SCRATCH_PATH" 2>&1)"; then
		health_fail "scratch: cannot stat $HEALTH_SCRATCH_PATH: ${owner_mode##*: }"
		return 1
	fi
	owner="${owner_mode%% *}" mode="${owner_mode#* }"
	if [[ "$owner" != 0 ]] || (((8#$mode & 8#022) && !(8#$mode & 8#1000))); then
		health_fail "scratch: $HEALTH_SCRATCH_PATH is not root's, or others may write it without the sticky bit (owner $owner, mode $mode); no job scratch"
		return 1
	fi
}

health_make_job_scratch() {
	local job="${SLURM_JOB_ID:-}" uid="${SLURM_JOB_UID:-}" gid="${SLURM_JOB_GID:-${SLURM_JOB_UID:-}}"
	local scratch attempt found="" error
	[[ -n "$HEALTH_SCRATCH_PATH" && -d "$HEALTH_SCRATCH_PATH" && "$job" =~ ^[0-9]+$ ]] || return 0
	health_scratch_parent_is_safe || return 1
	scratch="$HEALTH_SCRATCH_PATH/slurm-$job"
	for ((attempt = 1; attempt <= HEALTH_SCRATCH_ATTEMPTS; attempt++)); do
		if [[ -e "$scratch" || -L "$scratch" ]]; then
			found="$(stat -c '%F of uid %u' "$scratch" 2>/dev/null || echo 'gone')"
			echo "health: scratch: removing what was at $scratch before the job: a $found"
			if ! error="$(rm -rf --one-file-system -- "$scratch" 2>&1)"; then # a mount inside, say
				health_fail "scratch: cannot remove the $found at $scratch: $(head -n 1 <<<"${error#rm: }")"
				return 1
			fi
		fi
		if error="$(mkdir -m 700 -- "$scratch" 2>&1)"; then
			if [[ "$uid" =~ ^[0-9]+$ && "$gid" =~ ^[0-9]+$ ]] && ! chown -h -- "$uid:$gid" "$scratch"; then
				health_fail "scratch: cannot give $scratch to uid $uid"
				return 1
			fi
			echo "health: scratch: made $scratch (mode 700, owner uid ${uid:-0})"
			return 0
		fi
		if [[ ! -e "$scratch" && ! -L "$scratch" ]]; then # not a race: the file system refused
			health_fail "scratch: cannot make $scratch: ${error##*: }"
			return 1
		fi
	done
	found="$(stat -c '%F of uid %u' "$scratch" 2>/dev/null || echo 'gone')"
	health_fail "scratch: $scratch was put back $HEALTH_SCRATCH_ATTEMPTS times while the prolog replaced it (last: a $found)"
	return 1
}

# Whatever is at the job's scratch name now (the job's user may have replaced the directory by a link) is removed
# as that entry, never through it.
health_remove_job_scratch() {
	local job="${SLURM_JOB_ID:-}" scratch
	[[ -n "$HEALTH_SCRATCH_PATH" && "$job" =~ ^[0-9]+$ ]] || return 0
	scratch="$HEALTH_SCRATCH_PATH/slurm-$job"
	[[ -e "$scratch" || -L "$scratch" ]] || return 0
	rm -rf --one-file-system -- "$scratch"
	echo "health: removed $scratch"
}

# ----- Per-user directories, <parent>/user-<uid> for each parent in $HEALTH_USER_DIRS (enroot's runtime, data, cache
# and temporary paths): made by the prolog, kept across jobs. The parents are root's and writable by root alone, so
# no user can make another's directory first; what is found at the name anyway (a node laid out before, a stray
# entry) is kept only when it is a directory of the job's uid and gid with mode 700, otherwise removed as the entry it
# is (never followed) and made anew with mkdir without -p and chown -h, as the job scratch is.
# 0 when $1 is a directory (not a link) of root's that no one else may write; otherwise says why and fails.
health_root_only_dir() {
	local owner_mode owner mode
	if ! owner_mode="$(stat -c '%u %a %F' -- "$1" 2>&1)"; then
		health_fail "user dirs: cannot stat $1: ${owner_mode##*: }"
		return 1
	fi
	read -r owner mode _ <<<"$owner_mode"
	if [[ "$owner" != 0 || "$owner_mode" != *" directory" ]] || ((8#$mode & 8#022)); then
		health_fail "user dirs: $1 is not root's, or others may write it (owner $owner, mode $mode); no user dirs"
		return 1
	fi
}

health_make_user_dirs() {
	local uid="${SLURM_JOB_UID:-}" gid="${SLURM_JOB_GID:-${SLURM_JOB_UID:-}}" parent dir found error
	[[ -n "$HEALTH_USER_DIRS" && "$uid" =~ ^[0-9]+$ && "$gid" =~ ^[0-9]+$ ]] || return 0
	for parent in $HEALTH_USER_DIRS; do
		# The parent's own directory too: whoever may write it may swap the parent for a link after the check.
		health_root_only_dir "$(dirname -- "$parent")" || return 1
		if [[ ! -e "$parent" && ! -L "$parent" ]]; then # /run is a tmpfs: gone after a reboot
			if ! error="$(mkdir -m 0755 -- "$parent" 2>&1)"; then
				health_fail "user dirs: cannot make $parent: ${error##*: }"
				return 1
			fi
			echo "health: user dirs: made $parent (root, mode 755)"
		fi
		health_root_only_dir "$parent" || return 1
	done
	for parent in $HEALTH_USER_DIRS; do
		dir="$parent/user-$uid"
		if [[ "$(stat -c '%F %u %g %a' "$dir" 2>/dev/null)" == "directory $uid $gid 700" ]]; then
			continue
		fi
		if [[ -e "$dir" || -L "$dir" ]]; then
			found="$(stat -c '%F of uid %u' "$dir" 2>/dev/null || echo 'gone')"
			echo "health: user dirs: removing what was at $dir: a $found"
			if ! error="$(rm -rf --one-file-system -- "$dir" 2>&1)"; then
				health_fail "user dirs: cannot remove the $found at $dir: $(head -n 1 <<<"${error#rm: }")"
				return 1
			fi
		fi
		if ! error="$(mkdir -m 700 -- "$dir" 2>&1)" || ! chown -h -- "$uid:$gid" "$dir"; then
			health_fail "user dirs: cannot make $dir: ${error##*: }"
			return 1
		fi
		echo "health: user dirs: made $dir (mode 700, owner uid $uid)"
	done
}
