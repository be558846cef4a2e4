import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from planner.plan import main, parse_tokens

REQUIRED = ("tokens_per_s_per_device", "mfu", "memory_gib_per_device", "step_time_s", "cost_per_hour_usd")
REQUIRED += ("tokens_per_usd", "days")
BASE = ["--model", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "4", "--seq", "8192", "--micro-batch", "1"]


def run(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    try:
        code = main([*BASE, *extra])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_has_the_promised_fields(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--activation-checkpointing", "selective", "--tokens", "1T", "--json")
    report = json.loads(out)
    assert code == 0
    assert all(report[key] is not None for key in REQUIRED)
    assert report["days"] == pytest.approx(1e12 / report["tokens_per_s"] / 86400)
    assert report["cost_per_hour_usd"] == pytest.approx(4 * 55.04)
    assert report["tokens_per_usd"] == pytest.approx(report["tokens_per_s"] * 3600 / report["cost_per_hour_usd"])
    assert report["fits"] is True and report["layout"]["data_parallel"] == 32


def test_price_override_changes_only_the_money(capsys: pytest.CaptureFixture[str]) -> None:
    _, on_demand, _ = run(capsys, "--json")
    _, reserved, _ = run(capsys, "--json", "--price-per-hour", "30")
    a, b = json.loads(on_demand), json.loads(reserved)
    assert a["tokens_per_s"] == b["tokens_per_s"] and b["cost_per_hour_usd"] == 120


def test_the_specs_price_override_is_used(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import yaml

    from spec import DEFAULT_SPEC_PATH

    doc = yaml.safe_load(DEFAULT_SPEC_PATH.read_text())
    doc["cluster"]["prices"] = {"p5.48xlarge": 31.5}
    spec_path = tmp_path / "reserved.yaml"
    spec_path.write_text(yaml.safe_dump(doc))
    _, out, _ = run(capsys, "--json", "--spec", str(spec_path))
    assert json.loads(out)["cost_per_hour_usd"] == pytest.approx(4 * 31.5)
    code, _, err = run(capsys, "--json", "--spec", str(tmp_path / "missing.yaml"))
    assert code == 2 and "--spec" in err and "missing.yaml" in err


def test_text_report_names_memory_flops_communication_and_cost(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--tokens", "300B")
    assert code == 0
    for needle in ("memory per device", "6N + 12 l h s", "96 B s l h^2", "Gbps", "GB/s", "exposed"):
        assert needle in out
    assert "tokens per $" in out and "days" in out


def test_a_job_that_cannot_fit_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = main_with(capsys, "--model", "llama2-70b", "--instance", "p4d.24xlarge", "--nodes", "1", "--json")
    assert code == 0 and json.loads(out)["fits"] is False


def main_with(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--nodes", "0"], "--nodes: 0"),
        (["--seq", "0"], "--seq: 0"),
        (["--micro-batch", "-1"], "--micro-batch: -1"),
        (["--model", "gpt-9"], "--model: 'gpt-9' is neither a known model"),
        (["--instance", "p9.big"], "'p9.big'"),
        (["--instance", "c5.xlarge"], "--instance: 'c5.xlarge'"),
        (["--tensor-parallel", "3"], "--tensor-parallel: 3"),
        (["--global-batch", "33"], "--global-batch: 33"),
        (["--tokens", "lots"], "--tokens: 'lots'"),
        (["--activation-checkpointing", "most"], "--activation-checkpointing"),
        (["--sharding", "hsdp", "--shard-group", "3"], "--shard-group: 3 must divide the 32 data-parallel ranks"),
        (["--shard-group", "8"], "--shard-group: 8 applies only to sharding 'hsdp'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert needle in err and err.count("\n") == 1, err


def test_token_counts() -> None:
    assert parse_tokens("2T") == 2e12 and parse_tokens("300B") == 3e11 and parse_tokens("1_000") == 1000
    assert parse_tokens("2e12") == 2e12


def test_the_planner_imports_no_torch() -> None:
    # The submit command runs it on the head node: it must import fast.
    code = "import sys, planner.plan, planner.memory; print('torch' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root).stdout
    assert out.strip() == "False"


def test_compare_prints_one_line_per_layout_with_fit_time_rate_days_and_dollars(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = main_with(
        capsys, "--compare", "--model", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "4", "--seq", "8192",
        "--tokens", "1T",
    )  # fmt: skip
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("| rank | layout"))
    for column in ("fits", "step", "tokens/s/device", "days", "$"):
        assert column in header
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert [row[1].strip() for row in rows[1:]] == [str(rank) for rank in range(1, len(rows))]
    layouts = [row[2].strip() for row in rows]
    assert any(name.startswith("fsdp") for name in layouts)
    assert any(name.startswith("hsdp") for name in layouts)
    assert any(name.startswith("tp") for name in layouts)


def test_compare_as_json_lists_every_layout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = main_with(
        capsys, "--compare", "--json", "--model", "llama2-70b", "--instance", "p4de.24xlarge", "--nodes", "2",
        "--seq", "4096", "--activation-checkpointing", "full", "--tokens", "100B",
    )  # fmt: skip
    rows = json.loads(out)["layouts"]
    assert code == 0 and len(rows) >= 3
    for row in rows:
        assert {"layout", "fits", "step_time_s", "tokens_per_s_per_device", "days", "cost_usd"} <= set(row)
    hsdp = next(r for r in rows if r["layout"].startswith("hsdp"))
    assert hsdp["fits"] is False  # 70B does not fit sharded over one node of A100s


def test_the_compare_example_in_the_docs_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "planner.md").read_text()
    block = doc.split("<!-- compare-example:start -->\n", 1)[1].split("<!-- compare-example:end -->", 1)[0]
    _, out, _ = main_with(
        capsys, "--model", "llama2-13b", "--instance", "p4de.24xlarge", "--nodes", "16", "--seq", "4096",
        "--grad-reduce", "bf16", "--tokens", "1T", "--compare",
    )  # fmt: skip
    assert block == out


def _documented_plan_commands() -> list[tuple[list[str], int]]:
    """(argv, expected exit code) of every `python -m planner.plan` command in docs/planner.md's code blocks; a
    command the docs follow with its error line is expected to exit 2."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "planner.md").read_text()
    out: list[tuple[list[str], int]] = []
    for block in re.findall(r"```[^\n]*\n(.*?)```", doc, re.S):
        lines = block.split("\n")
        for i, line in enumerate(lines):
            text = line.removeprefix("$ ").strip()
            if not text.startswith("python -m planner.plan ") or text.startswith("python -m planner.plan:"):
                continue
            while text.endswith("\\"):
                i += 1
                text = text[:-1] + " " + lines[i].strip()
            argv = shlex.split(text.split(" #", 1)[0])[3:]
            following = lines[i + 1] if i + 1 < len(lines) else ""
            out.append((argv, 2 if following.startswith("python -m planner.plan: error:") else 0))
    return out


DOCUMENTED = _documented_plan_commands()


# The dataset the docs prepare before a command that reads one (make demo's: python -m training.prepare --demo-corpus).
DOCS_DATA_PREFIX = "build/data/demo_text_document"


@pytest.fixture(scope="module")
def demo_data_prefix(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The first documents of the demo corpus through the real `training.prepare`, standing in for the docs' data."""
    from tests.training.jobs import prepare_demo_subset

    return prepare_demo_subset(tmp_path_factory.mktemp("docs-data"))


@pytest.mark.parametrize(("argv", "expected"), DOCUMENTED, ids=[" ".join(a)[:60] for a, _ in DOCUMENTED])
def test_every_command_in_the_docs_runs_as_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], expected: int,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # the docs' paths are from the repo root
    if "--data-prefix" in argv:  # the docs prepare it in the block before; a prepared subset here
        at = argv.index("--data-prefix") + 1
        assert argv[at] == DOCS_DATA_PREFIX
        argv = [*argv[:at], request.getfixturevalue("demo_data_prefix"), *argv[at + 1 :]]
    code, _, err = main_with(capsys, *argv)
    assert code == expected, err
    assert len(DOCUMENTED) >= 10


def _plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    try:
        code = main([*argv, "--json"])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_a_job_yaml_is_planned_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    # 1b.yaml: seq 4096, micro-batch 4, global batch 256, FSDP over every rank (the model section alone gave
    # seq 8192, micro-batch 1 and one micro-batch per rank).
    root = Path(__file__).resolve().parents[2]
    report = _plan_json(
        capsys, "--model", str(root / "training/configs/1b.yaml"), "--instance", "p5.48xlarge", "--nodes", "1"
    )
    layout = report["layout"]
    assert (layout["global_batch_sequences"], layout["tokens_per_step"]) == (256, 256 * 4096)
    assert layout["micro_batches_per_step"] == 256 // (8 * 4)
    assert layout["sharding"] == "fsdp" and layout["data_parallel"] == 8
    # llama3-8b.yaml replicates (dp_replicate -1, dp_shard 8): HSDP with one node per shard group, selective AC.
    report = _plan_json(
        capsys, "--model", str(root / "training/configs/llama3-8b.yaml"), "--instance", "p5.48xlarge", "--nodes", "4"
    )
    assert report["layout"]["sharding"] == "hsdp" and report["layout"]["weights_and_gradients_sharded_over"] == 8
    assert report["layout"]["replicas"] == 4


def test_a_flag_overrides_the_job_yamls_field(capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2]
    job = ["--model", str(root / "training/configs/1b.yaml"), "--instance", "p5.48xlarge", "--nodes", "1"]
    report = _plan_json(capsys, *job, "--seq", "2048", "--micro-batch", "2", "--sharding", "hsdp")
    assert report["layout"]["tokens_per_step"] == 256 * 2048
    assert report["layout"]["micro_batches_per_step"] == 256 // (8 * 2)
    assert report["layout"]["sharding"] == "hsdp"


def test_a_job_yaml_the_trainer_would_refuse_is_refused_naming_its_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = Path(__file__).resolve().parents[2]
    job = (root / "training/configs/1b.yaml").read_text()
    uneven = tmp_path / "uneven.yaml"
    uneven.write_text(job.replace("global_batch_size: 256", "global_batch_size: 36"))
    code, _, err = main_with(capsys, "--model", str(uneven), "--instance", "p5.48xlarge", "--nodes", "1")
    assert code == 2 and err.count("\n") == 1
    assert f"--model {uneven}: data.global_batch_size: 36 must be a multiple of data-parallel size x micro-batch" in err
    too_long = tmp_path / "too-long.yaml"
    too_long.write_text(job.replace("seq_len: 4096", "seq_len: 16384"))
    code, _, err = main_with(capsys, "--model", str(too_long), "--instance", "p5.48xlarge", "--nodes", "1")
    assert code == 2 and "data.seq_len: 16384 exceeds model.max_seq_len 8192" in err and err.count("\n") == 1
    code, _, err = main_with(
        capsys, "--model", str(root / "training/configs/1b.yaml"), "--instance", "p5.48xlarge", "--nodes", "1",
        "--seq", "9000",
    )  # fmt: skip
    assert code == 2 and "with the flags given: data.seq_len: 9000 exceeds model.max_seq_len 8192" in err


def test_the_plan_prints_the_checkpoint_interval_from_the_save_and_the_fleets_failure_rate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "--activation-checkpointing", "selective", "--json")
    planned = json.loads(out)["checkpoint_interval"]
    assert code == 0 and planned["accelerators"] == 32  # 4 x p5.48xlarge
    assert planned["every_steps"] == round(planned["interval_s"] / planned["step_s"])
    # 8.03 B parameters x 12 bytes at the default spec's FSx (1.2 TiB x 250 MB/s per TiB).
    assert planned["save_s"] == pytest.approx(8.03e9 * 12 / (1200 / 1024 * 250e6), rel=0.01)
    _, text, _ = run(capsys, "--activation-checkpointing", "selective")
    assert f"checkpoint every {planned['every_steps']} steps (" in text
    # A faster file system saves sooner, so checkpointing more often pays.
    spec = yaml.safe_load((Path(__file__).resolve().parents[2] / "spec" / "default.yaml").read_text())
    spec["cluster"]["fsx"].update({"storage_gib": 4800, "throughput_mb_per_tib": 1000})
    (tmp_path / "fast.yaml").write_text(yaml.safe_dump(spec))
    _, fast, _ = run(capsys, "--activation-checkpointing", "selective", "--json", "--spec", str(tmp_path / "fast.yaml"))
    assert json.loads(fast)["checkpoint_interval"]["every_steps"] < planned["every_steps"]


def test_the_checkpoint_interval_example_in_the_docs_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = main_with(
        capsys, "--model", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "8", "--seq", "8192",
        "--micro-batch", "1", "--activation-checkpointing", "selective", "--tokens", "1T",
    )  # fmt: skip
    line = out.splitlines()[-1]
    assert code == 0 and line.startswith("checkpoint every ")
    docs = (Path(__file__).resolve().parents[2] / "docs" / "planner.md").read_text()
    assert f"```text\n{line}\n```" in docs


# The local CPU cluster's two nodes (make demo): memory as llm-submit --local plans it, no time or cost.
LOCAL_CPU = ["--model", "tiny", "--instance", "local-cpu", "--nodes", "2", "--seq", "256", "--micro-batch", "4",
             "--global-batch", "8"]  # fmt: skip
# What a plan times or costs: null on local-cpu, where the planner has no rate to time with.
TIMED_OR_COSTED = (
    "peak_flops_per_device", "peak_fp8_flops_per_device", "time_s", "communication_per_step", "step_time_s",
    "tokens_per_s", "tokens_per_s_per_device", "mfu", "hfu", "model_tflops_per_device", "cost_per_hour_usd",
    "tokens_per_usd", "tokens", "days", "cost_usd", "checkpoint_interval", "storage",
)  # fmt: skip


def test_local_cpu_plans_the_layout_and_memory_and_says_time_and_cost_are_not_modelled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = main_with(capsys, *LOCAL_CPU)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("1.90 M parameters on 2 x local-cpu (2 devices, CPU), seq 256, micro-batch 4")
    assert "TP 1 x PP 1 x CP 1 x DP 2" in lines[1] and "global batch 8 sequences" in lines[1]
    assert re.search(r"^memory per device: \d+\.\d of 4\.0 GiB -> fits$", out, re.M)
    assert re.search(r"^  weights\s+\d+\.\d\d GiB$", out, re.M)
    assert lines[-1] == "time and cost: not modelled on the local CPU cluster (local-cpu has no rate to time with)"
    for timed in ("time per step", "MFU", "tokens/s", "cost: $", "tokens per $", "checkpoint every"):
        assert timed not in out


def test_local_cpu_json_has_every_key_with_null_for_what_is_timed_or_costed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    local, p5 = _plan_json(capsys, *LOCAL_CPU), _plan_json(capsys, *BASE)
    assert local.keys() == p5.keys() and local["layout"].keys() == p5["layout"].keys()
    assert [key for key in TIMED_OR_COSTED if local[key] is not None] == []
    assert [key for key in local if key not in TIMED_OR_COSTED and local[key] is None] == []
    assert (local["instance"], local["devices"], local["fits"]) == ("local-cpu", 2, True)
    assert local["memory_capacity_gib_per_device"] == 4.0
    assert local["memory_breakdown_gib"].keys() == p5["memory_breakdown_gib"].keys()
    assert local["memory_gib_per_device"] == pytest.approx(sum(local["memory_breakdown_gib"].values()))
    assert local["flops_per_token"]["model_6n_plus_attention"] > 0
    assert (local["timed"], p5["timed"]) == (False, True)


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--tokens", "1T"], "--tokens: 1e+12: time and cost are not modelled on local-cpu (the local CPU cluster); "
         "plan its memory without --tokens"),
        (["--compare"], "--compare: layouts are ranked by their time, which is not modelled on local-cpu (the local "
         "CPU cluster); plan one layout without --compare"),
        (["--price-per-hour", "3"], "--price-per-hour: 3.0: time and cost are not modelled on local-cpu (the local "
         "CPU cluster); plan its memory without --price-per-hour"),
        (["--spec", "spec/default.yaml"], "--spec: 'spec/default.yaml': time and cost are not modelled on local-cpu "
         "(the local CPU cluster); plan its memory without --spec"),
        (["--backend", "nemo"], "--backend: 'nemo' does not run on local-cpu: use fsdp"),
    ],
    ids=["tokens", "compare", "price", "spec", "backend"],
)  # fmt: skip
def test_local_cpu_refuses_what_it_cannot_plan_in_one_line_naming_the_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    code, out, err = main_with(capsys, *LOCAL_CPU, *argv)
    assert (code, out, err) == (2, "", f"python -m planner.plan: error: {line}\n")


def test_help_names_the_local_cpu_cluster() -> None:
    from planner.plan import build_parser

    assert "local-cpu" in " ".join(build_parser().format_help().split())


@pytest.mark.parametrize(("backend", "noted"), [("fsdp", True), ("nemo", False)])
def test_a_plan_on_a_layout_the_backend_cannot_submit_says_so(
    backend: str, noted: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = main_with(
        capsys, "--model", "llama3-70b", "--instance", "p5.48xlarge", "--nodes", "8", "--seq", "8192",
        "--tensor-parallel", "4", "--pipeline-parallel", "4", "--global-batch", "128", "--backend", backend,
    )  # fmt: skip
    assert code == 0
    note = "note: llm-submit --backend fsdp does not run TP x PP; planned as a PyTorch-native stack that does"
    assert (note in out) is noted
