"""Gradient accumulation under HSDP (2 replicas x 1 shard, two gloo ranks): the replicas all-reduce gradients once
per optimizer step, in the last micro-batch's backward (as the planner's step-time model assumes), and the
gradients equal those of an all-reduce after every micro-batch."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor

from tests.training.jobs import tiny_job
from training.config import ParallelSection, parse_job_config
from training.models import ModelArgs
from training.models.transformer import build_model
from training.parallel.dims import ParallelDims
from training.parallel.dist import init_distributed
from training.parallel.fsdp import mixed_precision_policy, replicas_reduce_on_last
from training.parallel.mesh import build_mesh
from training.parallel.parallelize import parallelize
from training.trainer import Trainer

ARGS = ModelArgs(flavor="llama", dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=96, max_seq_len=16)
MICRO_BATCHES = 3
SEED = 7


def _fsdp_all_reduces(calls: list[int]) -> Callable[..., Any]:
    """dist.all_reduce, counting the calls FSDP makes (its gradient all-reduce across replicas)."""
    real = dist.all_reduce

    def counting(*args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_code.co_filename.endswith("_fsdp_collectives.py"):
            calls.append(1)
        return real(*args, **kwargs)

    return counting


def _parameter_groups(model: torch.nn.Module) -> int:
    """FSDP's parameter groups in the model: each all-reduces its gradients across replicas once per sync."""
    # A group of several modules (norm + head) is one state shared by each of them.
    states = {id(m._get_fsdp_state()): m._get_fsdp_state() for m in model.modules() if isinstance(m, FSDPModule)}
    return sum(len(state._fsdp_param_groups) for state in states.values())


def _micro_batches(rank: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + rank)
    return [torch.randint(0, ARGS.vocab_size, (2, 17), generator=generator) for _ in range(MICRO_BATCHES)]


def _accumulated_grads(model: torch.nn.Module, batches: Iterable[torch.Tensor]) -> dict[str, torch.Tensor]:
    for tokens in batches:
        model(tokens[:, :-1], labels=tokens[:, 1:]).backward()
    grads = {}
    for name, param in model.named_parameters():
        assert isinstance(param.grad, DTensor), name
        grads[name] = param.grad.full_tensor().clone()
    model.zero_grad(set_to_none=True)
    return grads


def _check_equal_gradients(rank: int) -> None:
    model = build_model(ARGS, device="meta")
    mesh = build_mesh(ParallelDims(dp_replicate=2, dp_shard=1), "cpu")
    parallelize(model, ParallelSection(), mesh, mixed_precision_policy("fp32", torch.device("cpu")))
    model.to_empty(device="cpu")
    model.init_weights(seed=SEED)
    batches = _micro_batches(rank)
    every_micro_batch = _accumulated_grads(model, batches)
    real = dist.all_reduce
    calls: list[int] = []
    dist.all_reduce = _fsdp_all_reduces(calls)
    try:
        last_only = _accumulated_grads(model, replicas_reduce_on_last(model, batches))
    finally:
        dist.all_reduce = real
    for name, expected in every_micro_batch.items():
        torch.testing.assert_close(last_only[name], expected, rtol=1e-5, atol=1e-6, msg=name)
    assert len(calls) == _parameter_groups(model), f"{len(calls)} all-reduces, {MICRO_BATCHES} micro-batches"


def _check_trainer_step(rank: int, data_prefix: str, run_dir: str) -> None:
    job = tiny_job(
        data_prefix,
        parallel={"dp_replicate": 2},
        data={"micro_batch_size": 2, "global_batch_size": 2 * 2 * MICRO_BATCHES, "prefetch": 0},
        checkpoint={"every": "off", "async_save": False},
    )
    trainer = Trainer(parse_job_config(job, source="test"), Path(run_dir), init_distributed())
    assert trainer.grad_accum == MICRO_BATCHES
    groups = _parameter_groups(trainer.model)
    real = dist.all_reduce
    calls: list[int] = []
    dist.all_reduce = _fsdp_all_reduces(calls)
    try:
        trainer._train_step(iter(trainer.train_loader))
    finally:
        dist.all_reduce = real
    assert len(calls) == groups, f"{len(calls)} FSDP all-reduces for {groups} groups and {MICRO_BATCHES} micro-batches"


def _worker(rank: int, store_path: str, data_prefix: str, run_dir: str, result_dir: str) -> None:
    torch.set_num_threads(1)
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank)})
    dist.init_process_group("gloo", store=dist.FileStore(store_path, 2), rank=rank, world_size=2)
    try:
        _check_equal_gradients(rank)
        _check_trainer_step(rank, data_prefix, run_dir)
        Path(result_dir, f"rank{rank}.ok").touch()
    finally:
        dist.destroy_process_group()


@pytest.mark.distributed
def test_hsdp_replicas_all_reduce_once_per_step_with_the_same_gradients(demo_data_prefix: str, tmp_path: Path) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    args = (str(tmp_path / "store"), demo_data_prefix, str(tmp_path / "run"), str(tmp_path))
    mp.spawn(_worker, args=args, nprocs=2, join=True)
    assert sorted(p.name for p in tmp_path.glob("*.ok")) == ["rank0.ok", "rank1.ok"]
