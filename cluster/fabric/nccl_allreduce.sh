#!/bin/bash
# shellcheck shell=bash
# nccl-tests' all_reduce_perf across the job's nodes, one rank per GPU, between two samples of every node's EFA
# counters; then `python -m cluster.fabric check` decides (exit 0: passed, 1: failed).
# Settings: GPUS_PER_NODE, SRUN_MPI, TEST_ARGS. Environment, with its default:
#   NCCL_TESTS_DIR=/opt/nccl-tests/build   nccl-tests built with MPI=1 (all_reduce_perf)
#   OFI_NCCL_DIR=/opt/amazon/ofi-nccl      aws-ofi-nccl; its tuner plugin is used when found (NCCL_TUNER_PLUGIN wins)
#   NCCL_LIB_DIR=                          libnccl.so.2 nccl-tests was built against (the AMI has none), e.g.
#                                          /fsx/nccl-tests/nccl/lib, the env's wheel copied (docs/fabric-checks.md)
: "${NCCL_TESTS_DIR:=/opt/nccl-tests/build}" "${OFI_NCCL_DIR:=/opt/amazon/ofi-nccl}" "${NCCL_LIB_DIR:=}"
fabric_start
# NCCL finds the aws-ofi-nccl plugin and libfabric on the library path; NCCL_NET (set) fails the test without them.
export LD_LIBRARY_PATH="${NCCL_LIB_DIR:+$NCCL_LIB_DIR:}$OFI_NCCL_DIR/lib:/opt/amazon/efa/lib:/opt/amazon/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fabric_log "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

# The tuner library is in lib/ (Amazon Linux) or lib/<multiarch triplet>/ (Ubuntu).
if [[ -z "${NCCL_TUNER_PLUGIN:-}" ]]; then
	for candidate in "$OFI_NCCL_DIR"/lib/libnccl-ofi-tuner.so "$OFI_NCCL_DIR"/lib/*/libnccl-ofi-tuner.so; do
		if [[ -f "$candidate" ]]; then
			export NCCL_TUNER_PLUGIN="$candidate"
			break
		fi
	done
fi
fabric_log "NCCL tuner plugin: ${NCCL_TUNER_PLUGIN:-none found under $OFI_NCCL_DIR}"
# One debug log per rank (host.pid): the check reads which network and provider NCCL chose.
mkdir -p "$RESULT_DIR/nccl-debug"
export NCCL_DEBUG_FILE="$RESULT_DIR/nccl-debug/%h.%p.log"

fabric_sample_all_nodes before
OUTPUT="$RESULT_DIR/all_reduce_perf.out"
STEP=(srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node="$GPUS_PER_NODE" --mpi="$SRUN_MPI" --kill-on-bad-exit=1
	"$NCCL_TESTS_DIR/all_reduce_perf" "${TEST_ARGS[@]}")
fabric_log "step: ${STEP[*]}"
"${STEP[@]}" >"$OUTPUT" 2>&1
TEST_STATUS=$?
cat "$OUTPUT"
fabric_log "all_reduce_perf exited with status $TEST_STATUS"
fabric_sample_all_nodes after

fabric_check "$TEST_STATUS" "$OUTPUT" --nccl-debug-dir "$RESULT_DIR/nccl-debug"
exit $?
