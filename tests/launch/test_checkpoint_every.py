"""checkpoint.every at submission (launch/checkpoint_every.py): a job that leaves it unset gets the plan's interval
(Young's, from the planned save and the fleet's failure rate), written where its backend reads it; a number or
'off' is kept as written; 0 is refused in one line."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from launch.checkpoint_every import with_planned_interval
from launch.submit import main, parse_options, render
from planner.stop_window import StopWindow
from slurm.submission import load_command_spec
from slurm.target import resolve_target
from tests.launch.conftest import REPO, write_job
from tests.training.jobs import tiny_job
from training.config import parse_job_config

LLAMA3_8B = {"name": "llama3-8b", "vocab_size": None}
DATA = {"seq_len": 256, "micro_batch_size": 1, "global_batch_size": 16}
MAX_STEPS = 10**9


def _argv(tmp_path: Path, demo_data: str, backend: str, every: object, *extra: str) -> list[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = write_job(tmp_path / "job.yaml", data=DATA)
    job = yaml.safe_load(config.read_text())
    job["model"] = LLAMA3_8B
    if every is None:
        del job["checkpoint"]["every"]
    else:
        job["checkpoint"]["every"] = every
    config.write_text(yaml.safe_dump(job))
    return ["--backend", backend, "--model", str(config), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(tmp_path / "run"), "--max-steps", str(MAX_STEPS), *extra]  # fmt: skip


def _file(rendered: object, name: str) -> dict:
    files = rendered.files  # type: ignore[attr-defined]
    return yaml.safe_load(next(text for path, text in files.items() if path.name == name))


def _planned_note(rendered: object) -> str:
    (note,) = [n for n in rendered.notes if n.startswith("checkpoint every ")]  # type: ignore[attr-defined]
    return note


def test_an_unset_interval_is_youngs_in_steps_of_the_planned_step() -> None:
    spec = load_command_spec(REPO / "spec" / "default.yaml")
    target = resolve_target(spec, "fsdp", None, None)  # p5.48xlarge: 8 H100s a node
    window = StopWindow(checkpoint_bytes=96_000_000_000, storage_mb_per_s=293.0, step_s=5.0)  # 8B at the default FSx
    job = parse_job_config(tiny_job("d/x_text_document", checkpoint={"every": None}))
    planned, note = with_planned_interval(job, window, target, nodes=8)
    mtbf_s = 3600 / (64 * 419 / (16_384 * 54 * 24))  # Llama 3's interruption rate, 64 GPUs
    expected = round(math.sqrt(2 * window.save_s * mtbf_s) / 5.0)
    assert planned.checkpoint.every == expected and 5_000 < expected < 15_000  # 12 hours of 5 s steps
    assert (
        note is not None
        and note.startswith(f"checkpoint every {expected} steps (12.0 h)")
        and "for 64 accelerators" in note
    )


def test_an_unset_interval_is_written_where_each_backend_reads_it(demo_data: str, tmp_path: Path) -> None:
    fsdp = render(parse_options(_argv(tmp_path / "f", demo_data, "fsdp", None)), "t")
    every = int(_planned_note(fsdp).split()[2])
    assert _file(fsdp, "job-config.yaml")["checkpoint"]["every"] == every
    nemo = render(parse_options(_argv(tmp_path / "n", demo_data, "nemo", None)), "t")
    every = int(_planned_note(nemo).split()[2])
    assert _file(nemo, "bridge-config.yaml")["overrides"]["checkpoint.save_interval"] == every != MAX_STEPS


@pytest.mark.parametrize(("every", "saved"), [(250, 250), ("off", "off")])
def test_a_written_interval_is_kept(demo_data: str, tmp_path: Path, every: object, saved: object) -> None:
    rendered = render(parse_options(_argv(tmp_path, demo_data, "fsdp", every)), "t")
    assert _file(rendered, "job-config.yaml")["checkpoint"]["every"] == saved
    assert not [n for n in rendered.notes if n.startswith("checkpoint every ")]


def test_the_local_cluster_has_no_plan_and_leaves_the_trainers_fallback(
    tiny_config: Path, demo_data: str, tmp_path: Path
) -> None:
    job = yaml.safe_load(tiny_config.read_text())
    del job["checkpoint"]["every"]
    tiny_config.write_text(yaml.safe_dump(job))
    argv = ["--backend", "fsdp", "--model", str(tiny_config), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(tmp_path / "run"), "--local"]  # fmt: skip
    rendered = render(parse_options(argv), "t")
    assert _file(rendered, "job-config.yaml")["checkpoint"]["every"] is None
    assert any(
        n.startswith("checkpoint.every: unset and no plan here; the trainer saves every 100 steps")
        for n in rendered.notes
    )


@pytest.mark.parametrize("flag", [["--checkpoint-every", "0"], []])
def test_an_interval_of_0_is_refused_in_one_line(
    demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    argv = _argv(tmp_path, demo_data, "fsdp", 0 if not flag else None, *flag, "--dry-run")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "checkpoint.every: 0 is not a checkpoint interval" in err, err
