import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from bench.gpu_vs_torchtitan import (
    append_row,
    bootstrap_venv,
    choose_release,
    final_loss,
    our_losses,
    parse_args,
    parse_our_metrics,
    parse_torchtitan_log,
    render_table,
    summarize,
    torchtitan_env,
    torchtitan_losses,
)
from bench.torchtitan_releases import RELEASES, release_problem

TORCHTITAN_LOG = """\
[rank0]:[titan] 2026-09-01 10:00:00,000 - root - INFO - Training starts at step 1
[rank0]:[titan] 2026-09-01 10:00:05,000 - root - INFO - step:  1  loss: 11.9  grad_norm:  4.1  memory: 30.1GiB(38.0%)  tps: 1,234  tflops: 9.0  mfu: 0.91%
[rank0]:[titan] 2026-09-01 10:00:06,000 - root - INFO - step:  2  loss: 11.2  grad_norm:  3.9  memory: 30.1GiB(38.0%)  tps: 41,000  tflops: 300.0  mfu: 30.33%
[rank0]:[titan] 2026-09-01 10:00:07,000 - root - INFO - step:  3  loss: 10.8  grad_norm:  3.5  memory: 30.1GiB(38.0%)  tps: 43,000  tflops: 310.0  mfu: N/A
"""


def test_torchtitan_step_lines_give_step_tokens_per_second_and_mfu() -> None:
    assert parse_torchtitan_log(TORCHTITAN_LOG) == [
        (1, 1234.0, pytest.approx(0.0091), 30.1),
        (2, 41000.0, pytest.approx(0.3033), 30.1),
        (3, 43000.0, None, 30.1),
    ]


def test_our_metrics_train_records_are_read_and_other_kinds_skipped() -> None:
    lines = [
        {"kind": "event", "event": "start"},
        {"kind": "train", "step": 1, "tokens_per_s": 100.0, "mfu": 0.1, "mem_reserved_gib": 20.5},
        {"kind": "validation", "step": 1, "val_loss": 3.0},
        {"kind": "train", "step": 2, "tokens_per_s": 200.0, "mfu": "nan"},
    ]
    text = "\n".join(json.dumps(line) for line in lines)
    assert parse_our_metrics(text) == [(1, 100.0, 0.1, 20.5), (2, 200.0, None, None)]


def test_summary_is_the_median_after_warmup_with_mfu_recomputed_from_one_formula_and_peak() -> None:
    steps = [(1, 10.0, 0.01, 50.0), (2, 100.0, 0.2, 20.0), (3, 300.0, 0.4, 21.5), (4, 200.0, 0.3, None)]
    result = summarize("ours", True, steps, warmup=1, flops_per_token=1e9, peak_flops=1e12)
    assert (result.steps_timed, result.tokens_per_s_per_gpu, result.mfu, result.own_mfu) == (3, 200.0, 0.2, 0.3)
    assert result.peak_memory_gib == 21.5  # the highest after warm-up
    with pytest.raises(ValueError, match=r"torchtitan \(compile=False\): no step after --warmup 4"):
        summarize("torchtitan", False, steps, warmup=4, flops_per_token=1e9, peak_flops=1e12)


def test_table_puts_both_frameworks_side_by_side() -> None:
    rows = [
        summarize("ours", False, [(2, 40000.0, 0.3, 31.25)], 1, 9e9, 989e12),
        summarize("torchtitan", False, [(2, 42000.0, None, None)], 1, 9e9, 989e12),
    ]
    table = render_table(rows).splitlines()
    assert table[2].split() == ["ours", "bf16", "false", "40,000", "36.4%", "30.0%", "31.2", "-", "1"]
    assert table[3].split() == ["torchtitan", "bf16", "false", "42,000", "38.2%", "-", "-", "-", "1"]


def test_fp8_runs_are_rows_of_their_own_with_the_final_loss_beside_bf16s() -> None:
    bf16 = replace(summarize("ours", True, [(2, 50000.0, 0.4, 40.0)], 1, 9e9, 989e12), final_loss=4.25)
    fp8 = replace(bf16, precision="fp8-rowwise", tokens_per_s_per_gpu=60000.0, final_loss=4.2625)
    table = render_table([bf16, fp8]).splitlines()
    assert table[3].split() == ["ours", "fp8-rowwise", "true", "60,000", "45.5%", "40.0%", "40.0", "4.2625", "1"]


def test_final_loss_is_the_mean_of_the_last_steps_on_both_sides() -> None:
    ours = "\n".join(
        json.dumps(record)
        for record in [{"kind": "event", "event": "start"}]
        + [{"kind": "train", "step": step, "loss": float(step)} for step in range(1, 13)]
    )
    assert our_losses(ours)[12] == 12.0 and final_loss(our_losses(ours)) == 7.5  # mean of steps 3..12
    assert torchtitan_losses(TORCHTITAN_LOG) == {1: 11.9, 2: 11.2, 3: 10.8}
    assert final_loss(torchtitan_losses(TORCHTITAN_LOG)) == pytest.approx(11.3)
    assert final_loss({}) is None


def test_float8_recipes_are_checked_against_torchaos(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["--float8", "tensorwise,rowwise"]).float8 == ["tensorwise", "rowwise"]
    assert parse_args([]).float8 == []
    with pytest.raises(SystemExit):
        parse_args(["--float8", "tensorwise,fp4"])
    assert "--float8: 'fp4' is not a torchao recipe (tensorwise, rowwise, mxfp8)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--gpus", "0"], "--gpus: 0 must be >= 1"), (["--steps", "5", "--warmup", "5"], "--warmup: 5 must be in")],
)
def test_bad_arguments_are_one_line_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert message in capsys.readouterr().err


def test_our_job_and_torchtitans_settings_agree(tmp_path: Path) -> None:
    args = parse_args(["--ac", "selective", "--micro-batch", "2", "--seq-len", "1024", "--steps", "19"])
    env = torchtitan_env(
        corpus_dir=tmp_path / "c", tokenizer_dir=tmp_path / "t", dump_folder=tmp_path / "d", seq_len=args.seq_len,
        micro_batch=args.micro_batch, steps=args.steps, ac=args.ac, attention=args.attention,
    )  # fmt: skip
    assert env["BENCH_TT_AC"] == "selective" and env["BENCH_TT_ATTENTION"] == "flex"
    assert (env["BENCH_TT_SEQ_LEN"], env["BENCH_TT_MICRO_BATCH"], env["BENCH_TT_STEPS"]) == ("1024", "2", "19")


def test_rows_are_appended_one_json_object_per_run(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    append_row(rows, {"date": "2026-11-23", "gpu": "NVIDIA H100 80GB HBM3"})
    append_row(rows, {"date": "2026-11-24", "gpu": "NVIDIA H200"})
    assert [json.loads(line)["gpu"] for line in rows.read_text().splitlines()] == [
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H200",
    ]


@pytest.mark.parametrize("release", RELEASES, ids=lambda release: release.version)
def test_each_releases_requirements_pin_everything_but_the_machines_torch(release: object) -> None:
    from bench.torchtitan_releases import TorchtitanRelease

    assert isinstance(release, TorchtitanRelease)
    lines = [line for line in release.requirements.read_text().splitlines() if line and not line.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[^=\s]+", line) for line in lines), lines
    names = [line.split("==")[0].lower() for line in lines]
    assert len(names) == len(set(names)) and not set(names) & {"torch", "triton"}
    assert f"torchtitan=={release.version}" in lines


def test_wheels_that_are_not_there_are_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"--wheels: .* is not a directory"):
        bootstrap_venv(tmp_path / "missing", tmp_path / "venv", RELEASES[0].requirements)


def test_the_newest_release_the_machines_torch_runs_is_taken() -> None:
    from types import SimpleNamespace

    with_api, without_api = SimpleNamespace(DataParallelMeshDims=object), SimpleNamespace()
    # the lent GPU machines: torch 2.11 has no DataParallelMeshDims, so 0.3.0 cannot start and 0.2.2 is taken
    assert choose_release(None, "2.11.0+cu130", without_api).version == "0.2.2"
    assert choose_release(None, "2.12.0", with_api).version == "0.3.0"
    assert choose_release("0.2.2", "2.12.0", with_api).version == "0.2.2"


@pytest.mark.parametrize(
    ("wanted", "torch_version", "message"),
    [
        ("0.3.0", "2.11.0+cu130", "torch: 2.11.0+cu130 is older than 2.12, which torchtitan 0.3.0 needs; leave out"),
        ("0.3.0", "2.12.0", "torch: 2.12.0 has no torch.distributed.fsdp.DataParallelMeshDims, which torchtitan"),
        (None, "2.9.1", "torch: 2.9.1 runs none of the torchtitan releases 0.3.0, 0.2.2; use --only ours"),
    ],
)
def test_a_torch_that_cannot_run_the_release_is_refused_in_one_line(
    wanted: str | None, torch_version: str, message: str
) -> None:
    from types import SimpleNamespace

    with pytest.raises(SystemExit) as refused:
        choose_release(wanted, torch_version, SimpleNamespace())
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_a_release_too_new_for_the_torch_version_says_which_torch_it_needs() -> None:
    from types import SimpleNamespace

    problem = release_problem(RELEASES[-1], "2.9.0", SimpleNamespace())
    assert problem == "torch: 2.9.0 is older than 2.10, which torchtitan 0.2.2 needs"


@pytest.mark.parametrize("release", RELEASES, ids=lambda release: release.version)
def test_each_release_gets_the_same_run_shape_in_its_own_form(
    release: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tomllib

    from bench import gpu_vs_torchtitan
    from bench.torchtitan_releases import TorchtitanRelease

    assert isinstance(release, TorchtitanRelease)
    started: list[tuple[list[str], dict[str, str]]] = []
    monkeypatch.setattr(gpu_vs_torchtitan, "_torchrun", lambda gpus, argv, env, log: started.append((argv, env)) or "")
    args = parse_args(
        ["--micro-batch", "2", "--seq-len", "1024", "--steps", "9", "--warmup", "2", "--workdir", str(tmp_path)]
    )
    gpu_vs_torchtitan.run_torchtitan(args, tmp_path / "corpus", tmp_path / "tok", True, {}, release)
    ((argv, env),) = started
    assert env["HF_HUB_OFFLINE"] == "1"
    if release.config_style == "toml":
        job = tomllib.loads(Path(argv[argv.index("--job.config_file") + 1]).read_text())
        shape = (job["training"]["seq_len"], job["training"]["local_batch_size"], job["training"]["steps"])
        assert shape == (1024, 2, 9) and job["compile"]["enable"] is True
    else:
        assert (env["BENCH_TT_SEQ_LEN"], env["BENCH_TT_MICRO_BATCH"], env["BENCH_TT_STEPS"]) == ("1024", "2", "9")
        assert argv[-1] == "llama3_1b_bench_compile"
