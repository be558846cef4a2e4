"""FP8 training of the blocks' linear layers with torchao, applied on the meta device before parallelize.

torchao swaps each converted layer's matmuls for scaled FP8 ones (dynamic scaling: every scale comes from the
current tensor's absolute maximum, so no scale history is kept and a resumed run computes exactly what an
uninterrupted one would). Parameter names and shapes do not change: checkpoints, exports and fine-tuning read the
same weights with or without FP8, and a run can switch recipe across a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import nn

from training.config import ConfigError
from training.quantization.config import Float8Section, capability_problem

log = logging.getLogger(__name__)

# torchao's FP8 GEMMs need both dimensions of a weight to be multiples of 16 (torch._scaled_mm's layout), MXFP8
# its reduction dimension a multiple of the 32-element scaling block.
_ALIGNMENT = {"tensorwise": 16, "rowwise": 16, "mxfp8": 32}


@dataclass(frozen=True)
class Float8Training:
    """What was converted, and the per-step work it brings."""

    recipe: str
    converted: tuple[str, ...]
    kept: tuple[str, ...]  # linear layers of the blocks left in high precision (misaligned shapes)
    precompute_scales: bool  # tensorwise FP8 all-gather: one all-reduce for every weight's scale per step

    def after_optimizer_step(self, model: nn.Module) -> None:
        """The next step's weight scales, all in one collective (else each FSDP gather computes its own)."""
        if self.precompute_scales:
            from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

            precompute_float8_dynamic_scale_for_fsdp(model)


def device_capability(device: torch.device) -> tuple[tuple[int, int] | None, str]:
    """(CUDA compute capability or None, a name for messages)."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return (major, minor), torch.cuda.get_device_name(device)
    return None, f"a {device.type.upper()}"


def apply_float8(
    model: nn.Module, section: Float8Section, device: torch.device, sharded: bool
) -> Float8Training | None:
    """Convert `model.layers`' linear layers in place (the model is still on the meta device); None when off.
    Raises ConfigError (one line) where the device has no FP8 tensor cores for the recipe and emulate is off."""
    if not section.enabled:
        return None
    capability, name = device_capability(device)
    problem = capability_problem(section, device.type, capability, name)
    if problem is not None:
        raise ConfigError([problem])
    if device.type != "cuda":  # torchao warns at import that its CUDA kernels do not load: true, and moot here
        logging.getLogger("torchao").setLevel(logging.ERROR)
    layers = model.get_submodule("layers")
    alignment = _ALIGNMENT[section.recipe]
    converted: list[str] = []
    kept: list[str] = []

    def in_blocks(module: nn.Module, fqn: str) -> bool:
        """torchao's filter: a linear layer of a transformer block whose shape its kernels take."""
        if not isinstance(module, nn.Linear) or not fqn:
            return False
        if module.in_features % alignment or module.out_features % alignment:
            kept.append(fqn)
            return False
        converted.append(fqn)
        return True

    all_gather = section.fsdp_all_gather if section.fsdp_all_gather is not None else sharded
    all_gather = all_gather and section.recipe == "tensorwise" and sharded
    if section.recipe == "mxfp8":
        _convert_mxfp8(layers, section.emulate, in_blocks)
    else:
        _convert_float8(layers, section, all_gather, in_blocks)
    if not converted:
        raise ConfigError([f"float8.recipe: {section.recipe!r} found no linear layer of model.layers it can convert"])
    if kept:
        log.warning("float8: %d linear layers kept in high precision (shapes not multiples of %d): %s",
                    len(kept), alignment, ", ".join(kept[:4]))  # fmt: skip
    log.info("float8: %s on %d linear layers%s%s", section.recipe, len(converted),
             ", weights gathered in FP8" if all_gather else "", " (emulated)" if section.emulate else "")  # fmt: skip
    # dict.fromkeys: in order, once each, however often torchao asked the filter
    return Float8Training(
        section.recipe, tuple(dict.fromkeys(converted)), tuple(dict.fromkeys(kept)), precompute_scales=all_gather
    )


def _convert_float8(
    layers: nn.Module, section: Float8Section, all_gather: bool, keep: Callable[[nn.Module, str], bool]
) -> None:
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    config = replace(
        Float8LinearConfig.from_recipe_name(section.recipe),
        enable_fsdp_float8_all_gather=all_gather,
        emulate=section.emulate,
    )
    convert_to_float8_training(layers, config=config, module_filter_fn=keep)


def _convert_mxfp8(layers: nn.Module, emulate: bool, keep: Callable[[nn.Module, str], bool]) -> None:
    from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig, MXFP8TrainingRecipe
    from torchao.quantization import quantize_

    recipe = MXFP8TrainingRecipe.MXFP8_EMULATED_RCEIL if emulate else MXFP8TrainingRecipe.MXFP8_RCEIL
    quantize_(layers, config=MXFP8TrainingOpConfig.from_recipe(recipe), filter_fn=keep)


def plain_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """The weight inside torchao's wrapper subclasses (FP8 all-gather, MXFP8 training weights), in a DTensor as it
    is sharded: checkpoints hold plain tensors, so exports, evaluation and bf16 runs load them without torchao (and
    DCP's weights-only loader takes them). The result shares storage, so a load in place reaches the weight."""
    from torch.distributed.tensor import DTensor

    if isinstance(tensor, DTensor):
        local = tensor._local_tensor
        inner = _unwrapped(local)
        if inner is local:
            return tensor
        return DTensor.from_local(
            inner, tensor.device_mesh, tensor.placements, shape=tensor.shape, stride=tensor.stride(), run_check=False
        )
    return _unwrapped(tensor)


def _unwrapped(tensor: torch.Tensor) -> torch.Tensor:
    if not type(tensor).__module__.startswith("torchao.") or not hasattr(tensor, "__tensor_flatten__"):
        return tensor
    names, _ = tensor.__tensor_flatten__()  # the wrapped weight first (torchao's wrappers hold one plus metadata)
    inner = getattr(tensor, names[0])
    return inner if isinstance(inner, torch.Tensor) else tensor
