#!/bin/bash
# shellcheck shell=bash
# NeMo Framework in a pyxis/enroot container: srun starts one task per GPU inside the image, which runs the
# framework's entry point (NEMO_ENTRY: bridge_pretrain.py for Megatron Bridge, nemo_pretrain.py for NeMo 2.4);
# both read the SLURM variables (no PMI needed). CONTAINER_SRUN is the launcher (srun with the pyxis plugin); point it
# elsewhere to test. The image's own environment wins inside the container (pyxis), so its LD_LIBRARY_PATH
# (CUDA, and the EFA/aws-ofi-nccl libraries of the image built by containers/nemo-efa) stays as built.
# Settings: WORKDIR, NPROC_PER_NODE, CONTAINER_IMAGE, CONTAINER_MOUNTS, NEMO_ENTRY, NEMO_CONFIG, RUN_DIR,
# EXIT_STATUS_FILE, CHECKPOINT_LAYOUT, REPLICA_FINAL_PASS_S.
job_start
mkdir -p "$RUN_DIR"
rm -f "$EXIT_STATUS_FILE" # a stale status from the last attempt must not decide this one
# torch.distributed's flight recorder: when a collective times out (the framework's process-group timeout), every live
# rank dumps its recent collectives to hang/nccl-trace-rank-<global rank>, the names torch's own reader
# (torch.distributed.flight_recorder) takes; a rank stopped in its tracks writes none. finish_job names those ranks'
# nodes (collective_timeout_suspects) and has them drained. Both variable names: torch reads the newer first.
rm -rf "$RUN_DIR/hang"
mkdir -p "$RUN_DIR/hang"
export TORCH_FR_BUFFER_SIZE="${TORCH_FR_BUFFER_SIZE:-2000}" TORCH_NCCL_TRACE_BUFFER_SIZE="${TORCH_NCCL_TRACE_BUFFER_SIZE:-2000}"
export TORCH_FR_DUMP_TEMP_FILE="$RUN_DIR/hang/nccl-trace-rank-" TORCH_NCCL_DEBUG_INFO_TEMP_FILE="$RUN_DIR/hang/nccl-trace-rank-"
export TORCH_NCCL_DUMP_ON_TIMEOUT=1
# shellcheck disable=SC2034 # read by finish_job (common.sh)
FLIGHT_RECORDER_RANKS_PER_NODE="$NPROC_PER_NODE"
MASTER_ADDR="$(first_node_addr)"
MASTER_PORT="$(free_port)"
export MASTER_ADDR MASTER_PORT
CONTAINER_SRUN="${CONTAINER_SRUN:-srun}"
replica_restore
replica_watch_start

# The allocation is whole nodes with one task each; the step asks for its GPU-count tasks per node explicitly.
run_step "$CONTAINER_SRUN" --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$((SLURM_JOB_NUM_NODES * NPROC_PER_NODE))" \
	--ntasks-per-node="$NPROC_PER_NODE" --kill-on-bad-exit=1 \
	--container-image="$CONTAINER_IMAGE" \
	--container-mounts="$CONTAINER_MOUNTS" \
	--container-workdir="$WORKDIR" \
	--no-container-mount-home \
	python "$WORKDIR/launch/jobs/$NEMO_ENTRY" --config "$NEMO_CONFIG"
step_rc=$?
replica_watch_stop
finish_job "$step_rc"
