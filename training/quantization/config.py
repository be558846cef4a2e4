"""The job config's `float8:` section. No torch here: llm-submit reads it on the head node to refuse a recipe the
queue's GPUs cannot run before anything is queued.

Recipes (torchao's names): `tensorwise` scales each tensor by one factor (the fastest on Hopper; with FSDP2 the
weights are gathered in FP8), `rowwise` one factor per row (steadier loss, a little slower), `mxfp8` one power-of-two
factor per 32 elements (Blackwell's block-scaled tensor cores). `emulate` runs a recipe's rounding in high precision
on any device: the numerics of FP8 for tests on CPUs, not its speed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

Float8Recipe = Literal["off", "tensorwise", "rowwise", "mxfp8"]
FLOAT8_RECIPES: tuple[str, ...] = ("tensorwise", "rowwise", "mxfp8")
# The CUDA compute capability each recipe's kernels need: torch._scaled_mm's e4m3 GEMMs from Ada/Hopper (8.9),
# block-scaled MXFP8 GEMMs from Blackwell (10.0).
MIN_CAPABILITY: dict[str, tuple[int, int]] = {"tensorwise": (8, 9), "rowwise": (8, 9), "mxfp8": (10, 0)}


class Float8Section(BaseModel):
    """FP8 GEMMs in the transformer blocks' linear layers; embeddings, norms, attention scores and the output
    head stay in the mixed-precision dtype (as the planner's fp8 precision assumes, planner/job.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    recipe: Float8Recipe = "off"
    # tensorwise only: FSDP2 gathers the weights already cast to FP8 (half the bytes of bf16). None: on whenever the
    # model is sharded.
    fsdp_all_gather: bool | None = None
    emulate: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> Float8Section:
        if self.fsdp_all_gather and self.recipe != "tensorwise":
            raise ValueError(
                f"float8.fsdp_all_gather: true needs recipe 'tensorwise' (one scale per weight); recipe is "
                f"{self.recipe!r}, whose weights are gathered in the mixed-precision dtype"
            )
        if self.emulate and self.recipe == "off":
            raise ValueError("float8.emulate: true with recipe 'off' emulates nothing; set float8.recipe")
        return self

    @property
    def enabled(self) -> bool:
        return self.recipe != "off"


def capability_problem(
    section: Float8Section, device_type: str, capability: tuple[int, int] | None, name: str
) -> str | None:
    """Why this device cannot run the section's recipe (one line), or None. `capability` is CUDA's (major, minor)."""
    if not section.enabled or section.emulate:
        return None
    needed = MIN_CAPABILITY[section.recipe]
    wanted = (
        "Blackwell (B200, B300)" if section.recipe == "mxfp8" else "Ada, Hopper or Blackwell (L4, H100, H200, B200)"
    )
    if device_type != "cuda" or capability is None:
        return (
            f"float8.recipe: {section.recipe!r} needs FP8 tensor cores ({wanted}); this job runs on {name}. "
            "Set float8.emulate: true to test the numerics there (no speed-up), or recipe 'off'"
        )
    if capability < needed:
        return (
            f"float8.recipe: {section.recipe!r} needs compute capability {needed[0]}.{needed[1]}+ ({wanted}); "
            f"{name} is {capability[0]}.{capability[1]}"
        )
    return None
