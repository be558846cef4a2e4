#!/bin/bash
# shellcheck shell=bash
# The merge of a sharded prepare (llm-prepare-cluster): runs once every array task succeeded (afterok) and writes
# the merged dataset, checking each shard's manifest and sha256 on the way. Settings: PLAN, PYTHON, WORKDIR.
export PYTHONPATH="$WORKDIR${PYTHONPATH:+:$PYTHONPATH}"
cd "$WORKDIR" || exit 1
echo "prepare: job ${SLURM_JOB_ID:-?} on $(hostname): merging the shards of $PLAN"
exec "$PYTHON" -m training.prepare_shards merge --plan "$PLAN"
