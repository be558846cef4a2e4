#!/bin/bash
# shellcheck shell=bash
# NeMo 2 in a pyxis/enroot container: srun starts one task per GPU inside the image; Lightning reads the
# SLURM variables. CONTAINER_SRUN is the launcher (srun with the pyxis plugin); point it elsewhere to test.
# Settings: WORKDIR, NPROC_PER_NODE, CONTAINER_IMAGE, CONTAINER_MOUNTS, NEMO_CONFIG, RUN_DIR.
job_start
mkdir -p "$RUN_DIR"
MASTER_ADDR="$(first_node_addr)"
MASTER_PORT="$(free_port)"
export MASTER_ADDR MASTER_PORT
CONTAINER_SRUN="${CONTAINER_SRUN:-srun}"

run_step "$CONTAINER_SRUN" --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node="$NPROC_PER_NODE" --mpi=pmi2 \
	--kill-on-bad-exit=1 \
	--container-image="$CONTAINER_IMAGE" \
	--container-mounts="$CONTAINER_MOUNTS" \
	--container-workdir="$WORKDIR" \
	--no-container-mount-home \
	python "$WORKDIR/training/jobs/nemo_pretrain.py" --config "$NEMO_CONFIG"
finish_job "$?"
