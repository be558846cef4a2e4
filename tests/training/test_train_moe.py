"""End-to-end MoE training: a Qwen3-MoE tiny model (load balancing by the auxiliary loss and by the aux-free router
bias at once) trains under torchrun with 2 gloo FSDP ranks, is SIGKILLed, and resumes with the losses of the
uninterrupted run (the router biases travel in the DCP checkpoint)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.jobs import (
    kill_training,
    losses_by_step,
    records,
    run_training,
    start_training,
    tiny_job,
    wait_for_step,
    write_job,
)
from training.signals import EXIT_CONFIG_ERROR, EXIT_STATUS_FILE

STEPS = 60  # steps take ~0.1 s: enough of them that the kill lands mid-run
MOE_MODEL = {
    "name": "qwen3-moe-tiny",
    "vocab_size": "data",
    "router_aux_loss_coef": 0.01,
    "router_bias_update_rate": 0.001,
}


def _moe_job(data_prefix: str) -> dict:
    job = tiny_job(data_prefix, train={"max_steps": STEPS, "eval_every": STEPS})
    job["model"] = dict(MOE_MODEL)
    return job


@pytest.mark.distributed
def test_a_sigkilled_moe_run_resumes_with_the_losses_of_an_uninterrupted_run(
    demo_data_prefix: str, tmp_path: Path
) -> None:
    config = write_job(tmp_path / "job.yaml", _moe_job(demo_data_prefix))
    reference = tmp_path / "reference"
    result = run_training(config, reference, ranks=2)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    losses = losses_by_step(reference, after=0)
    assert sorted(losses) == list(range(1, STEPS + 1))
    assert losses[STEPS] < losses[1]  # it learns

    killed = tmp_path / "killed"
    process = start_training(config, killed, ranks=2)
    try:
        # Killed after step 6: its latest checkpoint (every 4 steps) holds router biases that have moved.
        wait_for_step(killed, 6, process)
    finally:
        kill_training(process)
    assert max(r["step"] for r in records(killed, "train")) < STEPS, "the run finished before it was killed"
    result = run_training(config, killed, ranks=2)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    resumes = [r for r in records(killed, "event") if r["event"] == "resume"]
    assert len(resumes) == 1 and resumes[0]["step"] >= 4, resumes
    resumed_at = resumes[0]["step"]
    resumed = losses_by_step(killed, after=resumed_at)
    assert sorted(resumed) == list(range(resumed_at + 1, STEPS + 1))
    for step in resumed:
        assert abs(resumed[step] - losses[step]) <= 1e-6, (step, resumed[step], losses[step])


@pytest.mark.distributed
@pytest.mark.parametrize(
    ("ranks", "reason"),
    [
        (1, "parallel.ep: 2 does not divide the data-parallel world (1 ranks)"),
        (2, "parallel.ep: 2: the FSDP trainer does not shard experts over ranks yet"),
    ],
    ids=["ep-over-world", "ep-in-trainer"],
)
def test_an_expert_parallel_job_is_refused_in_one_line(
    demo_data_prefix: str, tmp_path: Path, ranks: int, reason: str
) -> None:
    """parallel.ep reaches the trainer, which names it rather than training without expert parallel."""
    job = _moe_job(demo_data_prefix)
    job["parallel"] = {"ep": 2}
    run_dir = tmp_path / "run"
    result = run_training(write_job(tmp_path / "job.yaml", job), run_dir, ranks=ranks)
    assert result.returncode != 0, result.stdout[-3000:]
    status = json.loads((run_dir / EXIT_STATUS_FILE).read_text(encoding="utf-8"))
    assert status["exit_code"] == EXIT_CONFIG_ERROR, status
    assert status["reason"].startswith(f"config: {reason}"), status
    assert "\n" not in status["reason"]
