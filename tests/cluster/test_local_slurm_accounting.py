"""Accounting on real parts: the local cluster's slurmdbd on its own MariaDB, the sacctmgr script rendered from
the spec, QoS limits enforced by slurmctld, and sacct reading the jobs back (who, how long, where, how it ended).
Its nodes declare two stand-in GPUs each (GRES gpu), so GPU requests, AllocTRES gres/gpu and GPU QoS limits are real."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.accounting import sacctmgr_script
from cluster.verify.local_slurm import LocalSlurm
from slurm.render import sbatch_directives
from slurm.target import LOCAL_PARTITION, Target
from spec.accounting import AccountingSpec
from spec.platform.instances import InstanceFacts
from tests.waiting import wait_until

pytestmark = pytest.mark.slurm

# Users that exist on every Debian host: jobs really run under their uids (sbatch through runuser).
ACCOUNTING = AccountingSpec.model_validate(
    {
        "enabled": True,
        "qos": [
            {"name": "small", "max_nodes_per_user": 1, "priority": 10},
            {"name": "big", "priority": 100, "max_wall_minutes": 60},
            {"name": "gpu-user", "max_gpus_per_user": 2},
            {"name": "gpu-group", "group_max_gpus": 2},
        ],
        "teams": [
            {"name": "research", "members": ["root", "nobody"], "qos": ["big", "small"], "fairshare": 3},
            {"name": "ops", "members": ["daemon"], "qos": ["small"]},
            {"name": "training", "members": ["root"], "qos": ["normal", "gpu-user", "gpu-group"]},
        ],
    }
)
SACCT_FIELDS = "JobID,User,Account,QOS,AllocNodes,NodeList,ElapsedRaw,State,ExitCode,ReqTRES,AllocTRES,Comment"
GPUS_PER_NODE = 2
# A GPU queue's node as the local cluster stands it in: what our renderers read to request the node's GPUs.
LOCAL_GPU_NODE = InstanceFacts(
    name="local-gpu", accelerator="gpu", accelerators_per_node=GPUS_PER_NODE, accelerator_memory_gib=1.0,
    efa_interfaces=0, network_gbps=0.0, peak_bf16_flops_per_accelerator=1.0, on_demand_usd_per_hour=0.0, vcpus=1,
    memory_gib=4.0,
)  # fmt: skip


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalSlurm]:
    # Not under pytest's tmp dir (mode 700): the other users' sbatch must read slurm.conf.
    state = Path(tempfile.mkdtemp(prefix="local-slurm-accounting-"))
    state.chmod(0o755)
    cluster = LocalSlurm(state, accounting=ACCOUNTING, gpus_per_node=GPUS_PER_NODE)
    try:
        cluster.up()
        apply(cluster)
        yield cluster
    finally:
        cluster.down()
        shutil.rmtree(state, ignore_errors=True)


def apply(cluster: LocalSlurm, accounting: AccountingSpec = ACCOUNTING) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["bash", "-c", sacctmgr_script(accounting)], env=cluster.env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result


def submit(cluster: LocalSlurm, user: str, *args: str) -> str:
    command = ["sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", *args]
    if user != "root":
        command = ["runuser", "-u", user, "--", *command]
    return cluster.run(command).stdout.strip().split(";")[0]


def wait_for(predicate, what: str, timeout_s: float = 600):  # type: ignore[no-untyped-def]
    return wait_until(predicate, what, timeout_s, poll_s=0.3)


def sacct(cluster: LocalSlurm, *job_ids: str) -> dict[str, dict[str, str]]:
    out = cluster.run(
        [
            "sacct",
            "--parsable2",
            "--allocations",
            "--allusers",
            f"--jobs={','.join(job_ids)}",
            f"--format={SACCT_FIELDS}",
        ]
    ).stdout.splitlines()
    header = out[0].split("|")
    return {row["JobID"]: row for row in (dict(zip(header, line.split("|"), strict=True)) for line in out[1:])}


def test_the_script_creates_accounts_users_and_qos_and_a_second_run_changes_nothing(cluster: LocalSlurm) -> None:
    associations = cluster.run(
        ["sacctmgr", "-n", "-P", "show", "assoc", "format=account,user,qos,defaultqos,fairshare"]
    ).stdout.splitlines()
    assert "research|nobody|big,small|big|1" in associations
    assert "research||big,small|big|3" in associations
    assert "ops|daemon|small|small|1" in associations
    qos = cluster.run(["sacctmgr", "-n", "-P", "show", "qos", "format=name,priority,maxtrespu,maxwall"]).stdout
    assert qos.splitlines() == [
        "normal|0||", "small|10|node=1|", "big|100||01:00:00", "gpu-user|0|gres/gpu=2|", "gpu-group|0||"
    ]  # fmt: skip
    again = apply(cluster)
    assert "adding" not in again.stderr  # nothing is missing the second time
    shares = cluster.run(["sshare", "-n", "-P", "-a", "-o", "Account,User,RawShares"]).stdout.splitlines()
    assert "research||3" in [line.strip() for line in shares]


def test_jobs_read_back_with_sacct_who_how_long_where_and_how_they_ended(cluster: LocalSlurm) -> None:
    ok = submit(cluster, "root", "-N", "2", "-A", "research", "--qos=big", "--comment=free text",
                "--wrap", "srun sleep 2")  # fmt: skip
    failed = submit(cluster, "daemon", "-A", "ops", "--wrap", "exit 3")
    done = {"COMPLETED", "FAILED"}

    def finished() -> dict[str, dict[str, str]] | None:
        # slurmdbd fills a record in over several messages (its QOS reads 'Unknown' for a moment): wait for all.
        found = sacct(cluster, ok, failed)
        complete = set(found) == {ok, failed} and all(r["QOS"] != "Unknown" for r in found.values())
        return found if complete and {r["State"] for r in found.values()} <= done else None

    rows = wait_for(finished, "both jobs finished")
    assert rows[ok]["User"] == "root" and rows[ok]["Account"] == "research" and rows[ok]["QOS"] == "big"
    assert rows[ok]["AllocNodes"] == "2" and rows[ok]["NodeList"] == "n[1-2]"
    assert 2 <= int(rows[ok]["ElapsedRaw"]) <= 30
    assert (rows[ok]["State"], rows[ok]["ExitCode"]) == ("COMPLETED", "0:0")
    assert rows[ok]["Comment"] == "free text"
    assert (rows[failed]["User"], rows[failed]["Account"], rows[failed]["QOS"]) == ("daemon", "ops", "small")
    assert (rows[failed]["State"], rows[failed]["ExitCode"]) == ("FAILED", "3:0")


def gpu_job(path: Path, nodes: int, body: str) -> Path:
    """A script whose resource lines are what our renderers write for a whole-node GPU job (Target)."""
    target = Target(LOCAL_PARTITION, LOCAL_PARTITION, LOCAL_GPU_NODE, efa=False, shared_dir=None)
    directives = [("nodes", str(nodes)), *target.whole_node_directives()]
    path.write_text("#!/bin/bash\n" + sbatch_directives(directives) + body + "\n")
    return path


def test_a_gpu_job_shows_its_gpus_in_sacct_and_llm_reports_its_gpu_hours(cluster: LocalSlurm, tmp_path: Path) -> None:
    script = gpu_job(tmp_path / "gpus.sbatch", 2, "srun sleep 2")
    assert f"#SBATCH --gpus-per-node={GPUS_PER_NODE}" in script.read_text().splitlines()
    job = submit(cluster, "root", "-A", "training", "-J", "gpu-hours", str(script))
    # slurmdbd completes a record over several messages (ReqTRES may come last): wait for the whole of it.
    row = wait_for(lambda: (found := sacct(cluster, job).get(job)) and found["State"] == "COMPLETED"
                   and found["ReqTRES"] and found["AllocTRES"] and found, "the GPU job's finished record")  # fmt: skip
    gpus = 2 * GPUS_PER_NODE
    assert f"gres/gpu={gpus}" in row["AllocTRES"].split(","), row["AllocTRES"]
    assert f"gres/gpu={gpus}" in row["ReqTRES"].split(","), row["ReqTRES"]  # requested, not only --exclusive's
    env = {**cluster.env(), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    report = subprocess.run([sys.executable, "-m", "planner.report", "--by", "job", "--start", "now-1days", "--json"],
                            env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert report.returncode == 0, report.stderr
    (reported,) = [item for item in json.loads(report.stdout) if item["key"] == job]
    assert reported["gpu_hours"] == pytest.approx(gpus * int(row["ElapsedRaw"]) / 3600)


def test_a_job_asking_for_more_gpus_than_a_node_has_is_refused_by_slurm(cluster: LocalSlurm, tmp_path: Path) -> None:
    script = gpu_job(tmp_path / "fits.sbatch", 1, "true")
    refused = cluster.run(["sbatch", "--test-only", "-A", "training", f"--gpus-per-node={GPUS_PER_NODE + 1}",
                           str(script)], check=False)  # fmt: skip
    assert refused.returncode != 0
    assert "Requested node configuration is not available" in refused.stderr, refused.stderr
    fits = cluster.run(["sbatch", "--test-only", "-A", "training", str(script)], check=False)
    assert fits.returncode == 0 and "to start at" in fits.stderr, fits.stderr


@pytest.mark.parametrize(("qos", "reason"), [("gpu-user", "QOSMaxGRESPerUser"), ("gpu-group", "QOSGrpGRES")])
def test_a_gpu_job_over_its_qos_gpu_limit_is_held_with_slurms_reason(
    cluster: LocalSlurm, tmp_path: Path, qos: str, reason: str
) -> None:
    limits = cluster.run(["sacctmgr", "-n", "-P", "show", "qos", qos, "format=maxtrespu,grptres"]).stdout.strip()
    assert limits == {"gpu-user": "gres/gpu=2|", "gpu-group": "|gres/gpu=2"}[qos]
    script = gpu_job(tmp_path / "over.sbatch", 2, "true")  # 4 GPUs against a limit of 2
    job = submit(cluster, "root", "-A", "training", f"--qos={qos}", str(script))
    try:
        held = wait_for(lambda: cluster.job(job).get("Reason", "").startswith("QOS") and cluster.job(job),
                        "a QOS reason")  # fmt: skip
        assert (held["JobState"], held["Reason"]) == ("PENDING", reason)
    finally:
        cluster.run(["scancel", job], check=False)


def test_an_account_the_user_is_not_in_is_refused_at_submission(cluster: LocalSlurm) -> None:
    refused = cluster.run(
        [
            "runuser",
            "-u",
            "daemon",
            "--",
            "sbatch",
            "--chdir=/tmp",
            "-o",
            "/dev/null",
            "-A",
            "research",
            "--wrap",
            "true",
        ],
        check=False,
    )
    assert refused.returncode != 0
    assert "Invalid account or account/partition combination" in refused.stderr


def test_a_job_over_its_qos_limit_pends_until_the_spec_raises_the_limit(cluster: LocalSlurm) -> None:
    job = submit(cluster, "nobody", "-N", "2", "-A", "research", "--qos=small", "--wrap", "sleep 1")
    try:
        reason = wait_for(lambda: cluster.job(job).get("Reason", "").startswith("QOSMax") and cluster.job(job),
                          "a QOSMax reason")  # fmt: skip
        assert (reason["JobState"], reason["Reason"]) == ("PENDING", "QOSMaxNodePerUserLimit")
        time.sleep(3)  # several scheduler passes (sched_interval=2): still held back
        assert cluster.job(job)["JobState"] == "PENDING"
        raised = ACCOUNTING.model_copy(
            update={"qos": [ACCOUNTING.qos[0].model_copy(update={"max_nodes_per_user": 2}), ACCOUNTING.qos[1]]}
        )
        apply(cluster, raised)
        assert wait_for(lambda: cluster.job(job).get("JobState") == "COMPLETED", "the job running")
    finally:
        apply(cluster)
        cluster.run(["scancel", job], check=False)


def test_a_time_limit_over_the_qos_wall_is_held_with_its_reason(cluster: LocalSlurm) -> None:
    job = submit(cluster, "root", "-A", "research", "--qos=big", "--time=120", "--wrap", "true")
    try:
        state = wait_for(lambda: cluster.job(job).get("Reason", "").startswith("QOSMax") and cluster.job(job),
                         "a QOSMax reason")  # fmt: skip
        assert (state["JobState"], state["Reason"]) == ("PENDING", "QOSMaxWallDurationPerJobLimit")
    finally:
        cluster.run(["scancel", job], check=False)


def test_the_cluster_keeps_its_database_across_a_restart(cluster: LocalSlurm) -> None:
    before = cluster.run(["sacctmgr", "-n", "-P", "show", "account", "format=account"]).stdout.split()
    cluster.down()
    cluster.up()
    assert cluster.run(["sacctmgr", "-n", "-P", "show", "account", "format=account"]).stdout.split() == before
    assert set(cluster.running_daemons()) == {"slurmd-n1", "slurmd-n2", "slurmctld", "slurmdbd", "mariadbd", "munged"}
    assert Path(cluster.state_dir / "slurmdbd.conf").stat().st_mode & 0o077 == 0


def test_the_head_node_bootstrap_applies_the_payloads_script_once_slurmdbd_answers(
    cluster: LocalSlurm, tmp_path: Path
) -> None:
    """head_node.sh, as ParallelCluster runs it, with a payload whose spec adds a team: the team appears."""
    from cluster.payload import ACCOUNTING_SCRIPT
    from tests.cluster.test_bootstrap import make_payload, run

    grown = ACCOUNTING.model_copy(update={"teams": [*ACCOUNTING.teams, ACCOUNTING.teams[1].model_copy(
        update={"name": "evaluation", "members": ["nobody"]})]})  # fmt: skip
    payload = make_payload(tmp_path)
    with tarfile.open(payload, "r:gz") as archive:
        members = [(member, archive.extractfile(member)) for member in archive.getmembers()]
        contents = [(member, handle.read() if handle else None) for member, handle in members]
    script = sacctmgr_script(grown).encode()
    with tarfile.open(payload, "w:gz") as archive:
        for member, data in contents:
            archive.addfile(member, io.BytesIO(data) if data is not None else None)
        info = tarfile.TarInfo(ACCOUNTING_SCRIPT)
        info.size, info.mode = len(script), 0o755
        archive.addfile(info, io.BytesIO(script))
    env = {
        **cluster.env(),
        "SLURM_ETC": str(tmp_path / "etc"),
        "SLURM_BIN": "/usr/bin",
        "ACCOUNTING_WAIT_SECONDS": "30",
    }
    try:
        result = run("head_node.sh", ["--payload", str(payload)], env)
        assert result.returncode == 0, result.stderr
        assert "head_node: Slurm accounts, users and QoS match cluster.accounting" in result.stderr
        accounts = cluster.run(["sacctmgr", "-n", "-P", "show", "assoc", "account=evaluation", "format=user,qos"])
        assert accounts.stdout.splitlines() == ["|small", "nobody|small"]
    finally:
        cluster.run(["sacctmgr", "-i", "remove", "account", "evaluation"], check=False)


def test_llm_report_puts_the_plan_next_to_what_sacct_measured(cluster: LocalSlurm) -> None:
    from planner.comment import Plan, plan_comment

    # The comment as llm-submit writes it, with the backend that ran and whose speed was planned (NeMo 2 here, not
    # Megatron Bridge: both are --backend nemo); slurmdbd must keep it whole.
    plan = plan_comment(Plan(usd=0.02, hours=0.001, steps=5, backend="nemo2"))
    assert plan == "llm-plan:v1,backend=nemo2,usd=0.02,hours=0.001,steps=5"
    job = submit(cluster, "nobody", "-N", "2", "-A", "research", "--qos=big", "-J", "fsdp-planned",
                 f"--comment={plan}", "--wrap", "srun sleep 2")  # fmt: skip
    wait_for(lambda: sacct(cluster, job).get(job, {}).get("State") == "COMPLETED", "the planned job finished")
    env = {**cluster.env(), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def report_row() -> dict[str, object] | None:
        # slurmdbd completes a record over several messages (the comment may come last): poll until the
        # report sees the finished job with its plan.
        report = subprocess.run(
            [sys.executable, "-m", "planner.report", "--by", "job", "--start", "now-1days", "--price",
             "local=3600", "--json"],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert report.returncode == 0, report.stderr
        rows = [
            row
            for row in json.loads(report.stdout)
            if row["key"] == job and "COMPLETED" in row["detail"] and row["planned_usd"] is not None
        ]
        return rows[0] if rows else None

    row = wait_for(report_row, "the job in llm-report", 30)
    measured = sacct(cluster, job)[job]  # after the report saw the final record (Elapsed is set at job end)
    assert row["planned_usd"] == 0.02 and row["planned_hours"] == 0.001
    assert row["spent_usd"] == pytest.approx(2 * int(measured["ElapsedRaw"]))  # 2 nodes, 1 USD per node-second
    assert row["detail"].startswith("fsdp-planned nobody/research local x2 COMPLETED 0:0")
    assert row["detail"].endswith("planned as nemo2 (NeMo 2)")  # the backend came back from sacct's Comment
    users = subprocess.run(
        [sys.executable, "-m", "planner.report", "--by", "user", "--start", "now-1days"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert users.returncode == 0 and users.stdout.splitlines()[0].split()[0] == "user"
    assert "no price for partition local: pass --price PARTITION=USD" in users.stderr


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def test_the_cli_starts_accounting_from_a_spec_and_stops_it_without_one(tmp_path: Path) -> None:
    """`python -m cluster.verify.local_slurm up --accounting SPEC`, then a plain `down`: no daemon is left behind."""
    state = Path(tempfile.mkdtemp(prefix="local-slurm-cli-"))
    state.chmod(0o755)
    repo = Path(__file__).resolve().parents[2]
    example = repo / "spec" / "examples" / "p5-on-demand.yaml"
    command = [sys.executable, "-m", "cluster.verify.local_slurm"]
    try:
        up = subprocess.run([*command, "up", "--state-dir", str(state), "--accounting", str(example),
                             "--gpus-per-node", "4"], cwd=repo, capture_output=True, text=True, timeout=300)  # fmt: skip
        assert up.returncode == 0, up.stderr
        assert "accounting: slurmdbd on its own MariaDB" in up.stdout
        cluster = LocalSlurm(state)  # no spec: found from its pid files
        pids = cluster.running_daemons()
        assert {"slurmdbd", "mariadbd"} <= set(pids)
        teams = cluster.run(["sacctmgr", "-n", "-P", "show", "account", "format=account"]).stdout.split()
        assert {"pretraining", "research"} <= set(teams)
        assert cluster.run(["sinfo", "-N", "-h", "-o", "%N %G"]).stdout.splitlines() == ["n1 gpu:4", "n2 gpu:4"]
    finally:
        down = subprocess.run([*command, "down", "--state-dir", str(state)], cwd=repo, capture_output=True, text=True)
        shutil.rmtree(state, ignore_errors=True)
    assert down.returncode == 0, down.stderr
    assert [name for name, pid in pids.items() if _alive(pid)] == []
    negative = subprocess.run([*command, "up", "--state-dir", str(tmp_path), "--gpus-per-node", "-1"], cwd=repo,
                              capture_output=True, text=True)  # fmt: skip
    assert (negative.returncode, negative.stderr.strip()) == (
        2,
        "python -m cluster.verify.local_slurm: error: --gpus-per-node: -1 must be 0 or more",
    )
    bad = subprocess.run([*command, "up", "--state-dir", str(tmp_path), "--accounting", str(repo / "spec" / "default.yaml")],
                         cwd=repo, capture_output=True, text=True)  # fmt: skip
    assert (bad.returncode, bad.stderr.strip()) == (
        1,
        f"error: --accounting: {repo / 'spec' / 'default.yaml'} has no cluster.accounting with enabled: true",
    )
