#!/bin/bash
# shellcheck shell=bash
# Evaluation (training.evaluate): one process on one node scores committed checkpoints with lm-eval.
# With TRAIN_JOB set it watches that training job from a node of its own (sbatch --dependency=after: it starts once
# training has started): each pass scores the checkpoints now due (--every-steps; a scored step is skipped), and the
# pass after the training job has left the queue also scores its last checkpoint (--final), then the job ends.
# Training never waits for it: the two share only the run directory, which the trainer writes atomically.
# Settings: WORKDIR, PYTHON, EVAL_ARGS, EVAL_TASKS, TRAIN_JOB ("" for one pass), POLL_S.
job_start
export PYTHONPATH="$WORKDIR${PYTHONPATH:+:$PYTHONPATH}"
cd "$WORKDIR" || exit 1

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
