"""Fine-tuning after pretraining: the job config's finetune: section (`config`, torch-free: the planner and
llm-submit read it on the head node), where a run's first weights come from (`init`), LoRA as a model converter
(`lora`), the PEFT adapter format and the merge into a full checkpoint (`peft_format`)."""
