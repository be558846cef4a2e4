"""A real Prometheus (Debian's 2.42) scrapes the node exporter, our Slurm exporter on the local SLURM cluster, the
EFA exporter on a fixture sysfs tree and the trainer of a 2-node job submitted through SLURM; PromQL reads back
the trainer's tokens/s and the nodes' Slurm states, and the metric names the dashboards and alerts use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cluster.observability.agent_config import RULES_FILE, dump, render
from cluster.observability.dashboards import DASHBOARDS, DIRECTORY, expressions, instantiate, metric_names
from cluster.verify.local_observability import LocalObservability, free_ports
from cluster.verify.local_slurm import LocalSlurm
from spec.observability import ObservabilitySpec
from tests.cluster.test_fabric_counters import bump, efa_tree
from tests.launch.conftest import write_job
from tests.launch.slurm_helpers import job_story, submit, wait_for_end

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]
AMP_URL = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-12345678-abcd-ef01-2345-6789abcdef01/api/v1/remote_write"
UPSTREAM = REPO / "cluster" / "observability" / "upstream_metrics.json"


@pytest.fixture(scope="module")
def stack(local_slurm_session: LocalSlurm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalObservability]:
    local_slurm_session.reset()
    base = tmp_path_factory.mktemp("prometheus")
    sysfs = efa_tree(base / "sys", devices=2)
    with LocalObservability(base / "stack", local_slurm_session.env(), sysfs_root=sysfs) as observability:
        yield observability


@pytest.fixture(scope="module")
def trained(stack: LocalObservability, local_slurm_session: LocalSlurm, demo_data: str, tmp_path_factory) -> str:
    """A 2-node FSDP job whose rank 0 serves its metrics on the stack's trainer port; returns its job id."""
    base = tmp_path_factory.mktemp("observed-run")
    run_dir = base / "run"
    config = write_job(base / "tiny.yaml", train={"max_steps": 40, "log_every": 1})
    argv = ["--backend", "fsdp", "--model", str(config), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(run_dir), "--local", "--time", "00:10:00"]  # fmt: skip
    # As watch does: the trainer's endpoint stays open at the end until the stack has scraped its last values.
    env = {"LLM_TRAINER_METRICS_PORT": str(stack.ports.trainer), "LLM_TRAINER_FINAL_SCRAPE_S": "600"}
    (job_id,) = submit(local_slurm_session, argv, env=env)
    job = wait_for_end(local_slurm_session, job_id, run_dir=run_dir)
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), job_story(local_slurm_session, run_dir, job_id)
    return job_id


def test_prometheus_holds_the_trainers_tokens_per_second_for_the_job(stack: LocalObservability, trained: str) -> None:
    result = stack.wait_for(f'last_over_time(llm_train_tokens_per_second{{slurm_job_id="{trained}"}}[10m])', 120)
    assert len(result) == 1 and float(result[0]["value"][1]) > 0
    labels = result[0]["metric"]
    assert (labels["job"], labels["node"], labels["run"]) == ("trainer", "n1", "run")
    (step,) = stack.query(f'max_over_time(llm_train_step{{slurm_job_id="{trained}"}}[10m])')
    assert float(step["value"][1]) == 40  # the last step's values, scraped before the job ended
    (checkpoint,) = stack.query(f'max_over_time(llm_train_last_checkpoint_step{{slurm_job_id="{trained}"}}[10m])')
    assert float(checkpoint["value"][1]) >= 10  # write_job checkpoints every 10 steps


def test_prometheus_sees_slurm_node_states_and_a_drain_with_its_reason(
    stack: LocalObservability, local_slurm_session: LocalSlurm
) -> None:
    idle = stack.wait_for('slurm_node_state{node="n1", state="idle"} == 1', 120)
    assert idle[0]["metric"]["partition"] == "local"
    local_slurm_session.run(["scontrol", "update", "nodename=n2", "state=drain", "reason=xid 79 on gpu 3"])
    try:
        drained = stack.wait_for('slurm_node_state{node="n2", state="drained"} == 1', 120)
        assert drained[0]["metric"]["reason"] == "xid 79 on gpu 3"
    finally:
        local_slurm_session.resume_all()


def test_efa_counters_and_node_exporter_are_scraped_per_slurm_node(stack: LocalObservability, tmp_path: Path) -> None:
    assert stack.sysfs_root is not None
    bump(stack.sysfs_root, "rdma_read_wr_err", 3, ["rdmap16s0"])
    series = stack.wait_for(
        'efa_hw_counter_total{node="n1", device="rdmap16s0", counter="rdma_read_wr_err", kind="error"} > 1000', 30
    )
    assert float(series[0]["value"][1]) == 1003
    nodes = {item["metric"]["node"] for item in stack.wait_for('up{job="node"} == 1', 120)}
    assert nodes == {"head", "n1", "n2"}
    assert {item["metric"]["job"] for item in stack.query("up == 1")} >= {"node", "slurm", "efa"}


def test_promtool_accepts_the_rendered_config_and_the_alert_rules(stack: LocalObservability) -> None:
    for argv in (
        ["promtool", "check", "config", str(stack.directory / "prometheus.yml")],
        ["promtool", "check", "rules", str(Path("cluster/observability/alerts.yaml").resolve())],
    ):
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
    rules = stack.api("rules")["groups"]
    assert {rule["name"] for group in rules for rule in group["rules"]} >= {"GpuXidError", "CheckpointTooOld"}


def _upstream_names() -> set[str]:
    facts = json.loads(UPSTREAM.read_text())
    return {name for key, entry in facts.items() if not key.startswith("_") for name in entry["metrics"]}


def test_dashboards_are_current_grafana_json_whose_queries_parse_and_name_only_scraped_metrics(
    stack: LocalObservability, trained: str
) -> None:
    scraped = stack.metric_names()
    known = scraped | _upstream_names()
    for name, build in DASHBOARDS.items():
        dashboard = build()
        committed = json.loads((DIRECTORY / f"{name}.json").read_text())
        assert committed == dashboard, f"{name}.json is stale: python -m cluster.observability.dashboards"
        assert {"uid", "title", "panels", "schemaVersion", "templating"} <= dashboard.keys()
        for panel in dashboard["panels"]:
            assert {"id", "type", "title", "gridPos", "datasource", "targets"} <= panel.keys()
        for expr in expressions(dashboard):
            stack.query(instantiate(expr))  # Prometheus' own parser: a syntax error is a 400 and raises
            assert metric_names(expr) <= known, (name, expr, metric_names(expr) - known)
    ours = {name for build in DASHBOARDS.values() for e in expressions(build()) for name in metric_names(e)}
    assert ours - _upstream_names() <= scraped and "llm_train_tokens_per_second" in scraped


def test_alert_rules_name_only_scraped_or_recorded_metrics(stack: LocalObservability) -> None:
    known = stack.metric_names() | _upstream_names()
    rules = yaml.safe_load(RULES_FILE.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert metric_names(rule["expr"]) <= known, (rule["alert"], metric_names(rule["expr"]) - known)


def test_the_demo_watch_command_runs_a_job_under_prometheus_and_prints_its_metrics(
    local_slurm_session: LocalSlurm, demo_data: str, tmp_path: Path
) -> None:
    """What `make demo` ends with: the Prometheus query result for the job it ran."""
    local_slurm_session.reset()
    # A short job: watch has the trainer hold its endpoint open at the end until Prometheus has scraped its last
    # values, so the job is seen however loaded the machine (before that, 20 steps ended unscraped under load).
    config = write_job(tmp_path / "tiny.yaml", train={"max_steps": 20, "log_every": 1})
    run_dir = tmp_path / "demo"
    job = (
        f"job=$({sys.executable} -m launch.submit --backend fsdp --model {config} --nodes 2 --data-prefix {demo_data}"
        f" --run-dir {run_dir} --local | cut -d' ' -f1) && {sys.executable} -m launch.follow --job $job"
        f" --run-dir {run_dir} > {tmp_path / 'follow.log'}"
    )
    # A relative --dir, as make demo passes it: the file_sd paths in the config must still resolve.
    env = {**os.environ, **local_slurm_session.env(), "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "cluster.verify.local_observability", "watch", "--dir", "prom", "--", "bash", "-c", job],
        capture_output=True, text=True, env=env, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr + (tmp_path / "follow.log").read_text()
    lines = result.stdout.splitlines()
    assert any(line.startswith("metrics: a Prometheus on this host scraped the job") for line in lines), result.stdout
    tokens = [line for line in lines if "llm_train_tokens_per_second" in line]
    assert tokens and 'run="demo"' in tokens[0] and float(tokens[0].split("last ")[1].split()[0]) > 0, result.stdout
    assert float(tokens[0].split("mean ")[1]) > 0, result.stdout
    steps = [line for line in lines if line.lstrip().startswith("llm_train_step{")]
    assert steps and float(steps[0].split("last ")[1].split()[0]) == 20, result.stdout  # the last values were scraped


def test_the_agent_config_remote_writes_with_sigv4_from_a_real_prometheus_agent(
    stack: LocalObservability, tmp_path: Path
) -> None:
    """The head node's config, run by Prometheus itself in agent mode: it scrapes the exporters and its SigV4-signed
    remote writes (credentials made up; signing is client-side) land in the stack's server, standing for AMP."""
    document = render(
        ObservabilitySpec(ports=stack.ports), cluster_name="agent-test", targets_dir=stack.targets_dir,
        slurm_exporter=f"127.0.0.1:{stack.ports.slurm}", head_node_exporter=f"127.0.0.1:{stack.ports.node}",
        remote_write_url=AMP_URL, scrape_interval_seconds=1,
    )  # fmt: skip
    assert document["remote_write"][0]["sigv4"] == {"region": "us-east-1"}
    document["remote_write"][0]["url"] = f"{stack.url}/api/v1/write"  # everything else as rendered
    config = tmp_path / "agent.yml"
    config.write_text(dump(document))
    (port,) = free_ports(1)
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "not-a-key-sigv4-test", "AWS_SECRET_ACCESS_KEY": "not-a-secret"}
    with (tmp_path / "agent.log").open("wb") as log:
        agent = subprocess.Popen(
            ["prometheus", "--enable-feature=agent", f"--config.file={config}",
             f"--storage.agent.path={tmp_path / 'wal'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        written = stack.wait_for('slurm_up{cluster="agent-test"} == 1', 60)
        assert written[0]["metric"]["job"] == "slurm"
        assert stack.wait_for('up{cluster="agent-test", job="node", node="n1"} == 1', 120)
    finally:
        agent.terminate()
        agent.wait(timeout=30)
