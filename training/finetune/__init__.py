"""Fine-tuning: where a run's first weights come from (`init`), LoRA as a model converter (`lora`), the PEFT adapter
format and the merge into a full checkpoint (`peft_format`)."""
