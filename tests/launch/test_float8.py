"""llm-submit's FP8 check (launch/float8.py): a recipe the queue's chips or the backend cannot run is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from launch.submit import main, parse_options, render
from tests.launch.conftest import write_job

REPO = Path(__file__).resolve().parents[2]
P4D_SPEC = REPO / "spec" / "examples" / "p4d-odcr.yaml"
B200_SPEC = REPO / "spec" / "examples" / "p6-b200-capacity-block.yaml"


def _argv(config: Path, data: str, run_dir: Path, *extra: str, backend: str = "fsdp") -> list[str]:
    return ["--backend", backend, "--model", str(config), "--nodes", "1", "--data-prefix", data,
            "--run-dir", str(run_dir), *extra, "--dry-run"]  # fmt: skip


def _config(tmp_path: Path, **float8: object) -> Path:
    # 8 GPUs x micro-batch 4: one node's data-parallel split
    return write_job(tmp_path / "job.yaml", data={"global_batch_size": 32}, float8=dict(float8))


@pytest.mark.parametrize(
    ("extra", "float8", "message"),
    [
        (
            ["--spec", str(P4D_SPEC)],
            {"recipe": "tensorwise"},
            "error: float8.recipe: 'tensorwise' needs compute capability 8.9+ (Ada, Hopper or Blackwell (L4, H100, "
            "H200, B200)); p4d.24xlarge (A100-40GB) is 8.0",
        ),
        (
            [],
            {"recipe": "mxfp8"},
            "error: float8.recipe: 'mxfp8' needs compute capability 10.0+ (Blackwell (B200, B300)); p5.48xlarge "
            "(H100) is 9.0",
        ),
        (
            ["--local"],
            {"recipe": "rowwise"},
            "error: float8.recipe: 'rowwise' needs FP8 tensor cores (Ada, Hopper or Blackwell (L4, H100, H200, B200)); "
            "this job runs on the local CPU cluster. Set float8.emulate: true to test the numerics there (no "
            "speed-up), or recipe 'off'",
        ),
    ],
    ids=["a100", "mxfp8-on-hopper", "local-cpu"],
)
def test_a_recipe_the_queues_chips_cannot_run_is_refused_in_one_line(
    extra: list[str], float8: dict[str, object], message: str, demo_data: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    config = _config(tmp_path, **float8)
    if "--local" in extra:
        config = write_job(tmp_path / "local.yaml", float8=float8)
    assert main(_argv(config, demo_data, tmp_path / "run", *extra)) == 2
    err = capsys.readouterr().err
    assert err == message + "\n"
    assert not (tmp_path / "run").exists()


def test_a_backend_that_does_not_read_the_section_refuses_it_instead_of_dropping_it(
    demo_data: str, nemo2507_spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, recipe="tensorwise")
    argv = _argv(config, demo_data, tmp_path / "run", "--spec", str(nemo2507_spec), backend="nemo")
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "error: float8.recipe: 'tensorwise' is read by the fsdp and bridge backends only; backend nemo2 would train "
        "without it. Use recipe 'off' there\n"
    )


@pytest.mark.parametrize(
    ("float8", "message"),
    [
        (
            {"recipe": "rowwise"},
            "error: float8.recipe: 'rowwise' has no Megatron Bridge preset (TransformerEngine scales per tensor or per "
            "MXFP8 block); use 'tensorwise' or 'mxfp8' with backend bridge",
        ),
        (
            {"recipe": "tensorwise", "emulate": True},
            "error: float8.emulate: true is torchao's; TransformerEngine runs FP8 on the tensor cores only. Leave it "
            "out",
        ),
    ],
)
def test_megatron_bridge_takes_only_what_transformer_engine_has(
    float8: dict[str, object], message: str, demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(_config(tmp_path, **float8), demo_data, tmp_path / "run", backend="nemo")) == 2
    assert capsys.readouterr().err == message + "\n"


def test_megatron_bridge_gets_the_matching_transformer_engine_preset(demo_data: str, tmp_path: Path) -> None:
    rendered = render(parse_options(_argv(_config(tmp_path, recipe="tensorwise"), demo_data, tmp_path / "r",
                                          backend="nemo")), "t")  # fmt: skip
    (bridge,) = [text for path, text in rendered.files.items() if str(path).endswith("bridge-config.yaml")]
    assert yaml.safe_load(bridge)["overrides"]["mixed_precision"] == "bf16_with_fp8_current_scaling_mixed"


@pytest.mark.parametrize(
    ("extra", "float8"),
    [([], {"recipe": "tensorwise"}), (["--spec", str(B200_SPEC)], {"recipe": "mxfp8"}),
     (["--local"], {"recipe": "rowwise", "emulate": True})],
    ids=["h100-tensorwise", "b200-mxfp8", "local-emulated"],
)  # fmt: skip
def test_a_recipe_the_chips_run_reaches_the_jobs_config(
    extra: list[str], float8: dict[str, object], demo_data: str, tmp_path: Path
) -> None:
    config = _config(tmp_path, **float8) if "--local" not in extra else write_job(tmp_path / "l.yaml", float8=float8)
    rendered = render(parse_options(_argv(config, demo_data, tmp_path / "run", *extra)), "t")
    (job_config,) = [text for path, text in rendered.files.items() if str(path).endswith(".yaml")]
    assert yaml.safe_load(job_config)["float8"] == {"fsdp_all_gather": None, "emulate": False, **float8}


def test_the_plan_of_an_fp8_job_is_timed_at_the_fp8_rate(tmp_path: Path) -> None:
    """llm-submit's plan (and llm-plan on the job YAML) times FP8 GEMMs where the job runs them; emulation is not."""
    from launch.fit import planner_hardware
    from planner.job_config import planner_job
    from slurm.target import resolve_target
    from spec.load import load_spec
    from training.config import load_job_config, resolve_model_args

    target = resolve_target(load_spec(REPO / "spec" / "default.yaml"), "fsdp", None, None)
    cases: dict[str, dict[str, object]] = {
        "bf16": {},
        "fp8": {"recipe": "tensorwise"},
        "emulated": {"recipe": "rowwise", "emulate": True},
    }
    precisions = {}
    for name, float8 in cases.items():
        (tmp_path / name).mkdir()
        job = load_job_config(_config(tmp_path / name, **float8))
        model = resolve_model_args(job.model, 8000)
        precisions[name] = planner_job(job, model, planner_hardware(target), 1).software.precision
    assert precisions == {"bf16": "bf16", "fp8": "fp8", "emulated": "bf16"}
