"""The NeMo and Neuron job scripts, rendered for their real queues (p5 with pyxis, trn1) and run on the local
cluster's partition. Only the tools this host lacks are recorders: the pyxis-enabled srun (CONTAINER_SRUN),
neuron_parallel_compile, Neuron's torchrun and neuron-ls. The scripts, sbatch, srun and the dependency are real;
for the requeue decisions the pyxis stand-in runs the step through the real srun (tests/launch/standins).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cluster.verify.local_slurm import LocalSlurm
from cluster.verify.local_slurm.install import ensure_shellcheck
from tests.launch.conftest import install_recorders, read_records, write_job
from tests.launch.slurm_helpers import job_log, job_story, submit, wait_for_end, wait_for_restart
from tests.waiting import wait_until

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
TRN1_SPEC = REPO / "spec" / "examples" / "trn1-neuron.yaml"
PYTHIA = REPO / "launch" / "jobs" / "configs" / "neuron-pythia-6.9b.yaml"


def _clean_bash(script: Path) -> None:
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    result = subprocess.run([ensure_shellcheck(), str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_nemo_job_launches_the_container_step_with_pyxis_flags(
    local_slurm: LocalSlurm, demo_data: str, tmp_path: Path, nemo2507_spec: Path
) -> None:
    # The pinned NeMo 2.4 choice (the default, Megatron Bridge, runs the same step with its own entry point).
    recorders = install_recorders(tmp_path / "bin", "pyxis-srun")
    record_log = tmp_path / "record.jsonl"
    run_dir = tmp_path / "nemo-run"
    config = write_job(tmp_path / "job.yaml", data={"global_batch_size": 64})
    argv = ["--backend", "nemo", "--model", str(config), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(run_dir), "--partition", "local", "--spec", str(nemo2507_spec)]  # fmt: skip
    env = {"CONTAINER_SRUN": str(recorders / "pyxis-srun"), "RECORD_LOG": str(record_log)}
    (job_id,) = submit(local_slurm, argv, env)
    job = wait_for_end(local_slurm, job_id)
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), job_story(local_slurm, run_dir, job_id)
    _clean_bash(tmp_path / "nemo-run.nemo.sbatch")

    (record,) = read_records(record_log)
    data_dir = Path(demo_data).parent
    assert record["argv"] == [
        "--nodes=2",
        "--ntasks=16",
        "--ntasks-per-node=8",
        "--kill-on-bad-exit=1",
        "--container-image=/fsx/containers/llm-nemo-efa-25.07.00-efa1.43.2.sqsh",
        f"--container-mounts=/fsx:/fsx,{REPO}:{REPO},{run_dir}:{run_dir},{data_dir}:{data_dir}",
        f"--container-workdir={REPO}",
        "--no-container-mount-home",
        "python",
        f"{REPO}/launch/jobs/nemo_pretrain.py",
        "--config",
        f"{run_dir}/nemo-config.yaml",
    ]
    env_seen = record["env"]
    for name, value in {
        "FI_PROVIDER": "efa",
        "FI_EFA_USE_HUGE_PAGE": "0",
        "NCCL_NET": "AWS Libfabric",
        "NCCL_SOCKET_IFNAME": "^docker,lo,veth",
        "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
        "NVTE_DP_AMAX_REDUCE_INTERVAL": "0",
        "NVTE_ASYNC_AMAX_REDUCTION": "1",
        "MASTER_ADDR": "127.0.0.1",
        "SLURM_JOB_ID": job_id,
        "SLURM_JOB_NUM_NODES": "2",
    }.items():
        assert env_seen.get(name) == value, name
    assert env_seen["MASTER_PORT"].isdigit()
    nemo = yaml.safe_load((run_dir / "nemo-config.yaml").read_text())
    assert nemo["overrides"]["model.config.num_layers"] == 2 and nemo["overrides"]["model.config.hidden_size"] == 64
    assert nemo["data"]["paths"] == [str(Path(demo_data).resolve())]


STANDINS = Path(__file__).resolve().parent / "standins"


def _nemo_with_standin(tmp_path: Path, demo_data: str, program: str | None) -> tuple[list[str], dict[str, str], Path]:
    recorders = install_recorders(tmp_path / "bin", "pyxis-srun")
    run_dir = tmp_path / "nemo-run"
    config = write_job(tmp_path / "job.yaml", data={"global_batch_size": 64})
    argv = ["--backend", "nemo", "--model", str(config), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(run_dir), "--partition", "local"]  # fmt: skip
    env = {
        "CONTAINER_SRUN": str(STANDINS / "pyxis-srun"),
        "RECORDER": str(recorders / "pyxis-srun"),
        "RECORD_LOG": str(tmp_path / "record.jsonl"),
        "HOST_PYTHON": sys.executable,
        **({"STANDIN_PROGRAM": str(STANDINS / program)} if program else {}),
    }
    return argv, env, run_dir


def test_nemo_config_error_is_not_requeued(local_slurm: LocalSlurm, demo_data: str, tmp_path: Path) -> None:
    # The real bridge_pretrain.py (the default), on a host python without Megatron Bridge: start-up fails, which is
    # a configuration error.
    argv, env, run_dir = _nemo_with_standin(tmp_path, demo_data, None)
    (job_id,) = submit(local_slurm, argv, env)
    job = wait_for_end(local_slurm, job_id)
    log = job_log(run_dir)
    assert (job["JobState"], job["ExitCode"], job["Restarts"]) == ("FAILED", "2:0", "0"), job_story(
        local_slurm, run_dir, job_id
    )
    assert "failed with exit 2 (configuration error: ModuleNotFoundError: No module named " in log
    assert "a retry cannot fix this, not requeued" in log


def test_nemo_time_limit_stop_is_requeued_and_not_counted_as_a_failure(
    local_slurm: LocalSlurm, demo_data: str, tmp_path: Path
) -> None:
    argv, env, run_dir = _nemo_with_standin(tmp_path, demo_data, "preemptible_step.py")
    # Even with no failure allowed, a checkpointed stop before the time limit requeues.
    (job_id,) = submit(local_slurm, [*argv, "--max-requeues", "0"], env)
    ready = [run_dir / f"step-ready.{rank}" for rank in (0, 1)]
    wait_until(lambda: all(path.exists() for path in ready), f"both ranks of job {job_id} in their step", 600,
               lambda: job_story(local_slurm, run_dir, job_id))  # fmt: skip
    # What #SBATCH --signal=B:USR1@300 does before the time limit.
    local_slurm.run(["scancel", "--signal=USR1", "--batch", job_id])
    # The requeued attempt is seen even when it ran and ended before the first look (here: after the job ended).
    job = wait_for_end(local_slurm, job_id, run_dir=run_dir)
    wait_for_restart(local_slurm, run_dir, job_id, 1)
    log = job_log(run_dir)
    story = job_story(local_slurm, run_dir, job_id)
    assert (job["JobState"], job["ExitCode"], job["Restarts"]) == ("COMPLETED", "0:0", "1"), story
    assert "got SIGUSR1; sending SIGUSR1 to the training step" in log, story
    assert (
        "stopped before the time limit with a checkpoint (stopped on SIGUSR1 after a checkpoint); "
        "requeueing (restart 1, not a failure)"
    ) in log, story
    assert "restart 1; 0 failed attempts requeued of at most 0" in log, story
    assert not list(run_dir.glob(".requeue-failures.*"))


def test_neuron_compile_job_then_dependent_training_job(
    local_slurm: LocalSlurm, demo_data: str, tmp_path: Path
) -> None:
    venv = tmp_path / "neuron-venv"
    install_recorders(venv / "bin", "neuron_parallel_compile", "torchrun", "neuron-ls")
    nxdt = tmp_path / "nxdt" / "examples"
    nxdt.mkdir(parents=True)
    record_log = tmp_path / "record.jsonl"
    run_dir = tmp_path / "pythia"
    argv = ["--backend", "neuron", "--model", str(PYTHIA), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(run_dir), "--spec", str(TRN1_SPEC), "--partition", "local",
            "--neuron-venv", str(venv), "--nxdt-dir", str(nxdt)]  # fmt: skip
    compile_id, train_id = submit(local_slurm, argv, {"RECORD_LOG": str(record_log)})
    assert local_slurm.job(train_id)["Dependency"] == f"afterok:{compile_id}(unfulfilled)"
    compiled = wait_for_end(local_slurm, compile_id)
    trained = wait_for_end(local_slurm, train_id)
    assert compiled["JobState"] == trained["JobState"] == "COMPLETED", job_log(run_dir)
    assert (compiled["Requeue"], trained["Requeue"]) == ("0", "1")
    for name in ("compile", "train"):
        _clean_bash(tmp_path / f"pythia.neuron-{name}.sbatch")

    records = read_records(record_log)
    by_tool: dict[str, list[dict]] = {}
    for record in records:
        by_tool.setdefault(record["tool"], []).append(record)
    assert len(by_tool["neuron-ls"]) == 2  # once per job, on its batch node
    compile_runs = sorted(by_tool["neuron_parallel_compile"], key=lambda r: r["env"]["SLURM_NODEID"])
    train_runs = sorted(by_tool["torchrun"], key=lambda r: r["env"]["SLURM_NODEID"])
    assert len(compile_runs) == len(train_runs) == 2  # one launcher per node
    assert max(r["time"] for r in compile_runs) < min(r["time"] for r in train_runs)

    def torchrun_argv(rank: int, overrides: list[str], liveness: list[str]) -> list[str]:
        return [
            "--nproc_per_node", "32", "--nnodes", "2", "--node_rank", str(rank),
            "--master_addr", "127.0.0.1", "--master_port", "41000", *liveness,
            f"{nxdt}/training_orchestrator.py", "--config-path", str(run_dir), "--config-name", "nxdt-config",
            *overrides,
        ]  # fmt: skip

    # The training job's ranks run under launch/liveness.py, beating every 5 s, silent after 25 s (the default
    # 100 s runtime timeout); the compile job's do not.
    liveness = [str(REPO / "launch" / "liveness.py"), "run", "--dir", f"{run_dir}/hang",
                "--interval", "5", "--stale-after", "25", "--"]  # fmt: skip

    compile_overrides = [
        "trainer.max_steps=10",
        "trainer.val_check_interval=10",
        f"exp_manager.explicit_log_dir={run_dir}/nxdt-compile",
        "exp_manager.create_checkpoint_callback=False",
        "exp_manager.create_tensorboard_logger=False",
        "exp_manager.resume_if_exists=False",
    ]
    for rank, record in enumerate(compile_runs):
        assert record["argv"] == ["torchrun", *torchrun_argv(rank, compile_overrides, [])]
        assert record["cwd"] == str(nxdt) and record["env"]["SLURM_JOB_ID"] == compile_id
    for rank, record in enumerate(train_runs):
        assert record["argv"] == torchrun_argv(rank, [f"exp_manager.explicit_log_dir={run_dir}/nxdt"], liveness)
        assert record["env"]["SLURM_JOB_ID"] == train_id
        assert record["env"]["SLURMD_NODENAME"] == f"n{rank + 1}"
        for name, value in {
            "NEURON_COMPILE_CACHE_URL": "/fsx/neuron-cache",
            "NEURON_RT_STOCHASTIC_ROUNDING_EN": "1",
            "XLA_USE_BF16": "1",
            "MALLOC_ARENA_MAX": "128",
            "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "5",
            "FI_PROVIDER": "efa",
            "FI_EFA_USE_DEVICE_RDMA": "1",
            "FI_EFA_FORK_SAFE": "1",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "41000",
        }.items():
            assert record["env"].get(name) == value, name
        assert "NEURON_CC_FLAGS" not in record["env"]  # NxDT sets it from the config's compiler_flags

    nxdt_config = yaml.safe_load((run_dir / "nxdt-config.yaml").read_text())
    assert nxdt_config["distributed_strategy"]["tensor_model_parallel_size"] == 8
    assert nxdt_config["data"]["data_prefix"] == [1.0, str(Path(demo_data).resolve())]
    assert (run_dir / "tokenizer" / "tokenizer.json").exists()


def test_nemo_collective_timeout_drains_the_silent_ranks_node_and_requeues_off_it(
    local_slurm: LocalSlurm, demo_data: str, tmp_path: Path
) -> None:
    """A rank hangs under NeMo (issue 42, fault 4): the framework's collective times out, the live ranks dump the
    flight recorder into RUN_DIR/hang, and the job script names the ranks that wrote none, has their node drained
    (the epilog, root, on request), keeps the dumps and requeues; the requeue waits until a node is free of the
    suspicion. torch's own flight-recorder reader takes every dump the script counted."""
    from torch.distributed.flight_recorder.components.loader import read_dump

    argv, env, run_dir = _nemo_with_standin(tmp_path, demo_data, "collective_timeout_step.py")
    ranks_per_node = 8  # the default spec's p5 queue, rendered for the local partition
    # The spool the nodes' epilogs read (on a node: /etc/llm-health/health.env names it).
    env |= {"STANDIN_RANKS_PER_NODE": str(ranks_per_node), "LLM_DRAIN_REQUESTS": str(local_slurm.drain_requests_dir)}
    (job_id,) = submit(local_slurm, argv, env)
    story = lambda: job_story(local_slurm, run_dir, job_id)  # noqa: E731
    wait_until(lambda: local_slurm.job(job_id).get("Restarts") == "1", "the requeue after the timeout", story=story)
    log = job_log(run_dir)
    silent = " ".join(str(rank) for rank in range(ranks_per_node, 2 * ranks_per_node))
    reason = f"a collective timed out: {ranks_per_node} ranks wrote flight-recorder dumps, {ranks_per_node} did not ({silent})"
    assert f"hang: {reason}" in log, story()
    assert "hang: asked to drain n2" in log, story()
    evidence = run_dir / f"hang-{job_id}.0"
    assert (evidence / "suspect_nodes").read_text() == "n2\n"
    dumps = sorted(evidence.glob("nccl-trace-rank-*"))
    assert [read_dump("nccl-trace-rank-", str(path))["rank"] for path in dumps] == sorted(
        range(ranks_per_node), key=str
    )

    # The epilog drained n2 with the job's reason; the requeued 2-node job cannot run until it is back.
    drained = wait_until(
        lambda: next((n for n in local_slurm.node_states() if n.name == "n2" and n.state in {"drained", "draining"}), None),
        "n2 drained by its epilog", story=story,
    )  # fmt: skip
    assert drained.reason.startswith(f"job {job_id}: hang watchdog: {reason}"), drained
    wait_until(lambda: local_slurm.job(job_id).get("JobState") == "PENDING", "the requeued job pending", story=story)
    local_slurm.run(["scontrol", "update", "nodename=n2", "state=resume"])  # an operator cleared it
    job = wait_for_end(local_slurm, job_id, run_dir=run_dir)
    assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "1"), story()
    assert "requeueing (failure 1 of at most" in log, story()


def test_neuron_rank_that_stops_answering_has_its_node_drained_and_the_job_requeued_off_it(
    local_slurm: LocalSlurm, demo_data: str, tmp_path: Path
) -> None:
    """A rank hangs under NxDT (issue 42, fault 4, Trainium): real torchrun on two nodes starts every rank under
    launch/liveness.py; one rank freezes (SIGSTOP), its peers' collective times out after the rendered
    `neuron_rt_exec_timeout` and they fail. The job script names the rank whose heartbeat had stopped, has its node
    drained by the epilog, keeps the tracebacks and requeues; the requeued job waits for a node free of suspicion
    and finishes."""
    from cluster.verify.local_observability import free_ports

    venv = tmp_path / "neuron-venv"
    install_recorders(venv / "bin", "neuron_parallel_compile", "neuron-ls")
    (venv / "bin" / "torchrun").symlink_to(STANDINS / "neuron-torchrun")
    nxdt = tmp_path / "nxdt" / "examples"
    nxdt.mkdir(parents=True)
    (nxdt / "training_orchestrator.py").symlink_to(STANDINS / "neuron_orchestrator.py")
    run_dir = tmp_path / "pythia"
    (port,) = free_ports(1)
    argv = ["--backend", "neuron", "--model", str(PYTHIA), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(run_dir), "--spec", str(TRN1_SPEC), "--partition", "local",
            "--neuron-venv", str(venv), "--nxdt-dir", str(nxdt), "--master-port", str(port),
            "--neuron-exec-timeout", "24"]  # fmt: skip
    env = {
        "RECORD_LOG": str(tmp_path / "record.jsonl"),
        "HOST_PYTHON": sys.executable,
        "STANDIN_NPROC": "2",
        "STANDIN_STOP_RANK": "3",  # the second node's second rank
        "LLM_DRAIN_REQUESTS": str(local_slurm.drain_requests_dir),
    }
    compile_id, train_id = submit(local_slurm, argv, env)
    story = lambda: job_story(local_slurm, run_dir, train_id)  # noqa: E731
    wait_until(lambda: local_slurm.job(train_id).get("Restarts") == "1", "the requeue after the hang", story=story)
    log = job_log(run_dir)
    reason = "had sent no heartbeat for over 6 s (3)"
    assert reason in log and "of 4 ranks" in log, story()
    assert "hang: asked to drain n2" in log, story()
    evidence = run_dir / f"hang-{train_id}.0"
    assert (evidence / "suspect_nodes").read_text() == "n2\n"
    first = json.loads((evidence / "first-failure").read_text())
    assert first["rank"] in (0, 1, 2) and first["world_size"] == 4, first
    for rank in (0, 1, 2):  # the live ranks' stacks: each failed in the collective
        assert "all_reduce" in (evidence / f"rank-{rank}.traceback").read_text(), rank

    drained = wait_until(
        lambda: next((n for n in local_slurm.node_states() if n.name == "n2" and n.state in {"drained", "draining"}), None),
        "n2 drained by its epilog", story=story,
    )  # fmt: skip
    assert drained.reason.startswith(f"job {train_id}: hang watchdog: rank "), drained
    assert reason in drained.reason, drained
    wait_until(lambda: local_slurm.job(train_id).get("JobState") == "PENDING", "the requeued job pending", story=story)
    local_slurm.run(["scontrol", "update", "nodename=n2", "state=resume"])  # an operator cleared it
    job = wait_for_end(local_slurm, train_id, run_dir=run_dir)
    assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "1"), story()
    assert wait_for_end(local_slurm, compile_id)["JobState"] == "COMPLETED"
    log = job_log(run_dir)
    assert "requeueing (failure 1 of at most" in log and "rank 3 step 5 sum 4" in log, story()
