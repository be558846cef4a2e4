"""A torchrun worker for tests/training/parallel/test_expert_parallel.py: one MoE layer with its experts sharded
over every rank (EP = world size) runs this rank's tokens forward and backward and saves what it computed to
<out>/rank<r>.pt. Run: python -m torch.distributed.run --nproc-per-node=2 -m tests.training.parallel.expert_parallel_worker OUT [lopsided]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor

from tests.training.parallel.expert_parallel_shapes import MOE_ARGS, layer_inputs, seeded_moe
from training.models.moe import MoE
from training.parallel.expert_parallel import shard_experts


def main(out_dir: Path, lopsided: bool) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    try:
        moe: MoE = seeded_moe(lopsided)
        world = dist.group.WORLD
        assert world is not None
        shard_experts(moe, world)
        x, probe = layer_inputs(rank)
        x.requires_grad_(True)
        out = moe(x)
        (out * probe).sum().backward()
        grads: dict[str, Tensor] = {name: p.grad for name, p in moe.named_parameters() if p.grad is not None}
        torch.save(
            {"out": out.detach(), "x_grad": x.grad, "grads": grads, "n_experts": MOE_ARGS.n_experts},
            out_dir / f"rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), lopsided=sys.argv[2:] == ["lopsided"])
