"""Fine-tuning after pretraining: the job config's finetune: section (config). Torch-free at import: the planner
and llm-submit read the section on the head node."""
