#!/bin/bash
# shellcheck shell=bash
# NeuronX Distributed Training: one torchrun per node with NPROC_PER_NODE workers (one per NeuronCore), static
# rendezvous on the first node. NEURON_MODE=compile wraps a few steps in neuron_parallel_compile to fill the
# compile cache; NEURON_MODE=train runs the job, resuming from its last checkpoint.
# Settings: NEURON_MODE, NEURON_VENV, NXDT_DIR, NXDT_CONFIG_DIR, NXDT_CONFIG_NAME, NPROC_PER_NODE, MASTER_PORT,
# RUN_DIR, NXDT_OVERRIDES, WORKDIR, CHECKPOINT_LAYOUT, REPLICA_FINAL_PASS_S, LIVENESS_TOOL ("" in the compile job),
# LIVENESS_INTERVAL_S, LIVENESS_STALE_S.
job_start
mkdir -p "$RUN_DIR"
if [[ "$NEURON_MODE" == train ]]; then # the compile job saves no checkpoint
	replica_restore
	replica_watch_start
fi
# Each rank runs under launch/liveness.py: its heartbeat, and the first failure's snapshot of everyone's, tell
# finish_job which rank went silent when the runtime fails a stuck execution. A stale report must not decide this
# attempt.
if [[ -n "$LIVENESS_TOOL" ]]; then
	rm -rf "$RUN_DIR/hang"
	mkdir -p "$RUN_DIR/hang"
fi
export PATH="$NEURON_VENV/bin:/opt/aws/neuron/bin:$PATH"
MASTER_ADDR="$(first_node_addr)"
export MASTER_ADDR MASTER_PORT NXDT_DIR NXDT_CONFIG_DIR NXDT_CONFIG_NAME NPROC_PER_NODE RUN_DIR
export LIVENESS_TOOL LIVENESS_INTERVAL_S LIVENESS_STALE_S
export NXDT_OVERRIDES_LINE="${NXDT_OVERRIDES[*]}"
job_log "neuron devices on $(hostname): $(neuron-ls --json-output 2>/dev/null | grep -o '"neuron_device"' | grep -c . || true)"

COMPILE_PREFIX=""
[[ "$NEURON_MODE" == compile ]] && COMPILE_PREFIX="neuron_parallel_compile"
export COMPILE_PREFIX
# The node rank differs per node, so the torchrun command line is built inside each srun task. 32 workers per
# node open many files (graphs, checkpoints, the compile cache): NxDT's own launcher raises the limit the same way.
# shellcheck disable=SC2016 # expanded by the per-node shell, not here
NODE_COMMAND='ulimit -n 65535 || echo "$(hostname): could not raise the open-file limit to 65535 ($(ulimit -n))" >&2
exec $COMPILE_PREFIX torchrun --nproc_per_node "$NPROC_PER_NODE" --nnodes "$SLURM_NNODES" \
	--node_rank "$SLURM_NODEID" --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \
	${LIVENESS_TOOL:+"$LIVENESS_TOOL" run --dir "$RUN_DIR/hang" --interval "$LIVENESS_INTERVAL_S" \
		--stale-after "$LIVENESS_STALE_S" --} \
	"$NXDT_DIR/training_orchestrator.py" --config-path "$NXDT_CONFIG_DIR" --config-name "$NXDT_CONFIG_NAME" \
	$NXDT_OVERRIDES_LINE'
run_step srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --kill-on-bad-exit=1 --chdir="$NXDT_DIR" \
	bash -c "$NODE_COMMAND"
step_rc=$?
replica_watch_stop
finish_job "$step_rc"
