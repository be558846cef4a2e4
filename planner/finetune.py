"""Fine-tuning's arithmetic for the planner (`llm-plan --finetune lora`, a job YAML's finetune: section). No torch.

LoRA (rank r on every linear layer of each block, the base frozen in bf16) changes three things against full
training, which is today's plan:
- state: the base keeps its bf16 weights only (2 bytes per parameter: no gradient, no fp32 master, no Adam moments);
  the adapters carry the full 16 bytes per parameter. A linear of in x out features gets r x (in + out) adapter
  parameters, so a Llama block gets r x (9 dim + 2 kv + 3 ffn) (q, o: 2 dim each; k, v: dim + kv; gate, up:
  dim + ffn; down: ffn + dim).
- activations: as in full training, plus each adapter's rank-r intermediate (bf16) per token.
- FLOPs: a linear costs 2 FLOPs per parameter and token forward, 2 for its input gradient and 2 for its weight
  gradient: 6 in all. Frozen, the weight gradient is skipped: 4 of 6, so backward is 2 instead of 4 FLOPs (half of
  full's backward) and the layer's step 2/3 of full's. Attention's score matmuls have no weights and keep their
  cost; the output head is frozen too (4 instead of 6 per parameter); the adapters add 6 per adapter parameter.
"""

from __future__ import annotations

from typing import Literal

from training.models.args import ModelArgs

Finetune = Literal["full", "lora"]
FINETUNE_MODES = ("full", "lora")
DEFAULT_LORA_RANK = 16
ADAPTED_LINEARS = 7  # q, k, v, o, gate, up, down


def lora_parameters_per_layer(args: ModelArgs, rank: int) -> int:
    d, kv, f = args.dim, args.kv_heads * args.head_dim, args.ffn_dim
    return rank * (9 * d + 2 * kv + 3 * f)


def lora_parameters(args: ModelArgs, rank: int) -> int:
    return args.n_layers * lora_parameters_per_layer(args, rank)


def frozen_weight_gradient_flops_per_token(args: ModelArgs, per_layer_params: int) -> float:
    """The weight-gradient FLOPs LoRA skips per token: 2 per frozen block and output-head parameter."""
    return 2.0 * (args.n_layers * per_layer_params + args.dim * args.vocab_size)
