"""The fused linear cross-entropy (models/loss.py) under FSDP2 over two gloo ranks, tied and untied heads: the
gathered gradients equal those of the unsharded model trained on both ranks' tokens with the unfused loss."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.tensor import DTensor

from training.config import ParallelSection
from training.models import ModelArgs
from training.models.loss import IGNORE_INDEX
from training.models.transformer import build_model
from training.parallel.dims import ParallelDims
from training.parallel.fsdp import mixed_precision_policy
from training.parallel.mesh import build_mesh
from training.parallel.parallelize import parallelize, plain_name

ARGS = ModelArgs(flavor="llama", dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=96, max_seq_len=16)
SEED = 7


def _batch(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(0, ARGS.vocab_size, (2, 17), generator=torch.Generator().manual_seed(100 + rank))
    labels = tokens[:, 1:].clone()
    labels[rank, 3:7] = IGNORE_INDEX
    return tokens[:, :-1], labels


def _unsharded_grads(args: ModelArgs, world_size: int) -> dict[str, torch.Tensor]:
    model = build_model(args, device="cpu")
    model.init_weights(seed=SEED)
    for rank in range(world_size):
        ids, labels = _batch(rank)
        logits = model(ids).float().flatten(0, 1)
        F.cross_entropy(logits, labels.flatten(), ignore_index=IGNORE_INDEX, reduction="sum").backward()
    return {name: param.grad for name, param in model.named_parameters()}


def _worker(rank: int, world_size: int, store_path: str, result_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world_size), rank=rank, world_size=world_size)
    try:
        for tied in (False, True):
            args = ARGS.replace(tie_embeddings=tied)
            model = build_model(args, device="meta")
            mesh = build_mesh(ParallelDims(dp_replicate=1, dp_shard=world_size), "cpu")
            parallelize(model, ParallelSection(), mesh, mixed_precision_policy("fp32", torch.device("cpu")))
            model.to_empty(device="cpu")
            model.init_weights(seed=SEED)
            ids, labels = _batch(rank)
            (model(ids, labels=labels) * world_size).backward()  # FSDP averages over ranks; the reference sums
            expected = _unsharded_grads(args, world_size)
            for name, param in model.named_parameters():
                assert isinstance(param.grad, DTensor), name
                torch.testing.assert_close(
                    param.grad.full_tensor(), expected[plain_name(name)], rtol=1e-5, atol=1e-6, msg=name
                )
            # FSDP's reference cycles freed now, while the process group is whole: left to the collector at
            # interpreter exit they aborted a rank ("terminate called without an active exception") under load, as
            # they did in the trainer (training/train.py).
            del model, param
            gc.collect()
        Path(result_dir, f"rank{rank}.ok").touch()
        # Both ranks past their last collective before either tears gloo down: a rank leaving while its peer's
        # pair was still open aborted the peer the same way.
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.mark.distributed
def test_two_fsdp_ranks_give_the_unsharded_gradients_tied_and_untied(tmp_path: Path) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(_worker, args=(2, str(tmp_path / "store"), str(tmp_path)), nprocs=2, join=True)
    assert sorted(p.name for p in tmp_path.glob("*.ok")) == ["rank0.ok", "rank1.ok"]
