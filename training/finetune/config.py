"""The job config's `finetune:` section: full fine-tuning or LoRA from a base checkpoint.

`init` is a Hugging Face directory (config.json and *.safetensors) or a run directory of ours (its latest committed
checkpoint). LoRA's target modules are Hugging Face's Llama names, so one section means the same adapters to every
backend: the FSDP trainer wraps those linears, and Megatron Bridge's CanonicalLoRA adapts the same projections
(launch/bridge.py maps the names). No torch here: the planner and llm-submit read it on the head node.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# The linear layers of a Llama block by their Hugging Face names: LoRA's default is all of them.
HF_LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class LoraSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rank: Annotated[int, Field(ge=1)] = 16
    alpha: Annotated[float, Field(gt=0.0)] = 32.0  # the update is scaled by alpha / rank
    dropout: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.0
    target_modules: list[str] = Field(default_factory=lambda: list(HF_LINEAR_MODULES), min_length=1)

    @field_validator("target_modules")
    @classmethod
    def _known_modules(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in HF_LINEAR_MODULES:
                raise ValueError(f"{name!r} names no linear layer of a Llama block ({', '.join(HF_LINEAR_MODULES)})")
        if len(set(names)) != len(names):
            raise ValueError(f"{names} names a module twice")
        return names


class FinetuneSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["full", "lora"]
    init: str  # an HF directory, or a run directory of ours
    lora: LoraSection = LoraSection()
