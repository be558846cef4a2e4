#!/bin/bash
# shellcheck shell=bash
# Neuron's nccom-test all-reduce across the job's nodes (one worker per NeuronCore), between two samples of every
# node's EFA counters; then `python -m cluster.fabric check` decides (exit 0: passed, 1: failed).
# nccom-test runs on the batch host (the first node) and starts the workers on every host itself.
# Settings: WORKERS_PER_NODE, NCCOM_ARGS, NCCOM_ITERS. Environment, with its default:
#   NEURON_BIN_DIR=/opt/aws/neuron/bin   aws-neuronx-tools (nccom-test)
: "${NEURON_BIN_DIR:=/opt/aws/neuron/bin}"
fabric_start

mapfile -t HOSTS < <(fabric_node_addrs)
ROOT_PORT="$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')"
export NEURON_RT_ROOT_COMM_ID="${HOSTS[0]}:$ROOT_PORT"

fabric_sample_all_nodes before
OUTPUT="$RESULT_DIR/nccom-test.out"
STEP=("$NEURON_BIN_DIR/nccom-test" -r "$((WORKERS_PER_NODE * SLURM_JOB_NUM_NODES))" -N "$SLURM_JOB_NUM_NODES"
	"${NCCOM_ARGS[@]}" allr --hosts "${HOSTS[@]}")
fabric_log "step: NEURON_RT_ROOT_COMM_ID=$NEURON_RT_ROOT_COMM_ID ${STEP[*]}"
"${STEP[@]}" >"$OUTPUT" 2>&1
TEST_STATUS=$?
cat "$OUTPUT"
fabric_log "nccom-test exited with status $TEST_STATUS"
fabric_sample_all_nodes after

fabric_check "$TEST_STATUS" "$OUTPUT" --iters "$NCCOM_ITERS"
exit $?
