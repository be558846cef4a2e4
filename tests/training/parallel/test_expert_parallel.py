"""Expert parallel (training/parallel/expert_parallel.py) under real torch.distributed: a MoE layer whose experts are
sharded over 2 gloo ranks (torchrun), tokens dispatched and combined by all_to_all_single, gives the single-rank
layer's outputs and gradients (fp32, 1e-5); and the sizes it refuses, in one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.training.jobs import REPO_ROOT, child_env
from tests.training.parallel.expert_parallel_shapes import MOE_ARGS, layer_inputs, seeded_moe
from training.parallel.expert_parallel import check_expert_parallel

RANKS = 2


def _expert_parallel_results(out_dir: Path, lopsided: bool) -> list[dict]:
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={RANKS}"]
    worker = ["-m", "tests.training.parallel.expert_parallel_worker", str(out_dir), *(["lopsided"] if lopsided else [])]
    done = subprocess.run(
        [*torchrun, "--max-restarts=0", *worker],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [torch.load(out_dir / f"rank{rank}.pt") for rank in range(RANKS)]


@pytest.mark.parametrize("lopsided", [False, True], ids=["balanced", "one-rank-idle"])
def test_two_rank_expert_parallel_gives_the_single_rank_layer(tmp_path: Path, lopsided: bool) -> None:
    """`one-rank-idle`: every token goes to rank 0's experts; rank 1 sends and receives nothing, and still must run
    the same collectives (and hold zero expert gradients)."""
    ranks = _expert_parallel_results(tmp_path, lopsided)
    reference = seeded_moe(lopsided)
    for rank, result in enumerate(ranks):
        x, probe = layer_inputs(rank)
        x.requires_grad_(True)
        out = reference(x)
        (out * probe).sum().backward()  # accumulates every rank's tokens into the reference's gradients
        torch.testing.assert_close(result["out"], out.detach(), rtol=1e-5, atol=1e-5, msg=f"rank {rank} output")
        torch.testing.assert_close(result["x_grad"], x.grad, rtol=1e-5, atol=1e-5, msg=f"rank {rank} input grad")
    expected = dict(reference.named_parameters())
    local = MOE_ARGS.n_experts // RANKS
    for name, param in expected.items():
        if name.startswith("experts."):
            # Each rank holds experts [r * local, (r + 1) * local) and their gradients from both ranks' tokens.
            assert all(result["grads"][name].shape[0] == local for result in ranks), name
            got = torch.cat([result["grads"][name] for result in ranks])
        else:
            got = sum(result["grads"][name] for result in ranks)  # replicated: the ranks' partial gradients
        assert param.grad is not None, name
        # Lopsided: only experts 0 and 1 (rank 0's) see tokens.
        trained = param.grad[:2] if lopsided and name.startswith("experts.") else param.grad
        assert trained.abs().sum() > 0, name
        torch.testing.assert_close(got, param.grad, rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.parametrize(
    ("ep", "data_parallel", "n_experts", "message"),
    [
        (3, 4, 6, "parallel.ep: 3 does not divide the data-parallel world (4 ranks)"),
        (2, 4, 3, "parallel.ep: 2 does not divide the expert count (3 experts)"),
        (2, 2, 0, "parallel.ep: 2 needs a mixture-of-experts model (this one is dense)"),
        (0, 2, 4, "parallel.ep: 0 must be >= 1"),
    ],
)
def test_refuses_sizes_that_cannot_shard_the_experts(ep: int, data_parallel: int, n_experts: int, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        check_expert_parallel(ep, data_parallel, n_experts)
