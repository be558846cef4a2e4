"""Expert parallel for the MoE layers (training/models/moe.py): each rank of an `ep` group keeps a contiguous
n_experts / ep slice of every layer's experts (the leading dimension of the [n_experts, out, in] weights, as
torchtitan's GroupedExperts are sharded) and the tokens travel to their experts' rank and back by two
all_to_all_single calls (dispatch and combine), differentiable, so each rank's expert gradients sum every rank's
tokens. gloo runs them on CPU, NCCL on GPU.

Rank r of the group owns experts [r * local, (r + 1) * local). The routing, the sort by expert and the weighting
stay on the token's own rank (MoE.forward); only the expert FFN runs where its weights are.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.nn.functional import all_to_all_single

from training.models.moe import GroupedExperts, moe_layers

_EXPERT_WEIGHTS = ("w1", "w3", "w2")


def check_expert_parallel(ep: int, data_parallel: int, n_experts: int) -> None:
    """One line naming parallel.ep for a size that cannot shard the experts over the data-parallel ranks."""
    if ep < 1:
        raise ValueError(f"parallel.ep: {ep} must be >= 1")
    if ep == 1:
        return
    if data_parallel % ep:
        raise ValueError(f"parallel.ep: {ep} does not divide the data-parallel world ({data_parallel} ranks)")
    if n_experts == 0:
        raise ValueError(f"parallel.ep: {ep} needs a mixture-of-experts model (this one is dense)")
    if n_experts % ep:
        raise ValueError(f"parallel.ep: {ep} does not divide the expert count ({n_experts} experts)")


def check_trainer_expert_parallel(ep: int, data_parallel: int, n_experts: int) -> None:
    """The FSDP trainer's check: the sizes, then a refusal of ep > 1, which the trainer does not compose with FSDP2
    and its DCP checkpoints yet (the layer does: shard_experts), rather than training without it."""
    check_expert_parallel(ep, data_parallel, n_experts)
    if ep > 1:
        raise ValueError(
            f"parallel.ep: {ep}: the FSDP trainer does not shard experts over ranks yet (only the MoE layer does, "
            "training/parallel/expert_parallel.py); set parallel.ep to 1"
        )


@torch.no_grad()
def shard_experts(model: nn.Module, group: dist.ProcessGroup) -> None:
    """Keeps this rank's slice of every MoE layer's experts and routes the layer's expert FFN through `group`.
    Call on the full (initialized, or meta) model; each rank must hold the same full weights."""
    ep, rank = dist.get_world_size(group), dist.get_rank(group)
    for layer in moe_layers(model):
        check_expert_parallel(ep, ep, layer.n_experts)
        local = layer.n_experts // ep
        for name in _EXPERT_WEIGHTS:
            full = getattr(layer.experts, name)
            setattr(layer.experts, name, nn.Parameter(full[rank * local : (rank + 1) * local].clone()))
        layer.expert_parallel_group = group


def run_experts_parallel(experts: GroupedExperts, x: Tensor, counts: Tensor, group: dist.ProcessGroup) -> Tensor:
    """x [N, dim] sorted by global expert with counts[e] rows for expert e (all n_experts) -> the experts' outputs
    [N, dim] in x's order, each row computed on the rank that owns its expert."""
    ep = dist.get_world_size(group)
    local = counts.numel() // ep
    # received[s * local + e]: the rows rank s sends to this rank's expert e (the counts' chunk s went to rank s).
    received = torch.empty_like(counts)
    dist.all_to_all_single(received, counts, group=group)
    send_splits = counts.view(ep, local).sum(dim=1).tolist()
    receive_splits = received.view(ep, local).sum(dim=1).tolist()
    arrived = all_to_all_single(x.new_empty(sum(receive_splits), x.shape[1]), x, receive_splits, send_splits, group)
    # Arrived rows are ordered by (source rank, local expert); the experts want them by local expert.
    expert_of_row = torch.repeat_interleave(torch.arange(local, device=x.device).repeat(ep), received)
    order = torch.argsort(expert_of_row, stable=True)
    computed = experts(arrived[order], received.view(ep, local).sum(dim=0))
    back_in_arrival_order = computed[torch.argsort(order)]
    return all_to_all_single(
        x.new_empty(x.shape[0], computed.shape[1]), back_in_arrival_order, send_splits, receive_splits, group
    )
