"""The decoder-only transformer: embeddings, a stack of the family's blocks, a final norm and the LM head.

No parallelism here: training/parallel/ wraps `layers[i]` and the root with FSDP2, checkpointing and compile.
"""

from __future__ import annotations

from typing import Protocol, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from training.models.args import ModelArgs
from training.models.attention import document_mask
from training.models.families import family_named
from training.models.family import load
from training.models.init import WeightInit
from training.models.loss import IGNORE_INDEX, chunked_cross_entropy
from training.models.moe import MoE, count_routed_tokens, load_balancing_loss, moe_layers
from training.models.rope import model_inverse_frequencies, rotary_cos_sin, rotary_cos_sin_at


class Block(Protocol):
    """What a family's block (training/models/<family>/model.py) offers the stack."""

    def __call__(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None = None) -> Tensor: ...
    def init_weights(self, init: WeightInit, std: float, n_layers: int) -> None: ...


def block_class(args: ModelArgs) -> type[nn.Module]:
    """The family's block class, imported by its module path (the registry itself imports no torch)."""
    block = load(family_named(args.flavor).block)
    if not (isinstance(block, type) and issubclass(block, nn.Module)):
        raise TypeError(f"model.flavor: {args.flavor!r} names {block!r} as its block, which is not an nn.Module")
    return block


def _final_norm(args: ModelArgs) -> nn.RMSNorm | nn.LayerNorm:
    if family_named(args.flavor).norm == "rmsnorm":
        return nn.RMSNorm(args.dim, eps=args.norm_eps)
    return nn.LayerNorm(args.dim, eps=args.norm_eps)


class OutputHead(nn.Linear):
    """The untied LM head: logits, or with labels the summed cross-entropy without full logits (models/loss.py).
    Computing the loss inside this module's forward lets FSDP2 shard it with the final norm as one group."""

    def forward(self, hidden: Tensor, labels: Tensor | None = None) -> Tensor:
        if labels is None:
            return super().forward(hidden)
        return chunked_cross_entropy(hidden, self.weight, labels)


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        block = block_class(args)
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList([block(args) for _ in range(args.n_layers)])
        self.norm = _final_norm(args)
        self.output = None if args.tie_embeddings else OutputHead(args.dim, args.vocab_size, bias=False)
        # A plain tuple, not submodules: wrappers added later (FSDP2, checkpointing) keep these same modules.
        self._moe_layers: tuple[MoE, ...] = tuple(moe_layers(self.layers))

    def forward(
        self,
        input_ids: Tensor,
        labels: Tensor | None = None,
        position_ids: Tensor | None = None,
        document_ids: Tensor | None = None,
    ) -> Tensor:
        """input_ids [B, S] -> logits [B, S, vocab]; with labels [B, S]: the fp32 cross-entropy summed over the
        tokens whose label is not IGNORE_INDEX, computed without the full logits (models/loss.py).

        Packed rows of several samples (SFT) give position_ids [B, S] (restarting at 0 with each sample, for RoPE)
        and document_ids [B, S] (attention stays among tokens of the same id)."""
        seq_len = input_ids.shape[1]
        if seq_len > self.args.max_seq_len:
            raise ValueError(f"input_ids: sequence length {seq_len} exceeds model.max_seq_len {self.args.max_seq_len}")
        h = self.tok_embeddings(input_ids)
        # Recomputed per call (head_dim/2 numbers): no buffer to rebuild after meta-device init or sharding.
        inv_freq = model_inverse_frequencies(self.args, h.device)
        if position_ids is None:
            cos, sin = rotary_cos_sin(inv_freq, seq_len)
        else:
            cos, sin = rotary_cos_sin_at(inv_freq, position_ids)
        # Pretraining calls the blocks as before (causal kernels); packed rows add the block-diagonal mask.
        extra = () if document_ids is None else (document_mask(document_ids),)
        for layer in self.layers:
            h = layer(h, cos, sin, *extra)
        h = self.norm(h)
        if self.output is not None:
            out = self.output(h, labels)
        elif labels is not None:
            out = chunked_cross_entropy(h, self.tok_embeddings.weight, labels)
        else:
            out = F.linear(h, self.tok_embeddings.weight)
        if self._moe_layers:
            out = self._with_router_loss(out, labels)
        return out

    def _with_router_loss(self, out: Tensor, labels: Tensor | None) -> Tensor:
        """A training step's summed loss plus router_aux_loss_coef x the load-balancing loss per trained token (so
        the per-token mean the trainer takes is transformers' loss + coef x aux); routed tokens counted for the
        aux-free bias. Evaluation (no grad) keeps the cross-entropy alone."""
        layers = list(self._moe_layers)
        training = torch.is_grad_enabled()
        if training:
            count_routed_tokens(layers)
        coef = self.args.router_aux_loss_coef
        if training and labels is not None and coef > 0:
            aux = load_balancing_loss(layers)
            if aux is not None:
                out = out + coef * aux * (labels != IGNORE_INDEX).sum()
        for layer in layers:
            layer.router_stats = None  # the next forward's routing replaces it; no graph kept alive meanwhile
        return out

    @torch.no_grad()
    def init_weights(self, seed: int | None = None) -> None:
        """Fresh weights, the same whether the model is plain or sharded (models/init.py). `seed` None: drawn from
        torch's global generator, so torch.manual_seed(s) before this call fixes the weights."""
        if seed is None:
            seed = int(torch.randint(0, 2**62, (1,)).item())
        init, std = WeightInit(self, seed), self.args.init_std
        init.normal_(self.tok_embeddings.weight, std)
        for layer in self.layers:
            # A block, or a checkpoint wrapper around one (parallel/activation_checkpoint.py), which forwards
            # attribute access to the block.
            cast(Block, layer).init_weights(init, std, self.args.n_layers)
        self.norm.reset_parameters()
        if self.output is not None:
            init.normal_(self.output.weight, std)


def build_model(args: ModelArgs, device: torch.device | str = "meta") -> Transformer:
    """Build on `device` without initializing; call init_weights() (after sharding) or load weights."""
    with torch.device(device):
        return Transformer(args)
