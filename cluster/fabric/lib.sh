#!/bin/bash
# shellcheck shell=bash
# Shared by the fabric check job scripts (after their settings block): the log header, the nodes' addresses,
# the EFA counter sampler that runs on every node of the job, and the call to `python -m cluster.fabric check`.
#
# Settings it reads: CHECK_TOOL, INSTANCE_TYPE, RESULT_ROOT, PYTHON, WORKDIR, MIN_FRACTION ("" = the type's).
# Environment, with its default:
#   FABRIC_SYSFS_ROOT=/sys   each node's sysfs; a "%n" in it becomes the node's SLURM name (fixture trees)
set -uo pipefail # no -e: the counters are sampled and the check runs after a failed test too

: "${FABRIC_SYSFS_ROOT:=/sys}"
export FABRIC_SYSFS_ROOT
RESULT_DIR="$RESULT_ROOT/${SLURM_JOB_NAME:-fabric}-${SLURM_JOB_ID:-0}"

fabric_log() { echo "fabric[$(date -u +%FT%TZ)]: $*"; }

fabric_start() {
	fabric_log "job ${SLURM_JOB_ID:-?} (${SLURM_JOB_NAME:-?}): $CHECK_TOOL on ${SLURM_JOB_NUM_NODES:-?} x $INSTANCE_TYPE"
	fabric_log "nodes ${SLURM_JOB_NODELIST:-?}, batch host $(hostname); results in $RESULT_DIR"
	echo "---- environment (fabric, EFA, NCCL, Neuron) ----"
	env | LC_ALL=C sort | grep -E '^(FABRIC_|FI_|NCCL_|NEURON_|OFI_|XLA_|MALLOC_)' || true
	echo "---- end of environment ----"
	mkdir -p "$RESULT_DIR"
}

# The address (NodeAddr) of each of the job's nodes, one per line, in SLURM's order: the batch host first.
fabric_node_addrs() {
	local node addr
	while read -r node; do
		addr="$(scontrol show node -o "$node" | sed -n 's/.* NodeAddr=\([^ ]*\) .*/\1/p')"
		echo "${addr:-$node}"
	done < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
}

# fabric_sample_counters ROOT DEST: every EFA device's hardware counters under ROOT/class/infiniband, one
# "<device> <path below the device> <value>" line each (port 1's and the device's own), written whole to DEST.
fabric_sample_counters() {
	local root="$1" dest="$2" device file value
	{
		echo "# sysfs $root"
		for device in "$root"/class/infiniband/*; do
			[[ -d "$device" ]] || continue
			for file in "$device"/ports/1/hw_counters/* "$device"/hw_counters/*; do
				[[ -f "$file" && -r "$file" ]] || continue
				read -r value <"$file" || continue # no fork per file: a p5 has 32 devices of 35 counters
				printf '%s %s %s\n' "${device##*/}" "${file#"$device"/}" "$value"
			done
		done
	} >"$dest.tmp" && mv -f "$dest.tmp" "$dest"
}

# fabric_sample_all_nodes PHASE: one task per node samples that node into RESULT_DIR/counters-PHASE/<node>.txt.
fabric_sample_all_nodes() {
	local dir="$RESULT_DIR/counters-$1"
	mkdir -p "$dir"
	# shellcheck disable=SC2016 # expanded by each node's shell
	local node_command='node="${SLURMD_NODENAME:-$(hostname -s)}"
fabric_sample_counters "${FABRIC_SYSFS_ROOT//%n/$node}" "$1/$node.txt"'
	if ! srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --kill-on-bad-exit=1 \
		bash -c "$(declare -f fabric_sample_counters)
$node_command" fabric-sample "$dir"; then
		fabric_log "sampling the EFA counters ($1) failed on some node; the check reports which"
	fi
	fabric_log "EFA counters sampled ($1): $(find "$dir" -name '*.txt' | wc -l) of $SLURM_JOB_NUM_NODES nodes"
}

# fabric_check TEST_STATUS OUTPUT [CHECK ARGS...]: the verdict, into the log and RESULT_DIR/verdict.txt.
fabric_check() {
	local status="$1" output="$2"
	shift 2
	local extra=("$@")
	[[ -n "$MIN_FRACTION" ]] && extra+=(--min-fraction "$MIN_FRACTION")
	PYTHONPATH="$WORKDIR${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m cluster.fabric check \
		--tool "$CHECK_TOOL" --instance-type "$INSTANCE_TYPE" --nodes "$SLURM_JOB_NUM_NODES" --output "$output" \
		--before "$RESULT_DIR/counters-before" --after "$RESULT_DIR/counters-after" --test-exit-code "$status" \
		"${extra[@]}" | tee "$RESULT_DIR/verdict.txt"
	return "${PIPESTATUS[0]}"
}
