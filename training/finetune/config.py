"""The job config's `finetune:` section: full fine-tuning or LoRA from trained weights.

`init` is a Hugging Face directory (config.json and *.safetensors) or a run directory of ours (its latest committed
checkpoint, weights only; the optimizer and the step start fresh); left out, it is `model.hf_checkpoint`. LoRA's
target modules are Hugging Face's Llama names, so one section means the same adapters on every backend: the FSDP
trainer wraps those linears (training/finetune/lora.py) and Megatron Bridge's CanonicalLoRA adapts the same
projections (launch/bridge_finetune.py maps the names). No torch here: the planner and llm-submit read it on the
head node.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

# The linear layers of a Llama block by their Hugging Face names: LoRA's default is all of them.
HF_LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# LoRA's defaults, read by the trainer, Megatron Bridge's renderer and the planner (planner/finetune.py).
LORA_TARGETS = HF_LINEAR_MODULES
DEFAULT_LORA_RANK = 16


class LoraSection(BaseModel):
    """Low-rank adapters on the named linear layers: W x + (alpha / rank) B A dropout(x), A and B trained."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rank: PositiveInt = DEFAULT_LORA_RANK
    alpha: float = Field(default=32.0, gt=0.0)
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    target_modules: tuple[str, ...] = LORA_TARGETS

    @model_validator(mode="after")
    def _targets(self) -> LoraSection:
        if not self.target_modules:
            raise ValueError("finetune.lora.target_modules: is empty; name at least one linear layer")
        unknown = [name for name in self.target_modules if name not in HF_LINEAR_MODULES]
        if unknown:
            raise ValueError(
                f"finetune.lora.target_modules: {unknown[0]!r} names no linear layer of a Llama block "
                f"({', '.join(HF_LINEAR_MODULES)})"
            )
        repeated = sorted({name for name in self.target_modules if self.target_modules.count(name) > 1})
        if repeated:
            raise ValueError(f"finetune.lora.target_modules: {repeated} named more than once")
        return self


class FinetuneSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["full", "lora"]
    init: str | None = None  # None: model.hf_checkpoint (JobConfig.init_from)
    lora: LoraSection | None = None  # mode lora: these settings (defaults when absent)

    @model_validator(mode="after")
    def _lora_only_for_lora(self) -> FinetuneSection:
        if self.mode == "full" and self.lora is not None:
            raise ValueError("finetune.lora: is for finetune.mode 'lora', not 'full'; remove it or change the mode")
        return self

    @property
    def lora_settings(self) -> LoraSection | None:
        """The adapters' settings, or None for full fine-tuning."""
        return (self.lora or LoraSection()) if self.mode == "lora" else None
