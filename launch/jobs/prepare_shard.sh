#!/bin/bash
# shellcheck shell=bash
# One array task of a sharded prepare (llm-prepare-cluster): shard $SLURM_ARRAY_TASK_ID of $PLAN, with the node's
# cores (or WORKERS), unless its manifest is already complete. A task whose process dies (the OOM killer's SIGKILL,
# kill -9) fails with a line naming its shard; the merge job, which waits for every task (afterok), is then cancelled.
# Settings: PLAN, PYTHON, WORKDIR, WORKERS ("" for the node's cores), PROGRESS_EVERY_S.
export PYTHONPATH="$WORKDIR${PYTHONPATH:+:$PYTHONPATH}"
cd "$WORKDIR" || exit 1
shard="${SLURM_ARRAY_TASK_ID:?not an array task}"
workers="${WORKERS:-$(nproc)}"
echo "prepare: job ${SLURM_ARRAY_JOB_ID:-?}_${shard} on $(hostname): shard $shard of $PLAN, $workers workers"
"$PYTHON" -m training.prepare_shards shard --plan "$PLAN" --index "$shard" --workers "$workers" \
	--progress-every "$PROGRESS_EVERY_S"
rc=$?
if ((rc > 128)); then
	echo "error: shard $shard of $PLAN: its prepare process was killed by signal $((rc - 128)) (out of memory?); nothing of the shard is kept. Submit the same llm-prepare-cluster command again: complete shards are skipped" >&2
elif ((rc != 0)); then
	echo "error: shard $shard of $PLAN: prepare failed with exit $rc (the line above says why)" >&2
fi
exit "$rc"
