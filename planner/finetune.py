"""Fine-tuning's arithmetic for the planner (`llm-plan --finetune lora`, a job YAML's finetune: section). No torch.

LoRA (rank r on the job's target_modules of each block, the whole base frozen in bf16) changes three things
against full training, which is today's plan:
- state: the base keeps its bf16 weights only (2 bytes per parameter: no gradient, no fp32 master, no Adam moments);
  the adapters carry the full 16 bytes per parameter. A linear of in x out features gets r x (in + out) adapter
  parameters (the shapes are the model family's LoRA targets; a Llama block's seven: q, o: dim and the heads'
  width; k, v: dim + kv; gate, up: dim + ffn; down: ffn + dim), counted for the adapted linears only.
- activations: as in full training, plus each adapter's rank-r intermediate (bf16) per token.
- FLOPs: a linear costs 2 FLOPs per parameter and token forward, 2 for its input gradient and 2 for its weight
  gradient: 6 in all. Frozen, the weight gradient is skipped: 4 of 6, so backward is 2 instead of 4 FLOPs (half of
  full's backward) and the layer's step 2/3 of full's. Every base linear is frozen whichever are adapted
  (training/finetune/lora.py freezes all but the adapters), so the skip covers them all. Attention's score
  matmuls have no weights and keep their cost; the output head is frozen too (4 instead of 6 per parameter); the
  adapters add 6 per adapter parameter.
"""

from __future__ import annotations

from typing import Literal

from training.finetune.config import LORA_TARGETS
from training.models.args import ModelArgs
from training.models.families import family_named

Finetune = Literal["full", "lora"]
FINETUNE_MODES = ("full", "lora")


def linear_shapes(args: ModelArgs) -> dict[str, tuple[int, int]]:
    """(in, out) features of each linear LoRA may adapt in one block, by the Hugging Face name target_modules uses:
    the model family's own LoRA targets (training/models/<family>/family.py)."""
    return {target.hf_name: target.features(args) for target in family_named(args.flavor).lora_targets}


def lora_parameters_per_layer(args: ModelArgs, rank: int, targets: tuple[str, ...] = LORA_TARGETS) -> int:
    shapes = linear_shapes(args)
    return rank * sum(sum(shapes[name]) for name in targets)


def lora_parameters(args: ModelArgs, rank: int, targets: tuple[str, ...] = LORA_TARGETS) -> int:
    return args.n_layers * lora_parameters_per_layer(args, rank, targets)


def frozen_weight_gradient_flops_per_token(args: ModelArgs, per_layer_params: int) -> float:
    """The weight-gradient FLOPs LoRA skips per token: 2 per frozen block and output-head parameter."""
    return 2.0 * (args.n_layers * per_layer_params + args.dim * args.vocab_size)
