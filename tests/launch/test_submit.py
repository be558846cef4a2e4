"""The submit command without a cluster: rendering, files, one-line errors (sbatch itself: the slurm tests)."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from cluster.verify.local_slurm.install import ensure_shellcheck
from launch.submit import main, parse_options, parse_time, render, sbatch, write
from slurm.errors import SubmitError
from tests.launch.conftest import write_job

REPO = Path(__file__).resolve().parents[2]
TRN1_SPEC = REPO / "spec" / "examples" / "trn1-neuron.yaml"
P4D_SPEC = REPO / "spec" / "examples" / "p4d-odcr.yaml"
NEURON_CONFIGS = REPO / "launch" / "jobs" / "configs"


def _args(*argv: str):
    return parse_options(list(argv))


def _base(config: Path, data: str, run_dir: Path, backend: str = "fsdp", nodes: int = 2) -> list[str]:
    return [
        "--backend",
        backend,
        "--model",
        str(config),
        "--nodes",
        str(nodes),
        "--data-prefix",
        data,
        "--run-dir",
        str(run_dir),
    ]


def _fails(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err.strip()


def _assert_clean_bash(script: str, tmp_path: Path) -> None:
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True, check=False).returncode == 0
    result = subprocess.run([ensure_shellcheck(), str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_dry_run_prints_the_local_fsdp_script_and_writes_nothing(
    tiny_config: Path, demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "runs" / "tiny"
    assert main([*_base(tiny_config, demo_data, run_dir), "--local", "--time", "00:30:00", "--dry-run"]) == 0
    out = capsys.readouterr().out
    for line in (
        "#SBATCH --job-name=fsdp-tiny",
        "#SBATCH --partition=local",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --time=00:30:00",
        f"#SBATCH --output={run_dir}/logs/%x-%j.out",
        "#SBATCH --open-mode=append",
        "#SBATCH --requeue",
        "#SBATCH --signal=B:USR1@300",
        "NPROC_PER_NODE=1",
        "export OMP_NUM_THREADS=1",
        f"EXIT_STATUS_FILE={run_dir}/exit_status.json",
    ):
        assert line in out.splitlines(), line
    assert "--rdzv_backend c10d" in out and "--exclusive" not in out and "NCCL" not in out
    assert not (tmp_path / "runs").exists()


def test_rendered_scripts_pass_bash_and_shellcheck(gpu_config: Path, demo_data: str, tmp_path: Path) -> None:
    neuron = NEURON_CONFIGS / "neuron-pythia-6.9b.yaml"
    cases = [
        [*_base(gpu_config, demo_data, tmp_path / "a"), "--local"],
        _base(gpu_config, demo_data, tmp_path / "b"),
        _base(
            write_job(tmp_path / "gbs64.yaml", data={"global_batch_size": 64}),
            demo_data,
            tmp_path / "c",
            backend="nemo",
        ),
        [*_base(neuron, demo_data, tmp_path / "d", backend="neuron"), "--spec", str(TRN1_SPEC)],
    ]
    scripts = [script.text for argv in cases for script in render(_args(*argv), "test").scripts]
    assert len(scripts) == 5  # the Neuron backend renders a compile job and a training job
    for script in scripts:
        _assert_clean_bash(script, tmp_path)


def test_gpu_queue_gets_eight_ranks_whole_nodes_and_the_efa_environment(
    gpu_config: Path, demo_data: str, tmp_path: Path
) -> None:
    (script,) = render(_args(*_base(gpu_config, demo_data, tmp_path / "r")), "test").scripts
    lines = script.text.splitlines()
    assert "#SBATCH --partition=gpu" in lines and "#SBATCH --exclusive" in lines
    assert "NPROC_PER_NODE=8" in lines
    for env in (
        "export FI_PROVIDER=efa",
        "export FI_EFA_USE_HUGE_PAGE=0",
        "export FI_EFA_SET_CUDA_SYNC_MEMOPS=0",
        "export NCCL_SOCKET_IFNAME='^docker,lo,veth'",
        "export NCCL_DEBUG=WARN",
        "export TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
        "export NCCL_NET='AWS Libfabric'",  # no silent fallback to sockets
        "LIBRARY_DIRS=(/opt/amazon/efa/lib /opt/amazon/ofi-nccl/lib /opt/amazon/openmpi/lib)",
    ):
        assert env in lines, env
    assert not any("FI_EFA_USE_DEVICE_RDMA" in line or "NCCL_PROTO" in line for line in lines)
    assert "export OMP_NUM_THREADS=1" not in lines


def test_fsdp_on_gpus_uses_expandable_segments_and_a_cpu_run_does_not(
    gpu_config: Path, demo_data: str, tmp_path: Path
) -> None:
    """As torchtitan's launcher sets it: fewer fragmentation OOMs when sequence lengths or FSDP buffers vary."""
    (gpu,) = render(_args(*_base(gpu_config, demo_data, tmp_path / "g")), "test").scripts
    assert "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in gpu.text.splitlines()
    (cpu,) = render(_args(*_base(gpu_config, demo_data, tmp_path / "c"), "--local"), "test").scripts
    assert "PYTORCH_CUDA_ALLOC_CONF" not in cpu.text


def test_fsdp_jobs_copy_their_checkpoints_to_the_specs_replica_under_their_own_run_directory(
    gpu_config: Path, demo_data: str, tmp_path: Path
) -> None:
    (script,) = render(_args(*_base(gpu_config, demo_data, tmp_path / "r")), "test").scripts
    prefix = str(tmp_path / "r").strip("/")
    expected = f"s3://arn:aws:s3:us-east-1:222222222222:accesspoint/llm-demo-checkpoints/checkpoints/runs/{prefix}/"
    assert f"export LLM_CHECKPOINT_REPLICA={expected}" in script.text.splitlines()
    (local,) = render(_args(*_base(gpu_config, demo_data, tmp_path / "l"), "--local"), "test").scripts
    # No spec, no S3: a local run sets it itself if it wants one (common.sh, in every script, only reads it).
    assert not any(line.startswith("export LLM_CHECKPOINT_REPLICA=") for line in local.text.splitlines())


def test_nemo_and_neuron_jobs_watch_their_frameworks_checkpoints_for_the_specs_replica(
    demo_data: str, tmp_path: Path, nemo2507_spec: Path
) -> None:
    job = write_job(tmp_path / "gbs64.yaml", data={"global_batch_size": 64})
    neuron = NEURON_CONFIGS / "neuron-pythia-6.9b.yaml"
    cases = {
        "megatron": _base(job, demo_data, tmp_path / "bridge", backend="nemo"),
        "lightning": [*_base(job, demo_data, tmp_path / "nemo2", backend="nemo"), "--spec", str(nemo2507_spec)],
    }
    scripts = {layout: render(_args(*argv), "t").scripts for layout, argv in cases.items()}
    neuron_scripts = render(
        _args(*_base(neuron, demo_data, tmp_path / "neuron", backend="neuron"), "--spec", str(TRN1_SPEC)), "t"
    ).scripts
    for layout, script in [*((layout, s) for layout, (s,) in scripts.items()), ("lightning", neuron_scripts[1])]:
        lines = script.text.splitlines()
        assert any(line.startswith("export LLM_CHECKPOINT_REPLICA=s3://arn:aws:s3:") for line in lines), layout
        assert f"CHECKPOINT_LAYOUT={layout}" in lines and "REPLICA_FINAL_PASS_S=300" in lines, layout
        assert "replica_watch_start" in script.text and "replica_watch_stop" in script.text


def test_a_run_directory_that_cannot_name_an_s3_prefix_is_refused(
    gpu_config: Path, demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _fails(capsys, [*_base(gpu_config, demo_data, tmp_path / "my run"), "--dry-run"])
    assert err.startswith(f"error: --run-dir: {str(tmp_path / 'my run')!r} cannot name an S3 prefix")


def test_older_efa_stacks_get_the_variables_they_need(gpu_config: Path, demo_data: str, tmp_path: Path) -> None:
    argv = [*_base(gpu_config, demo_data, tmp_path / "r"), "--spec", str(P4D_SPEC)]
    (script,) = render(_args(*argv, "--libfabric-version", "1.16.1", "--aws-ofi-nccl-version", "1.5.0"), "t").scripts
    lines = script.text.splitlines()
    assert "export FI_EFA_USE_DEVICE_RDMA=1" in lines and "export NCCL_PROTO=simple" in lines


def test_write_puts_the_script_beside_the_run_dir_and_the_config_inside(
    tiny_config: Path, demo_data: str, tmp_path: Path
) -> None:
    run_dir = tmp_path / "runs" / "tiny"
    rendered = render(_args(*_base(tiny_config, demo_data, run_dir), "--local", "--max-steps", "7"), "t")
    write(rendered)
    assert (tmp_path / "runs" / "tiny.fsdp.sbatch").stat().st_mode & 0o111
    assert (run_dir / "logs").is_dir()  # SLURM opens the log before the script runs
    config = yaml.safe_load((run_dir / "job-config.yaml").read_text())
    assert config["data"]["prefix"] == str(Path(demo_data).resolve())
    assert config["train"]["max_steps"] == 7


def test_nemo_job_writes_a_megatron_bridge_config_and_the_models_hf_config_by_default(
    demo_data: str, tmp_path: Path
) -> None:
    run_dir = tmp_path / "bridge"
    job = write_job(tmp_path / "gbs64.yaml", data={"global_batch_size": 64})
    rendered = render(_args(*_base(job, demo_data, run_dir, backend="nemo")), "t")
    write(rendered)
    config = yaml.safe_load((run_dir / "bridge-config.yaml").read_text())
    assert (config["framework"], config["recipe"]) == ("megatron-bridge-26.08", "llama3_8b_pretrain_config")
    assert config["data"]["tokenizer"] == str(run_dir / "tokenizer")
    # The recipe's Hub model id, answered from the run directory with our shape (the VPC cannot reach the Hub).
    hf = json.loads((run_dir / "hf" / "meta-llama" / "Meta-Llama-3-8B" / "config.json").read_text())
    assert (hf["architectures"], hf["num_hidden_layers"], hf["vocab_size"]) == (["LlamaForCausalLM"], 2, 512)
    assert (
        config["overrides"]["checkpoint.load"] == config["overrides"]["checkpoint.save"] == str(run_dir / "checkpoints")
    )
    (script,) = rendered.scripts
    lines = script.text.splitlines()
    assert "CONTAINER_IMAGE=/fsx/containers/llm-nemo-efa-26.08-efa1.43.2.sqsh" in lines
    assert "NEMO_ENTRY=bridge_pretrain.py" in lines and f"NEMO_CONFIG={run_dir}/bridge-config.yaml" in lines
    assert "export HF_HUB_OFFLINE=1" in lines


def test_nemo_job_writes_its_config_and_a_tokenizer_directory(
    demo_data: str, tmp_path: Path, nemo2507_spec: Path
) -> None:
    run_dir = tmp_path / "nemo"
    job = write_job(tmp_path / "gbs64.yaml", data={"global_batch_size": 64})
    rendered = render(_args(*_base(job, demo_data, run_dir, backend="nemo"), "--spec", str(nemo2507_spec)), "t")
    write(rendered)
    config = yaml.safe_load((run_dir / "nemo-config.yaml").read_text())
    assert config["data"]["tokenizer"] == str(run_dir / "tokenizer")
    assert (run_dir / "tokenizer" / "tokenizer.json").read_bytes() == (
        Path(demo_data).parent / "demo_tokenizer.json"
    ).read_bytes()
    (script,) = rendered.scripts
    # The .sqsh `make nemo-image` imports onto /fsx: no registry is reached per job.
    assert "CONTAINER_IMAGE=/fsx/containers/llm-nemo-efa-25.07.00-efa1.43.2.sqsh" in script.text.splitlines()
    assert "NEMO_ENTRY=nemo_pretrain.py" in script.text.splitlines()
    assert f"EXIT_STATUS_FILE={run_dir}/exit_status.json" in script.text.splitlines()
    assert "export NVTE_ASYNC_AMAX_REDUCTION=1" in script.text.splitlines()


def test_neuron_renders_a_compile_job_and_a_dependent_training_job(demo_data: str, tmp_path: Path) -> None:
    config = NEURON_CONFIGS / "neuron-neox-20b.yaml"
    argv = [*_base(config, demo_data, tmp_path / "neox", backend="neuron", nodes=4), "--spec", str(TRN1_SPEC)]
    compile_job, train_job = render(_args(*argv), "t").scripts
    assert (compile_job.name, compile_job.depends_on) == ("neuron-compile", None)
    assert (train_job.name, train_job.depends_on) == ("neuron-train", "neuron-compile")
    assert "#SBATCH --no-requeue" in compile_job.text and "#SBATCH --requeue" in train_job.text
    assert "NEURON_MODE=compile" in compile_job.text and "NEURON_MODE=train" in train_job.text
    assert "NPROC_PER_NODE=32" in train_job.text
    assert "export NEURON_COMPILE_CACHE_URL=/fsx/neuron-cache" in train_job.text
    # NxDT appends the YAML's compiler_flags to $NEURON_CC_FLAGS: setting both would pass every flag twice.
    assert "NEURON_CC_FLAGS" not in compile_job.text + train_job.text
    # Ten traced steps with a validation pass at the last: the validation graphs are compiled too.
    assert "trainer.max_steps=10" in compile_job.text and "trainer.val_check_interval=10" in compile_job.text
    # NxDT writes no checkpoint on a stop signal: the script must not claim one.
    assert "STEP_CHECKPOINTS_ON_STOP=0" in train_job.text
    # The planner's cost at Neuron's rates rides on the training job only, so llm-report counts it once.
    assert "#SBATCH --comment=llm-plan:v1,backend=neuron," in train_job.text
    assert "--comment=" not in compile_job.text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--context-parallel", "3"], "error: --tensor-parallel x --pipeline-parallel x --context-parallel: 1 x 1 x 3 "
         "does not divide 16 workers"),
        (["--context-parallel", "16"], "error: --context-parallel: data.seq_len 48 is not a multiple of 2 x 16"),
        (["--expert-parallel", "2"], "error: --expert-parallel: 2 needs a mixture-of-experts model; llama has no experts"),
        (["--context-parallel", "0"], "error: --context-parallel: 0 must be at least 1"),
    ],
)  # fmt: skip
def test_nemo_layouts_megatron_would_refuse_are_refused_before_submission(
    extra: list[str], message: str, demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_job(tmp_path / "gbs64.yaml", data={"global_batch_size": 64, "seq_len": 48})
    argv = [*_base(config, demo_data, tmp_path / "r", backend="nemo"), *extra, "--dry-run"]
    assert _fails(capsys, argv) == message


def test_bridge_context_parallelism_is_rendered_and_no_other_exit_condition_is_set(
    demo_data: str, tmp_path: Path
) -> None:
    run_dir = tmp_path / "cp"
    job = write_job(tmp_path / "gbs64.yaml", data={"global_batch_size": 64})
    write(render(_args(*_base(job, demo_data, run_dir, backend="nemo"), "--context-parallel", "2"), "t"))
    overrides = yaml.safe_load((run_dir / "bridge-config.yaml").read_text())["overrides"]
    assert overrides["model.context_parallel_size"] == 2
    assert overrides["model.expert_model_parallel_size"] == 1
    assert overrides["train.exit_signal_handler"] is True
    assert (overrides["train.exit_duration_in_mins"], overrides["train.exit_interval"]) == (None, None)


def test_nemo_context_parallelism_is_rendered_and_shrinks_data_parallelism(
    demo_data: str, tmp_path: Path, nemo2507_spec: Path
) -> None:
    run_dir = tmp_path / "cp"
    job = write_job(tmp_path / "gbs64.yaml", data={"global_batch_size": 64})
    argv = [*_base(job, demo_data, run_dir, backend="nemo"), "--context-parallel", "2", "--spec", str(nemo2507_spec)]
    write(render(_args(*argv), "t"))
    overrides = yaml.safe_load((run_dir / "nemo-config.yaml").read_text())["overrides"]
    assert overrides["trainer.strategy.context_parallel_size"] == 2
    assert overrides["trainer.strategy.expert_model_parallel_size"] == 1
    assert overrides["log.ckpt.train_time_interval"] is None


def test_the_training_job_waits_on_the_compile_job_and_dies_if_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []

    def fake_run(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        seen.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="77;cluster\n", stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert sbatch(tmp_path / "train.sbatch", "76", {}) == "77"
    assert seen == [["sbatch", "--parsable", "--dependency=afterok:76", "--kill-on-invalid-dep=yes",
                     str(tmp_path / "train.sbatch")]]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--queue", "cpu"], "error: --queue: no queue named 'cpu' (known: gpu)"),
        (["--nodes", "0"], "error: --nodes: 0 must be at least 1"),
        (["--time", "90"], "error: --time: '90' is not [D-]HH:MM:SS"),
        (["--time", "00:04:00"], "error: --signal-lead: 300 s is not shorter than --time 00:04:00"),
        (["--job-name", "bad name"], "error: --job-name: 'bad name' must be letters, digits, '.', '_' or '-'"),
        (["--max-requeues", "-1"], "error: --max-requeues: -1 must be 0 or more"),
        (["--sbatch-arg", "account=ml"], "error: --sbatch-arg: 'account=ml' is not an sbatch option"),
        (["--spec", "/nonexistent.yaml"], "error: --spec: "),
        (["--aws-ofi-nccl-version", "1.6.0"], "error: --aws-ofi-nccl-version: 1.6.0 is too old for p5.48xlarge"),
        (["--libfabric-version", "new"], "error: --libfabric-version: 'new' is not a version such as 1.18.0"),
        (["--nccl-debug", "LOUD"], "error: --nccl-debug: 'LOUD' is not one of VERSION, WARN, INFO, TRACE"),
    ],
)
def test_bad_arguments_are_one_line_errors(
    extra: list[str],
    message: str,
    gpu_config: Path,
    demo_data: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [*_base(gpu_config, demo_data, tmp_path / "r"), "--dry-run"]
    # the last occurrence of an option wins in argparse
    assert _fails(capsys, [*argv, *extra]).startswith(message)


def test_missing_data_is_named(tiny_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails(capsys, [*_base(tiny_config, str(tmp_path / "nope"), tmp_path / "r"), "--local", "--dry-run"])
    assert err == f"error: --data-prefix: {str(tmp_path / 'nope')!r} has no .bin or .idx file ({tmp_path / 'nope'}.bin)"


def test_a_bad_job_config_is_named(demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_job(tmp_path / "bad.yaml", train={"max_steps": 0})
    err = _fails(capsys, [*_base(config, demo_data, tmp_path / "r"), "--local", "--dry-run"])
    assert err.startswith("error: --model: ") and "train.max_steps" in err


def test_a_model_that_cannot_fit_is_refused_before_any_node_is_allocated(
    demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_job(
        tmp_path / "70b.yaml",
        model={
            "name": "llama2-70b",
            "vocab_size": None,
            "n_layers": None,
            "dim": None,
            "n_heads": None,
            "ffn_dim": None,
        },
        data={"global_batch_size": 32},  # 8 GPUs x micro-batch 4
    )
    argv = [*_base(config, demo_data, tmp_path / "r", nodes=1), "--spec", str(P4D_SPEC), "--dry-run"]
    err = _fails(capsys, argv)
    # The planner's memory model (launch.fit): 32 sequences of micro-batch 4 split over at most one node's 8 GPUs,
    # so the count that fits (7: its full state over 56 GPUs) comes with the global batch it needs.
    assert err.startswith("error: --nodes: llama2-70b on 1 x p4d.24xlarge does not fit: needs ")
    assert err.endswith("use at least 7 nodes (with data.global_batch_size a multiple of 224 there)")


@pytest.mark.parametrize(
    ("backend", "extra", "message"),
    [
        ("nemo", ["--local"], "error: --local: --backend nemo needs GPU or Trainium nodes"),
        ("neuron", [], "error: --queue: no neuron queue in the spec for --backend neuron (queues: gpu (p5.48xlarge))"),
        (
            "neuron",
            ["--spec", str(TRN1_SPEC), "--tensor-parallel", "3"],
            "error: --tensor-parallel x --pipeline-parallel x --context-parallel: 3 x 1 x 1 does not divide 64 workers",
        ),
        (
            "fsdp",
            ["--spec", str(TRN1_SPEC)],
            "error: --queue: no gpu queue in the spec for --backend fsdp (queues: trn1 (trn1.32xlarge))",
        ),
    ],
)
def test_backend_and_queue_must_match(
    backend: str,
    extra: list[str],
    message: str,
    tiny_config: Path,
    demo_data: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _fails(
        capsys, [*_base(tiny_config, demo_data, tmp_path / "r", backend=backend), *extra, "--dry-run"]
    ).startswith(message)


def test_nemo_needs_a_tokenizer_when_the_dataset_names_none(
    demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "copy_text_document"
    for suffix in (".bin", ".idx"):
        shutil.copyfile(demo_data + suffix, str(data) + suffix)
    config = write_job(tmp_path / "gbs64.yaml", data={"global_batch_size": 64})
    err = _fails(capsys, [*_base(config, str(data), tmp_path / "r", backend="nemo"), "--dry-run"])
    assert err.startswith("error: --tokenizer: needed for --backend nemo")


@pytest.mark.parametrize(("text", "seconds"), [("00:01:00", 60), ("2:30:00", 9000), ("1-00:00:05", 86405)])
def test_time_limits_parse(text: str, seconds: int) -> None:
    assert parse_time(text) == seconds


def test_time_limit_under_a_minute_is_refused() -> None:
    with pytest.raises(SubmitError, match=r"under a minute"):
        parse_time("00:00:30")


def test_the_deployed_spec_comes_from_the_environment_on_the_head_node(
    gpu_config: Path, demo_data: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_TRAINING_SPEC", str(TRN1_SPEC))
    with pytest.raises(SubmitError, match=r"no gpu queue in the spec for --backend fsdp \(queues: trn1"):
        render(_args(*_base(gpu_config, demo_data, tmp_path / "r")), "t")
    monkeypatch.delenv("LLM_TRAINING_SPEC")
    (script,) = render(_args(*_base(gpu_config, demo_data, tmp_path / "r")), "t").scripts
    assert "#SBATCH --partition=gpu" in script.text


def test_the_trainers_metrics_port_is_the_specs_and_off_when_the_spec_turns_observability_off(
    gpu_config: Path, demo_data: str, tmp_path: Path
) -> None:
    spec = yaml.safe_load((REPO / "spec" / "default.yaml").read_text())
    spec["cluster"]["observability"] = {"ports": {"trainer": 9650}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    base = [*_base(gpu_config, demo_data, tmp_path / "r"), "--spec", str(tmp_path / "spec.yaml")]
    rendered = render(_args(*base), "test")
    config = yaml.safe_load(next(t for p, t in rendered.files.items() if p.name == "job-config.yaml"))
    assert config["metrics"]["prometheus_port"] == 9650
    spec["cluster"]["observability"] = {"enabled": False, "managed_prometheus": False}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    rendered = render(_args(*base), "test")
    config = yaml.safe_load(next(t for p, t in rendered.files.items() if p.name == "job-config.yaml"))
    assert config["metrics"]["prometheus_port"] is None


def test_the_planners_cost_rides_in_the_job_comment_for_llm_report(
    tiny_config: Path, demo_data: str, tmp_path: Path
) -> None:
    """sacct returns the comment (AccountingStoreFlags=job_comment); llm-report reads the plan from it."""
    from planner.comment import parse_plan

    # 2 nodes x 8 GPUs x micro-batch 4: a global batch the planner can lay out.
    config = write_job(tmp_path / "job.yaml", data={"micro_batch_size": 4, "global_batch_size": 64})
    argv = [*_base(config, demo_data, tmp_path / "r"), "--spec", str(P4D_SPEC), "--max-steps", "1000"]
    rendered = render(_args(*argv), "t")
    (script,) = rendered.scripts
    (line,) = [line for line in script.text.splitlines() if line.startswith("#SBATCH --comment=")]
    plan = parse_plan(line.removeprefix("#SBATCH --comment="))
    assert plan is not None and plan.steps == 1000 and plan.hours > 0
    nodes = int(next(x for x in script.text.splitlines() if x.startswith("#SBATCH --nodes=")).split("=")[1])
    assert plan.usd == pytest.approx(plan.hours * nodes * 21.96, rel=0.01)  # p4d.24xlarge at the table's price
    assert any(note.startswith("plan: ") for note in rendered.notes)
    (local,) = render(_args(*_base(tiny_config, demo_data, tmp_path / "l"), "--local"), "t").scripts
    assert "--comment=" not in local.text  # no planner for the local CPU cluster


def test_each_backend_is_planned_at_its_own_speed_and_the_comment_says_which(
    demo_data: str, tmp_path: Path, nemo2507_spec: Path
) -> None:
    """llm-submit plans a job with its own backend and layout; the comment llm-report reads names the backend that
    runs: --backend nemo is Megatron Bridge on the default spec and NeMo 2 on a spec pinning nemo-25.07."""
    from launch.fit import planned_cost
    from planner.comment import parse_plan
    from slurm.target import resolve_target
    from spec import load_spec
    from training.config import load_job_config, resolve_model_args
    from training.parallel.dims import ParallelDims

    job = write_job(tmp_path / "gbs64.yaml", data={"global_batch_size": 64})
    config = load_job_config(job).with_overrides(**{"train.max_steps": 1000})
    model = resolve_model_args(config.model, data_vocab_size=512)
    plans = {}
    for option, name, spec, extra in (
        ("fsdp", "fsdp", None, []),
        ("nemo", "bridge", None, ["--tensor-parallel", "2"]),
        ("nemo", "nemo2", nemo2507_spec, ["--tensor-parallel", "2", "--spec", str(nemo2507_spec)]),
    ):
        argv = [*_base(job, demo_data, tmp_path / name, backend=option), "--max-steps", "1000", *extra]
        rendered = render(_args(*argv), "t")
        script = rendered.scripts[-1].text
        (line,) = [line for line in script.splitlines() if line.startswith("#SBATCH --comment=")]
        assert line.startswith(f"#SBATCH --comment=llm-plan:v1,backend={name},usd=")
        plans[name] = parse_plan(line.removeprefix("#SBATCH --comment="))
        assert any(f"at backend {name}'s speed" in note for note in rendered.notes)
        if option == "nemo":
            target = resolve_target(load_spec(spec), "nemo", None, None)
            expected = planned_cost(model, target, 2, config, None, name, ParallelDims(tp=2))
            planned = plans[name]
            assert planned is not None and expected is not None
            assert planned.hours == pytest.approx(expected.hours, rel=1e-5) and planned.backend == name
    assert plans["fsdp"] is not None and plans["fsdp"].backend == "fsdp"
    # NeMo 2's recipe leaves TP communication overlap off (Bridge's H100 recipes turn it on): slower at TP 2.
    assert plans["nemo2"] is not None and plans["bridge"] is not None
    assert plans["nemo2"].hours > plans["bridge"].hours


def test_a_global_batch_the_ranks_cannot_split_is_refused_at_submission(
    tiny_config: Path, demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was submitted without a plan and died at start (exit 2, not requeued): 8 sequences over 16 ranks x 4.
    err = _fails(capsys, [*_base(tiny_config, demo_data, tmp_path / "u"), "--spec", str(P4D_SPEC), "--dry-run"])
    assert err == (
        "error: data.global_batch_size: 8 is not a multiple of micro_batch_size x data-parallel size (4 x 16)"
    )
    local = write_job(tmp_path / "odd.yaml", data={"global_batch_size": 12})  # 3 nodes x 1 rank x 4 would split it
    err = _fails(capsys, [*_base(local, demo_data, tmp_path / "l"), "--local", "--dry-run"])
    assert err == "error: data.global_batch_size: 12 is not a multiple of micro_batch_size x data-parallel size (4 x 2)"


@pytest.mark.parametrize(
    ("backend", "extra"),
    [("fsdp", ["--local"]), ("fsdp", []), ("nemo", []), ("neuron", ["--spec", str(TRN1_SPEC)])],
)
def test_a_sequence_longer_than_the_models_positions_is_refused_at_submission_on_every_backend(
    backend: str, extra: list[str], demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The trainer refused it only on the nodes, and the Bridge path widened the model to the sequence instead.
    config = write_job(tmp_path / "long.yaml", data={"seq_len": 512})  # tiny: max_seq_len 256
    err = _fails(capsys, [*_base(config, demo_data, tmp_path / "r", backend=backend), *extra, "--dry-run"])
    assert err == f"error: --model: {config}: data.seq_len: 512 exceeds model.max_seq_len 256"


def test_the_planned_step_time_rides_in_the_job_config_for_the_hang_watchdog(
    tiny_config: Path, demo_data: str, tmp_path: Path
) -> None:
    from planner.comment import parse_plan

    config = write_job(tmp_path / "job.yaml", data={"micro_batch_size": 4, "global_batch_size": 64})
    argv = [*_base(config, demo_data, tmp_path / "r"), "--spec", str(P4D_SPEC), "--max-steps", "1000"]
    rendered = render(_args(*argv), "t")
    (script,) = rendered.scripts
    (line,) = [line for line in script.text.splitlines() if line.startswith("#SBATCH --comment=")]
    plan = parse_plan(line.removeprefix("#SBATCH --comment="))
    assert plan is not None
    job = yaml.safe_load(next(t for p, t in rendered.files.items() if p.name == "job-config.yaml"))
    assert job["watchdog"]["planned_step_s"] == pytest.approx(plan.hours * 3600 / 1000, rel=1e-3)
    # A tiny model's planned step is far under the floor: the floor is the bound the trainer starts with.
    assert any(note.startswith("hang watchdog: a step over 300 s ends the job (exit 45)") for note in rendered.notes)
    assert "EXIT_HANG=45" in script.text.splitlines()
    # Nothing plans the local CPU cluster: the trainer's own step times make the bound.
    local = render(_args(*_base(tiny_config, demo_data, tmp_path / "l"), "--local"), "t")
    job = yaml.safe_load(next(t for p, t in local.files.items() if p.name == "job-config.yaml"))
    assert job["watchdog"]["planned_step_s"] is None
    assert not any(note.startswith("hang watchdog") for note in local.notes)


def test_fsdp_on_gpus_turns_on_the_flight_recorder_the_hang_watchdog_dumps(
    gpu_config: Path, demo_data: str, tmp_path: Path
) -> None:
    (gpu,) = render(_args(*_base(gpu_config, demo_data, tmp_path / "g")), "test").scripts
    assert "export TORCH_FR_BUFFER_SIZE=2000" in gpu.text.splitlines()
    (cpu,) = render(_args(*_base(gpu_config, demo_data, tmp_path / "c"), "--local"), "test").scripts
    assert "TORCH_FR_BUFFER_SIZE" not in cpu.text


def test_a_new_run_directory_and_what_is_written_there_are_the_users_alone(
    tiny_config: Path, demo_data: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"  # sbatch itself: the slurm tests; here it only answers with a job id
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho 77\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    run_dir = tmp_path / "runs" / "alice" / "tiny"  # neither /fsx/runs/<user> nor the run exists yet
    previous = os.umask(0o022)
    try:
        assert main([*_base(tiny_config, demo_data, run_dir), "--local"]) == 0
        assert os.umask(0o022) == 0o022  # put back after the submission
    finally:
        os.umask(previous)
    modes = {
        path: stat.S_IMODE(path.stat().st_mode)
        for path in (
            run_dir.parent,
            run_dir,
            run_dir / "logs",
            run_dir / "job-config.yaml",
            run_dir.with_suffix(".fsdp.sbatch"),
        )
    }
    assert list(modes.values()) == [0o750, 0o750, 0o750, 0o640, 0o750], modes


def test_a_run_directory_every_user_may_write_is_refused(
    tiny_config: Path, demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "tiny"
    run_dir.mkdir(mode=0o777)
    run_dir.chmod(0o777)
    assert _fails(capsys, [*_base(tiny_config, demo_data, run_dir), "--local"]) == (
        f"error: --run-dir: {run_dir} is writable by every user: owned by {_owner(run_dir)} (mode 0777); take the "
        "others' write away (chmod o-w)"
    )
    assert list(run_dir.iterdir()) == []


def _owner(path: Path) -> str:
    info = path.stat()
    return f"{pwd.getpwuid(info.st_uid).pw_name}:{grp.getgrgid(info.st_gid).gr_name}"


@pytest.mark.parametrize(
    ("backend", "extra", "message"),
    [
        ("fsdp", ["--tensor-parallel", "2"],
         "error: --tensor-parallel: 2: backend fsdp is data parallel only (FSDP2/HSDP over every rank); leave it out"),
        ("fsdp", ["--pipeline-parallel", "2"],
         "error: --pipeline-parallel: 2: backend fsdp is data parallel only (FSDP2/HSDP over every rank); leave it out"),
        ("neuron", ["--spec", str(TRN1_SPEC), "--context-parallel", "2"],
         "error: --context-parallel: 2: backend neuron lays out only --tensor-parallel, --pipeline-parallel; leave it "
         "out"),
    ],
    ids=["fsdp-tp", "fsdp-pp", "neuron-cp"],
)  # fmt: skip
def test_a_parallelism_flag_the_backend_would_drop_is_refused_in_one_line(
    backend: str, extra: list[str], message: str, demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It rendered a job without a word (exit 0) and without the layout asked for.
    config = write_job(tmp_path / "job.yaml", data={"global_batch_size": 64})
    err = _fails(capsys, [*_base(config, demo_data, tmp_path / "r", backend=backend), *extra, "--dry-run"])
    assert err == message
