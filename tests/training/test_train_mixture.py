"""A data mixture end to end: torchrun with 2 gloo ranks blends two prepared datasets, is SIGKILLed, and resumes
with the batches of an uninterrupted run, at the same and at another data-parallel size."""

from pathlib import Path
from typing import Any

import pytest

from tests.training.jobs import (
    killed_run_and_copy,
    losses_by_step,
    prepare_second_source,
    records,
    run_training,
    tiny_job,
    write_job,
)

STEPS = 16


def mixture_job(first: str, second: str) -> dict[str, Any]:
    job = tiny_job(first, train={"max_steps": STEPS})
    del job["data"]["prefix"]
    job["data"]["datasets"] = [{"prefix": first, "weight": 0.75}, {"prefix": second, "weight": 0.25}]
    return job


@pytest.fixture(scope="module")
def reference_run(demo_data_prefix: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("mixture")
    second = prepare_second_source(demo_data_prefix)
    config = write_job(root / "job.yaml", mixture_job(demo_data_prefix, second))
    result = run_training(config, root / "run", ranks=2)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return config, root / "run"


@pytest.fixture(scope="module")
def killed_run(reference_run: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(run dir, untouched copy) of the mixture job SIGKILLed (launcher and both workers) after step 6."""
    config, _ = reference_run
    return killed_run_and_copy(config, tmp_path_factory.mktemp("mixture-killed") / "run", STEPS)


def _resume(run_dir: Path) -> dict[str, Any]:
    (resume,) = [r for r in records(run_dir, "event") if r["event"] == "resume"]
    return resume


def _same_batches(reference: Path, resumed: Path, after: int) -> None:
    before = {r["step"]: r for r in records(reference, "train") if r["step"] > after}
    later = {r["step"]: r for r in records(resumed, "train") if r["step"] > after}
    assert sorted(later) == sorted(before) == list(range(after + 1, STEPS + 1))
    for step, record in before.items():
        assert later[step]["batch_checksum"] == record["batch_checksum"], step
        assert later[step]["samples_consumed"] == record["samples_consumed"], step


@pytest.mark.distributed
def test_the_run_records_its_mixture_and_each_sources_share(reference_run: tuple[Path, Path]) -> None:
    _, reference = reference_run
    (start,) = [r for r in records(reference, "event") if r["event"] == "start"]
    assert [d["weight"] for d in start["mixture"]] == [0.75, 0.25]
    assert start["dataset_samples_consumed"] == [0, 0]


@pytest.mark.distributed
def test_a_sigkilled_mixture_resumes_with_the_batches_and_losses_of_an_uninterrupted_run(
    reference_run: tuple[Path, Path], killed_run: tuple[Path, Path]
) -> None:
    config, reference = reference_run
    run_dir, _ = killed_run
    result = run_training(config, run_dir, ranks=2)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    resume = _resume(run_dir)
    assert resume["step"] >= 4
    consumed = resume["dataset_samples_consumed"]
    assert sum(consumed) == resume["samples_consumed"] and consumed[0] > consumed[1] > 0
    _same_batches(reference, run_dir, resume["step"])
    expected, resumed = losses_by_step(reference, after=resume["step"]), losses_by_step(run_dir, after=resume["step"])
    for step, loss in expected.items():
        assert abs(resumed[step] - loss) <= 1e-6, (step, resumed[step], loss)


@pytest.mark.distributed
def test_a_mixture_resumed_on_one_rank_continues_the_same_sample_stream(
    reference_run: tuple[Path, Path], killed_run: tuple[Path, Path]
) -> None:
    config, reference = reference_run
    _, copy = killed_run
    result = run_training(config, copy, ranks=1)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    _same_batches(reference, copy, _resume(copy)["step"])
