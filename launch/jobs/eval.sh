#!/bin/bash
# shellcheck shell=bash
# Evaluation (training.evaluate): one process on one node scores committed checkpoints with lm-eval.
# With TRAIN_JOB set it watches that training job from a node of its own (sbatch --dependency=after: it starts once
# training has started): each pass scores the checkpoints now due (--every-steps; a scored step is skipped), and the
# pass after the training job has left the queue also scores its last checkpoint (--final), then the job ends.
# Training never waits for it: the two share only the run directory, which the trainer writes atomically.
# Settings: WORKDIR, PYTHON, EVAL_ARGS, EVAL_TASKS, TRAIN_JOB ("" for one pass), POLL_S; for a Megatron Bridge run
# also BRIDGE_HF_CONFIG, BRIDGE_EXPORT_DIR, BRIDGE_EXPORT_CODE, CONTAINER_IMAGE and CONTAINER_MOUNTS: its latest
# checkpoint is first exported with Megatron Bridge's own converter in the NeMo container (where Bridge and
# Transformer Engine are), then scored like any HF directory.
job_start
export PYTHONPATH="$WORKDIR${PYTHONPATH:+:$PYTHONPATH}"
cd "$WORKDIR" || exit 1

if [[ -n "$BRIDGE_HF_CONFIG" ]]; then
	job_log "exporting the latest checkpoint of $RUN_DIR with Megatron Bridge's converter"
	rm -rf "$BRIDGE_EXPORT_DIR.partial"
	run_step srun --nodes=1 --ntasks=1 --container-image="$CONTAINER_IMAGE" --container-mounts="$CONTAINER_MOUNTS" \
		--no-container-mount-home python -c "$BRIDGE_EXPORT_CODE" \
		"$BRIDGE_HF_CONFIG" "$RUN_DIR/checkpoints" "$BRIDGE_EXPORT_DIR.partial" || exit
	cp "$RUN_DIR"/tokenizer/tokenizer*.json "$BRIDGE_EXPORT_DIR.partial/" || exit
	rm -rf "$BRIDGE_EXPORT_DIR"
	mv "$BRIDGE_EXPORT_DIR.partial" "$BRIDGE_EXPORT_DIR" || exit
fi

training_active() {
	local state
	state="$(squeue -h -j "$TRAIN_JOB" -o %T 2>/dev/null)"
	[[ "$state" =~ ^(PENDING|RUNNING|CONFIGURING|COMPLETING|REQUEUED|REQUEUE_HOLD|REQUEUE_FED|RESIZING|SUSPENDED)$ ]]
}

if [[ -z "$TRAIN_JOB" ]]; then
	run_step "$PYTHON" -m training.evaluate "${EVAL_ARGS[@]}" --tasks "$EVAL_TASKS"
	rc=$?
	job_log "evaluation finished with exit $rc"
	exit "$rc"
fi
job_log "scoring the checkpoints of job $TRAIN_JOB as they are committed"
while true; do
	final=()
	training_active || final=(--final)
	run_step "$PYTHON" -m training.evaluate "${EVAL_ARGS[@]}" --tasks "$EVAL_TASKS" "${final[@]}"
	rc=$?
	if ((rc != 0)); then
		job_log "evaluation pass failed with exit $rc"
		exit "$rc"
	fi
	if ((${#final[@]})); then
		job_log "job $TRAIN_JOB has left the queue; its checkpoints are scored"
		exit 0
	fi
	sleep "$POLL_S"
done
