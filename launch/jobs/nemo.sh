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
