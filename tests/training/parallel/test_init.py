"""Initialisation does not depend on sharding: a model sharded over N ranks holds exactly the weights of the
unsharded model built from the same seed (every shard drawn from its own part of the numbers, not from the same
ones), for FSDP over 1 and 2 gloo ranks and HSDP 2 x 1."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.tensor import DTensor

from training.config import ParallelSection
from training.models import ModelArgs
from training.models.transformer import build_model
from training.parallel.dims import ParallelDims
from training.parallel.fsdp import mixed_precision_policy
from training.parallel.mesh import build_mesh
from training.parallel.parallelize import parallelize, plain_name

# 128 table rows so that a two-way shard holds rows 0-63 and 64-127, the split the bug showed.
ARGS = ModelArgs(
    flavor="llama", dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=128, max_seq_len=16
)
# 101 rows: an uneven two-way split (51 + 50), as FSDP2 pads it.
NEOX = ModelArgs(flavor="neox", dim=32, n_layers=2, n_heads=4, ffn_dim=64, vocab_size=101, rotary_pct=0.5)
SEED = 1234


def unsharded_weights(args: ModelArgs) -> dict[str, torch.Tensor]:
    model = build_model(args, device="cpu")
    model.init_weights(seed=SEED)
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def sharded_weights(args: ModelArgs, shape: ParallelDims) -> dict[str, torch.Tensor]:
    """Build on meta, shard, materialise and initialise as the trainer does; gather the full tensors."""
    model = build_model(args, device="meta")
    mesh = build_mesh(shape, "cpu")
    parallelize(model, ParallelSection(), mesh, mixed_precision_policy("fp32", torch.device("cpu")))
    model.to_empty(device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning may be needed (or hidden) to initialise sharded weights
        model.init_weights(seed=SEED)
    full = {}
    for name, param in model.named_parameters():
        assert isinstance(param, DTensor), name
        full[plain_name(name)] = param.full_tensor().detach().clone()
    return full


def assert_same_weights(sharded: dict[str, torch.Tensor], plain: dict[str, torch.Tensor]) -> None:
    assert sharded.keys() == plain.keys()
    for name, tensor in plain.items():
        torch.testing.assert_close(sharded[name], tensor, rtol=0, atol=0, msg=name)


def _worker(rank: int, world_size: int, store_path: str, replicate: int, shard: int, result_dir: str) -> None:
    torch.set_num_threads(1)
    store = dist.FileStore(store_path, world_size)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)
    try:
        shape = ParallelDims(dp_replicate=replicate, dp_shard=shard)
        for args in (ARGS, NEOX):
            sharded = sharded_weights(args, shape)
            assert_same_weights(sharded, unsharded_weights(args))
        table = sharded_weights(ARGS, shape)["tok_embeddings.weight"]
        assert not torch.equal(table[:64], table[64:]), "both halves of the table drawn from the same numbers"
        Path(result_dir, f"rank{rank}.ok").touch()
    finally:
        dist.destroy_process_group()


@pytest.mark.usefixtures("process_group")
@pytest.mark.parametrize("args", [ARGS, NEOX], ids=["llama", "neox"])
def test_fsdp_over_one_rank_equals_the_unsharded_model(args: ModelArgs) -> None:
    assert_same_weights(sharded_weights(args, ParallelDims(dp_replicate=1, dp_shard=1)), unsharded_weights(args))


@pytest.mark.distributed
@pytest.mark.parametrize(("replicate", "shard"), [(1, 2), (2, 1)], ids=["fsdp-2", "hsdp-2x1"])
def test_two_ranks_hold_the_unsharded_model(replicate: int, shard: int, tmp_path: Path) -> None:
    world_size = replicate * shard
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(
        _worker,
        args=(world_size, str(tmp_path / "store"), replicate, shard, str(tmp_path)),
        nprocs=world_size,
        join=True,
    )
    assert sorted(p.name for p in tmp_path.glob("*.ok")) == [f"rank{r}.ok" for r in range(world_size)]


def test_the_same_seed_gives_the_same_model_and_another_seed_another() -> None:
    first, again = unsharded_weights(ARGS), unsharded_weights(ARGS)
    assert_same_weights(first, again)
    other = build_model(ARGS, device="cpu")
    other.init_weights(seed=SEED + 1)
    assert not torch.equal(other.tok_embeddings.weight, first["tok_embeddings.weight"])
    # Without a seed it comes from torch's global generator: torch.manual_seed right before fixes the weights.
    torch.manual_seed(SEED)
    other.init_weights()
    drawn = other.tok_embeddings.weight.clone()
    torch.manual_seed(SEED)
    other.init_weights()
    torch.testing.assert_close(other.tok_embeddings.weight, drawn, rtol=0, atol=0)
