"""The float8: section (training/quantization/config.py): one-line errors, and which chips run which recipe."""

from __future__ import annotations

import pytest

from training.config import ConfigError, parse_job_config
from training.quantization.config import Float8Section, capability_problem


def _job(**sections: object) -> dict[str, object]:
    job: dict[str, object] = {
        "model": {"name": "tiny"},
        "data": {"prefix": "d", "seq_len": 64, "micro_batch_size": 4, "global_batch_size": 8},
        "train": {"max_steps": 10},
    }
    job.update(sections)
    return job


@pytest.mark.parametrize(
    ("sections", "message"),
    [
        ({"float8": {"recipe": "fp4"}}, "float8.recipe: 'fp4' input should be 'off', 'tensorwise', 'rowwise' or"),
        (
            {"float8": {"recipe": "rowwise", "fsdp_all_gather": True}},
            "float8.fsdp_all_gather: true needs recipe 'tensorwise' (one scale per weight); recipe is 'rowwise'",
        ),
        ({"float8": {"emulate": True}}, "float8.emulate: true with recipe 'off' emulates nothing; set float8.recipe"),
        (
            {"float8": {"recipe": "tensorwise"}, "finetune": {"mode": "lora", "init": "runs/base"}},
            "float8.recipe: 'tensorwise' with finetune.mode 'lora' is not supported",
        ),
    ],
    ids=["unknown-recipe", "all-gather-rowwise", "emulate-off", "lora"],
)
def test_a_float8_section_that_cannot_run_is_one_line_naming_the_field(
    sections: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_job_config(_job(**sections))
    (line,) = refused.value.lines
    assert message in line, line


def test_the_section_is_off_unless_a_recipe_is_named() -> None:
    assert parse_job_config(_job()).float8 == Float8Section(recipe="off")
    assert not Float8Section().enabled and Float8Section(recipe="mxfp8").enabled


@pytest.mark.parametrize(
    ("recipe", "capability", "runs"),
    [
        ("tensorwise", (8, 0), False),  # A100: no FP8 tensor cores
        ("tensorwise", (8, 9), True),  # L4 / Ada
        ("rowwise", (9, 0), True),  # H100, H200
        ("mxfp8", (9, 0), False),  # block-scaled MMA is Blackwell's
        ("mxfp8", (10, 0), True),  # B200
        ("rowwise", (10, 3), True),  # B300
    ],
)
def test_each_recipe_runs_from_its_compute_capability(recipe: str, capability: tuple[int, int], runs: bool) -> None:
    problem = capability_problem(Float8Section(recipe=recipe), "cuda", capability, "GPU")  # type: ignore[arg-type]
    assert (problem is None) == runs, problem


def test_a_cpu_needs_emulation_and_says_so() -> None:
    problem = capability_problem(Float8Section(recipe="tensorwise"), "cpu", None, "a CPU")
    assert problem is not None and "Set float8.emulate: true to test the numerics there" in problem
    assert capability_problem(Float8Section(recipe="tensorwise", emulate=True), "cpu", None, "a CPU") is None
