"""--signal-lead at submission (launch/signal_lead.py): derived from the checkpoint's size, the spec's storage
throughput and the step time; a given lead that cannot fit is refused in one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from launch.submit import main, parse_options, render
from tests.launch.conftest import REPO, write_job

LLAMA3_8B = {
    "model": {"name": "llama3-8b", "vocab_size": None},
    "data": {"seq_len": 256, "micro_batch_size": 1, "global_batch_size": 16},
}


def _argv(tmp_path: Path, demo_data: str, backend: str, *extra: str) -> list[str]:
    config = write_job(tmp_path / "job.yaml", data=LLAMA3_8B["data"])
    job = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**job, "model": LLAMA3_8B["model"]}))  # the named shape, nothing of tiny's
    return ["--backend", backend, "--model", str(config), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(tmp_path / "run"), "--dry-run", *extra]  # fmt: skip


def _fast_spec(tmp_path: Path) -> Path:
    spec = yaml.safe_load((REPO / "spec" / "default.yaml").read_text())
    spec["cluster"]["fsx"].update({"storage_gib": 4800, "throughput_mb_per_tib": 1000})
    path = tmp_path / "fast.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _lead(script: str) -> int:
    match = re.search(r"^#SBATCH --signal=B:USR1@(\d+)$", script, re.M)
    assert match, script
    return int(match.group(1))


@pytest.mark.parametrize("backend", ["fsdp", "nemo"])
def test_the_default_specs_storage_needs_more_than_300_s_and_gets_it(
    demo_data: str, tmp_path: Path, backend: str
) -> None:
    rendered = render(parse_options(_argv(tmp_path, demo_data, backend)), "t")
    lead = _lead(rendered.scripts[0].text)
    assert lead > 300  # 96 GB (fsdp) or 112 GB (nemo) at 293 MB/s: 327 or 383 s of writing alone
    assert any(note.startswith(f"signal lead: {lead} s (needs step ") for note in rendered.notes)


@pytest.mark.parametrize("backend", ["fsdp", "nemo"])
def test_a_lead_that_cannot_fit_is_refused(
    demo_data: str, tmp_path: Path, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(tmp_path, demo_data, backend, "--signal-lead", "300")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: --signal-lead: 300 s cannot fit a --backend {backend} stop")


def test_faster_storage_fits_the_default_lead(demo_data: str, tmp_path: Path) -> None:
    argv = _argv(tmp_path, demo_data, "nemo", "--spec", str(_fast_spec(tmp_path)), "--signal-lead", "300")
    assert _lead(render(parse_options(argv), "t").scripts[0].text) == 300
    derived = render(parse_options(argv[:-2]), "t")
    assert _lead(derived.scripts[0].text) == 300  # never below the old default


def test_a_stop_longer_than_the_clusters_kill_wait_is_named_in_a_note(demo_data: str, tmp_path: Path) -> None:
    """Issue 42: the cluster's KillWait comes from cluster.stop_save. A job whose stop needs more (Llama 3 8B on
    nemo writes 112 GB; this spec plans for 50) is told which figures to put there, before a TERM cuts its save."""
    spec = yaml.safe_load((REPO / "spec" / "default.yaml").read_text())
    spec["cluster"]["stop_save"] = {"checkpoint_gb": 50}
    small = tmp_path / "small-stop.yaml"
    small.write_text(yaml.safe_dump(spec))
    rendered = render(parse_options(_argv(tmp_path, demo_data, "nemo", "--spec", str(small))), "t")
    lead = _lead(rendered.scripts[0].text)
    (note,) = [note for note in rendered.notes if note.startswith("warning: this job's stop")]
    assert note.startswith(f"warning: this job's stop needs {lead} s but the cluster's KillWait is 231 s: a TERM")
    assert "set cluster.stop_save to checkpoint_gb 113, step_s " in note
    # The default spec plans for this job: no warning.
    (tmp_path / "default").mkdir()
    default = render(parse_options(_argv(tmp_path / "default", demo_data, "nemo")), "t")
    assert not [note for note in default.notes if note.startswith("warning: this job's stop")]
