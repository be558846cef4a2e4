#!/bin/bash
# shellcheck shell=bash
# FSDP: one torchrun per node (srun), c10d rendezvous on a store this script serves on the first node (outliving
# every agent: launch/rendezvous_store.py says why), the trainer under it.
# Settings: WORKDIR, PYTHON, TORCHRUN, NPROC_PER_NODE, JOB_CONFIG, RUN_DIR, TRAIN_ARGS, SHUTDOWN_TIMEOUT_S,
# LIBRARY_DIRS.
job_start
prepend_library_dirs
mkdir -p "$RUN_DIR"
RDZV_ADDR="$(first_node_addr)"
RDZV_PORT="$(free_port)"
job_log "rendezvous at $RDZV_ADDR:$RDZV_PORT"
rm -f "$EXIT_STATUS_FILE" # a stale status from the last attempt must not decide this one

export PYTHONPATH="$WORKDIR${PYTHONPATH:+:$PYTHONPATH}"
store_ready="$RUN_DIR/.rendezvous-store.${SLURM_JOB_ID:-0}.ready"
rm -f "$store_ready"
"$PYTHON" -m launch.rendezvous_store --host "$RDZV_ADDR" --port "$RDZV_PORT" --ready-file "$store_ready" &
STORE_PID=$!
trap 'kill "$STORE_PID" 2>/dev/null; rm -f "$store_ready"' EXIT
until [[ -e "$store_ready" ]]; do
	if ! kill -0 "$STORE_PID" 2>/dev/null; then
		job_log "the rendezvous store did not start on $RDZV_ADDR:$RDZV_PORT"
		finish_job 1
	fi
	sleep 0.2
done

run_step srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --kill-on-bad-exit=1 --chdir="$WORKDIR" \
	"$TORCHRUN" \
	--nnodes "$SLURM_JOB_NUM_NODES" \
	--nproc_per_node "$NPROC_PER_NODE" \
	--rdzv_id "$SLURM_JOB_ID" \
	--rdzv_backend c10d \
	--rdzv_endpoint "$RDZV_ADDR:$RDZV_PORT" \
	--rdzv_conf is_host=false \
	--max-restarts 0 \
	--signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 \
	--shutdown-timeout "$SHUTDOWN_TIMEOUT_S" \
	-m training.train --config "$JOB_CONFIG" --run-dir "$RUN_DIR" "${TRAIN_ARGS[@]}"
finish_job "$?"
