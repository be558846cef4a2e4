"""The renderer registry: every backend of slurm.backends has a renderer and a job script, and renders a dry run."""

from __future__ import annotations

from pathlib import Path

import pytest

from launch.scripts import JOBS_DIR, RENDERERS
from launch.submit import parse_options, render
from slurm.backends import BACKENDS
from tests.launch.conftest import write_job

REPO = Path(__file__).resolve().parents[2]


def test_every_backend_has_a_renderer_and_every_renderer_a_backend() -> None:
    assert set(RENDERERS) == set(BACKENDS)


@pytest.mark.parametrize("name", BACKENDS)
def test_every_backend_has_its_job_script(name: str) -> None:
    assert (JOBS_DIR / f"{BACKENDS[name].option}.sh").is_file()


@pytest.fixture
def specs(nemo2507_spec: Path) -> dict[str, Path]:
    """A spec each backend renders for: add one here with a new backend."""
    default = REPO / "spec" / "default.yaml"
    trn1 = REPO / "spec" / "examples" / "trn1-neuron.yaml"
    return {"fsdp": default, "bridge": default, "nemo2": nemo2507_spec, "neuron": trn1}


@pytest.mark.parametrize("name", BACKENDS)
def test_every_backend_renders_its_script_and_names_itself_in_the_comment(
    name: str, specs: dict[str, Path], demo_data: str, tmp_path: Path
) -> None:
    backend = BACKENDS[name]
    job = write_job(tmp_path / "job.yaml", data={"global_batch_size": 256})
    argv = ["--backend", backend.option, "--model", str(job), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(tmp_path / "run"), "--spec", str(specs[name]), "--max-steps", "1000"]  # fmt: skip
    if not backend.yaml_layout:
        argv += ["--tensor-parallel", "2"]  # the tiny model's 4 heads
    rendered = render(parse_options(argv), "t")
    body = (JOBS_DIR / f"{backend.option}.sh").read_text().strip().splitlines()[-1]
    trained = rendered.scripts[-1].text
    assert body in trained
    assert f"#SBATCH --comment=llm-plan:v1,backend={name}," in trained
