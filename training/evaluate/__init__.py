"""Evaluation of our checkpoints with lm-evaluation-harness (what an `llm-eval` job runs on a node).

`python -m training.evaluate` exports committed checkpoints to HF format (training.export), scores them with
lm-eval's Python API on local task files, and writes lm-eval's results JSON, a table and a plot into the run
directory (docs/evaluation.md). `python -m training.evaluate.task_data` builds the shipped tasks' data.
"""
