"""The mixture-of-experts feed-forward shared by the MoE families (qwen3's Qwen3-MoE, mixtral, the DeepSeek-V3-style
shapes): a token-choice top-k router, routed SwiGLU experts run as grouped GEMMs, optional shared experts.

Load balancing, selectable per shape (ModelArgs): the auxiliary loss with transformers' semantics
(`router_aux_loss_coef` x num_experts x sum over experts of the fraction of top-k assignments times the mean router
probability, both pooled over every MoE layer of the forward pass; Transformer.forward adds it to the loss), and/or
DeepSeek-V3's aux-loss-free bias: a per-expert bias added to the scores only to choose the top k, moved after each
optimizer step by `router_bias_update_rate` towards the experts that received fewer tokens (update_router_biases).

The experts' weights are [n_experts, out, in] tensors, so an expert-parallel mesh dimension can later shard them
along dim 0 (as torchtitan's GroupedExperts are); tokens reach them sorted by expert with per-expert counts, the
spot where the all-to-all dispatch and combine would go.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from training.models.args import ModelArgs
from training.models.init import WeightInit


def _grouped_mm_applies(x: Tensor, weight: Tensor) -> bool:
    """torch._grouped_mm needs 16-byte aligned rows; on CUDA it runs bf16 on Hopper and later only, and compile
    traces it in bf16 only."""
    if not hasattr(torch, "_grouped_mm"):
        return False
    aligned = all(size * x.element_size() % 16 == 0 for size in weight.shape[1:])
    if torch.compiler.is_compiling() and x.dtype != torch.bfloat16:
        return False  # the op's meta function (what compile traces with) accepts bf16 only
    if x.device.type == "cpu":
        return aligned
    if x.device.type == "cuda":
        return aligned and x.dtype == torch.bfloat16 and torch.cuda.get_device_capability(x.device)[0] >= 9
    return False


def grouped_linear(x: Tensor, weight: Tensor, counts: Tensor) -> Tensor:
    """x [N, in] sorted by group with counts[g] rows in group g; weight [G, out, in] -> [N, out], each row through
    its group's weight. torch._grouped_mm where it applies, else a per-group loop that gives the same numbers."""
    if _grouped_mm_applies(x, weight):
        offsets = torch.cumsum(counts, dim=0).to(torch.int32)
        return torch._grouped_mm(x, weight.transpose(-2, -1), offs=offsets)
    if torch.compiler.is_compiling():
        return _masked_linear(x, weight, counts)
    pieces = torch.split(x, counts.tolist())
    return torch.cat([piece @ weight[group].T for group, piece in enumerate(pieces)])


def _masked_linear(x: Tensor, weight: Tensor, counts: Tensor) -> Tensor:
    """What compile traces where it cannot trace the grouped GEMM (fp32): every group's matmul over all rows, each
    row keeping its own group's. No data-dependent shapes; G times the FLOPs, so for tests and fallbacks only."""
    rows = torch.arange(x.shape[0], device=x.device)
    group_of_row = torch.searchsorted(torch.cumsum(counts, dim=0), rows, right=True)
    out = x.new_zeros(x.shape[0], weight.shape[1])
    for group in range(weight.shape[0]):
        out = torch.where((group_of_row == group).unsqueeze(1), x @ weight[group].T, out)
    return out


class GroupedExperts(nn.Module):
    """n_experts SwiGLU MLPs stored as stacked weights: w1 (gate) and w3 (up) [E, hidden, dim], w2 (down)
    [E, dim, hidden], each slice laid out as an nn.Linear weight (HF's per-expert tensors map to slices)."""

    def __init__(self, n_experts: int, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(n_experts, hidden, dim))
        self.w3 = nn.Parameter(torch.empty(n_experts, hidden, dim))
        self.w2 = nn.Parameter(torch.empty(n_experts, dim, hidden))

    def forward(self, x: Tensor, counts: Tensor) -> Tensor:
        gate, up = grouped_linear(x, self.w1, counts), grouped_linear(x, self.w3, counts)
        return grouped_linear(F.silu(gate) * up, self.w2, counts)


class TokenChoiceRouter(nn.Module):
    """Scores each token against every expert and keeps its top k.

    expert_bias (present when router_bias_update_rate > 0, a persistent buffer, so checkpoints carry it) shifts
    the scores for the choice only, never the weights; tokens_per_expert counts this step's assignments for its
    update (not saved: it is zero between steps)."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.n_experts, self.top_k = args.n_experts, args.experts_per_token
        self.score, self.norm_topk_prob, self.route_scale = args.router_score, args.norm_topk_prob, args.route_scale
        self.bias_update_rate = args.router_bias_update_rate
        self.gate = nn.Linear(args.dim, args.n_experts, bias=False)
        self.expert_bias: Tensor | None
        self.tokens_per_expert: Tensor | None
        if self.bias_update_rate > 0:
            self.register_buffer("expert_bias", torch.zeros(args.n_experts, dtype=torch.float32))
            self.register_buffer("tokens_per_expert", torch.zeros(args.n_experts, dtype=torch.float32), False)
        else:
            self.expert_bias = self.tokens_per_expert = None

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x [T, dim] -> (weights [T, k] in x's dtype, expert indices [T, k], fp32 routing probabilities [T, E])."""
        logits = self.gate(x).float()
        scores = torch.softmax(logits, dim=-1) if self.score == "softmax" else torch.sigmoid(logits)
        choice = scores if self.expert_bias is None else scores + self.expert_bias
        indices = torch.topk(choice, self.top_k, dim=-1).indices
        weights = scores.gather(1, indices)
        if self.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        probs = scores if self.score == "softmax" else torch.softmax(logits, dim=-1)
        return (weights * self.route_scale).to(x.dtype), indices, probs


@dataclass(frozen=True)
class RouterStats:
    """One MoE layer's routing in one forward pass: top-k assignments per expert (no gradient) and the sum of
    its routing probabilities per expert (with gradient, what the auxiliary loss trains), over `rows` tokens."""

    assignments: Tensor
    probability_sums: Tensor
    rows: int


class MoE(nn.Module):
    """The feed-forward of an MoE layer: routed experts plus optional shared experts (always applied)."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.n_experts = args.n_experts
        self.router = TokenChoiceRouter(args)
        self.experts = GroupedExperts(args.n_experts, args.dim, args.expert_width)
        shared = args.n_shared_experts * args.expert_width
        self.shared_experts = SharedExperts(args.dim, shared) if shared else None
        # The last forward's routing, read by Transformer.forward (aux loss, bias counts); not state.
        self.router_stats: RouterStats | None = None
        # Set by training/parallel/expert_parallel.shard_experts: the experts then hold this rank's slice only.
        self.expert_parallel_group: dist.ProcessGroup | None = None

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        weights, indices, probs = self.router(flat)
        chosen = indices.flatten()
        # One count per expert (a bincount's length would depend on the data, which compile cannot trace).
        counts = torch.zeros(self.n_experts, dtype=torch.int64, device=x.device).scatter_add_(
            0, chosen, torch.ones_like(chosen)
        )
        self.router_stats = RouterStats(counts.float(), probs.sum(dim=0), flat.shape[0])
        # Dispatch: every (token, choice) pair, sorted by expert; a stable sort keeps token order inside an expert.
        order = torch.argsort(chosen, stable=True)
        token_of = order // indices.shape[1]
        routed = self._run_experts(flat[token_of], counts) * weights.flatten()[order].unsqueeze(1)
        # Combine: each token sums its k weighted expert outputs.
        out = torch.zeros_like(flat).index_add_(0, token_of, routed)
        if self.shared_experts is not None:
            out = out + self.shared_experts(flat)
        return out.reshape(shape)

    def _run_experts(self, x: Tensor, counts: Tensor) -> Tensor:
        if self.expert_parallel_group is None:
            return self.experts(x, counts)
        from training.parallel.expert_parallel import run_experts_parallel  # it imports this module

        return run_experts_parallel(self.experts, x, counts, self.expert_parallel_group)

    @torch.no_grad()
    def init_weights(self, init: WeightInit, std: float, residual_std: float) -> None:
        init.normal_(self.router.gate.weight, std)
        init.normal_(self.experts.w1, std)
        init.normal_(self.experts.w3, std)
        init.normal_(self.experts.w2, residual_std)
        for buffer in (self.router.expert_bias, self.router.tokens_per_expert):
            if buffer is not None:
                buffer.zero_()
        if self.shared_experts is not None:
            init.normal_(self.shared_experts.w1.weight, std)
            init.normal_(self.shared_experts.w3.weight, std)
            init.normal_(self.shared_experts.w2.weight, residual_std)


class SharedExperts(nn.Module):
    """The shared experts as one SwiGLU (n_shared x expert width), applied to every token."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def moe_layers(model: nn.Module) -> list[MoE]:
    return [module for module in model.modules() if isinstance(module, MoE)]


def load_balancing_loss(layers: list[MoE]) -> Tensor | None:
    """transformers' load_balancing_loss_func from the layers' last routing: num_experts x sum over experts of
    (assignments / rows) x (probability sums / rows), both pooled over the layers. None without routing."""
    stats = [layer.router_stats for layer in layers if layer.router_stats is not None]
    if not stats:
        return None
    rows = sum(s.rows for s in stats)
    assignments = torch.stack([s.assignments for s in stats]).sum(dim=0) / rows
    probabilities = torch.stack([s.probability_sums for s in stats]).sum(dim=0) / rows
    return layers[0].n_experts * (assignments * probabilities).sum()


@torch.no_grad()
def count_routed_tokens(layers: list[MoE]) -> None:
    """Adds each layer's last assignments to its router's step counts (routers with an aux-free bias only)."""
    for layer in layers:
        counts, stats = layer.router.tokens_per_expert, layer.router_stats
        if counts is not None and stats is not None:
            counts += stats.assignments


@torch.no_grad()
def update_router_biases(model: nn.Module) -> None:
    """After an optimizer step: each aux-free router's bias moves by its rate towards under-loaded experts
    (sign of mean load minus load, DeepSeek-V3), from the step's counts summed over every rank, so all ranks
    keep the same bias; the counts restart at zero."""
    for layer in moe_layers(model):
        router = layer.router
        if router.tokens_per_expert is None or router.expert_bias is None:
            continue
        counts = router.tokens_per_expert
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(counts)
        router.expert_bias += router.bias_update_rate * torch.sign(counts.mean() - counts)
        counts.zero_()


def residual_std(std: float, n_layers: int) -> float:
    return std / math.sqrt(2 * n_layers)
