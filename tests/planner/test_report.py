"""llm-report on sacct output recorded from the local cluster's real slurmdbd (tests/planner/fixtures), and its
CLI's one-line errors. The same report runs against a live slurmdbd in tests/cluster/test_local_slurm_accounting.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.comment import Plan, parse_plan, plan_comment
from planner.report import ReportError, parse_sacct, partition_prices, render_table, summarize
from spec import load_spec

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "tests" / "planner" / "fixtures" / "sacct-local-slurmdbd.txt"
# From the local cluster with two stand-in GPUs per node (LocalSlurm gpus_per_node=2, AccountingStorageTRES=gres/gpu):
# a 2-node job with --exclusive --gpus-per-node=2, a CPU job, and a 1-node --exclusive job asking for 1 GPU (Slurm
# allocates it both: --exclusive hands over every GRES of the node).
RECORDED_GPUS = REPO / "tests" / "planner" / "fixtures" / "sacct-local-slurmdbd-gres.txt"


def test_recorded_sacct_output_parses_to_one_record_per_job() -> None:
    records = parse_sacct(RECORDED.read_text())
    assert [(r.job_id, r.user, r.account, r.nodes, r.elapsed_s, r.state, r.exit_code) for r in records] == [
        ("1", "root", "research", 2, 4, "COMPLETED", "0:0"),
        ("2", "nobody", "research", 1, 2, "COMPLETED", "0:0"),
        ("3", "daemon", "ops", 1, 1, "FAILED", "3:0"),
        ("4", "nobody", "research", 0, 0, "CANCELLED", "0:0"),  # "CANCELLED by 0": the state word only
    ]
    assert records[0].plan == Plan(usd=0.01, hours=0.001, steps=10)
    assert records[2].plan is None  # a free-text comment (with a '|') is no plan and breaks no column
    assert records[0].month == "2026-11" and records[3].month == "not started"


def test_spent_is_nodes_times_hours_times_the_partition_price() -> None:
    records = parse_sacct(RECORDED.read_text())
    rows = summarize(records, {"local": 3600.0}, "job")  # 1 USD per node-second: easy to read
    assert [(row.key, row.node_hours * 3600, row.spent_usd, row.planned_usd) for row in rows] == [
        ("1", 8.0, 8.0, 0.01),
        ("2", 2.0, 2.0, None),
        ("3", 1.0, 1.0, None),
        ("4", 0.0, 0.0, None),
    ]
    assert rows[0].spent_of_planned == pytest.approx(800.0)
    by_user = {row.key: row for row in summarize(records, {"local": 3600.0}, "user")}
    assert (by_user["nobody"].jobs, by_user["nobody"].spent_usd, by_user["nobody"].planned_usd) == (2, 2.0, None)
    assert (by_user["root"].spent_usd, by_user["root"].planned_usd) == (8.0, 0.01)
    by_month = summarize(records, {}, "month")
    assert [(row.key, row.jobs, row.spent_usd) for row in by_month] == [("2026-11", 3, None), ("not started", 1, None)]


def test_prices_come_from_the_spec_queues_and_the_overrides() -> None:
    spec = load_spec(REPO / "spec" / "examples" / "p5-on-demand.yaml")
    prices = partition_prices(spec, {"local": 0.5})
    assert prices["local"] == 0.5
    assert prices["gpu"] > 50  # p5.48xlarge on demand, from the facts table


def test_table_has_totals_and_marks_what_is_unknown() -> None:
    rows = summarize(parse_sacct(RECORDED.read_text()), {}, "user")
    table = render_table(rows, "user").splitlines()
    assert table[0].split() == [
        "user", "jobs", "node-hours", "GPU-hours", "spent", "USD", "planned", "USD", "spent/planned"
    ]  # fmt: skip
    assert table[-1].split()[:3] == ["total", "4", "0.00"]
    assert table[-1].split()[3:] == ["-", "-", "0.01"]  # no AllocTRES in this recording: GPU-hours unknown


def test_gpu_hours_are_the_gpus_sacct_allocated_times_elapsed() -> None:
    records = parse_sacct(RECORDED_GPUS.read_text())
    assert [(r.job_id, r.name, r.gpus, r.elapsed_s) for r in records] == [
        ("1", "fsdp-gpus", 4, 3),  # 2 nodes x --gpus-per-node=2
        ("2", "cpu-only", None, 1),  # AllocTRES names no gres/gpu
        ("3", "one-gpu", 2, 2),
    ]
    assert records[0].plan == Plan(usd=0.02, hours=0.002, steps=5)
    by_job = summarize(records, {}, "job")
    assert [row.gpu_hours for row in by_job] == [4 * 3 / 3600, None, 2 * 2 / 3600]
    by_user = {row.key: row.gpu_hours for row in summarize(records, {}, "user")}
    assert by_user == {"root": 4 * 3 / 3600, "nobody": 2 * 2 / 3600}
    table = render_table(summarize(records, {}, "job"), "job").splitlines()
    assert [line.split()[3] for line in table[1:]] == ["0.00", "-", "0.00", "0.00"]


def test_alloc_tres_without_a_gpu_count_is_one_line_naming_it() -> None:
    header, first = RECORDED_GPUS.read_text().splitlines()[:2]
    with pytest.raises(ReportError, match=r"^sacct output line 2: AllocTRES gres/gpu='x' is not a count$"):
        parse_sacct(f"{header}\n{first.replace('gres/gpu=4', 'gres/gpu=x')}\n")


def test_plan_comments_round_trip_and_bad_ones_are_no_plan() -> None:
    plan = Plan(usd=1234.5, hours=20.25, steps=5000)
    assert plan_comment(plan) == "llm-plan:v1,usd=1234.5,hours=20.25,steps=5000"
    assert parse_plan(plan_comment(plan)) == plan
    assert parse_plan("llm-plan:v1 usd=abc hours=1") is None
    planned = Plan(usd=10.0, hours=2.0, steps=100, backend="nemo")
    assert plan_comment(planned) == "llm-plan:v1,backend=nemo,usd=10,hours=2,steps=100"
    assert parse_plan(plan_comment(planned)) == planned
    assert parse_plan("something else") is None


def test_malformed_sacct_output_is_one_line_naming_what() -> None:
    with pytest.raises(ReportError, match=r"^sacct output: header lacks Comment"):
        parse_sacct("JobID|JobName|User|Account|Partition|AllocNodes|ElapsedRaw|Start|End|State|ExitCode\n")
    header = RECORDED.read_text().splitlines()[0]
    with pytest.raises(ReportError, match=r"^sacct output line 2: 3 fields, header has 12"):
        parse_sacct(f"{header}\n1|a|b\n")


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "planner.report", *args], cwd=REPO, input=stdin, capture_output=True, text=True
    )


def test_cli_reads_recorded_output_and_prints_json() -> None:
    result = cli("--sacct-file", str(RECORDED), "--by", "month", "--price", "local=3600", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(row["key"], row["jobs"], row["spent_usd"]) for row in rows] == [
        ("2026-11", 3, 11.0),
        ("not started", 1, 0.0),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--price", "local"], "error: --price: 'local' must be PARTITION=USD_PER_NODE_HOUR, such as local=0.50\n"),
        (["--start", "yesterday"], "error: --start: 'yesterday' must be YYYY-MM-DD[THH:MM[:SS]] or now-<N>days\n"),
        (["--sacct-file", "/nonexistent"], "error: --sacct-file: '/nonexistent': No such file or directory\n"),
        (
            ["--by", "team"],
            "llm-report: error: argument --by: invalid choice: 'team' (choose from 'job', 'user', 'month')\n",
        ),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = cli(*args)
    assert (result.returncode, result.stderr) == (2, message)


def test_a_runs_latest_llm_eval_scores_are_a_line_of_the_report(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for step, acc in ((50, 0.25), (100, 0.3125)):
        (run / "eval" / f"step-{step}").mkdir(parents=True)
        results = {"demo_choice": {"alias": "demo_choice", "acc,none": acc, "acc_stderr,none": 0.04}}
        (run / "eval" / f"step-{step}" / "results.json").write_text(json.dumps({"results": results}))
    result = cli(
        "--sacct-file", str(RECORDED), "--price", "local=3600", "--run-dir", str(run), "--run-dir", str(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-2] == f"scores {run} step 100: demo_choice acc 0.3125"
    assert lines[-1].startswith(f"scores {tmp_path}: none yet")


def test_a_job_line_says_which_backend_was_planned() -> None:
    from planner.report import JobRecord, summarize

    record = JobRecord(
        job_id="7", name="nemo-run", user="u", account="a", partition="p5", nodes=2, elapsed_s=3600,
        start="2026-11-27T10:00:00", state="COMPLETED", exit_code="0:0",
        plan=Plan(usd=100.0, hours=1.0, steps=10, backend="nemo"),
    )  # fmt: skip
    (row,) = summarize([record], {"p5": 55.04}, "job")
    assert row.detail.endswith("planned as nemo") and row.planned_usd == 100.0


def test_the_job_comment_says_whether_nemo2_or_bridge_ran_and_old_comments_still_read() -> None:
    from planner.report import JobRecord, summarize

    for name, words in (("nemo2", "nemo2 (NeMo 2)"), ("bridge", "bridge (Megatron Bridge)")):
        planned = Plan(usd=10.0, hours=2.0, steps=100, backend=name)
        assert plan_comment(planned) == f"llm-plan:v1,backend={name},usd=10,hours=2,steps=100"
        assert parse_plan(plan_comment(planned)) == planned
        record = JobRecord(
            job_id="7", name="nemo-run", user="u", account="a", partition="p5", nodes=2, elapsed_s=3600,
            start="2026-11-27T10:00:00", state="COMPLETED", exit_code="0:0", plan=planned,
        )  # fmt: skip
        (row,) = summarize([record], {"p5": 55.04}, "job")
        assert row.detail.endswith(f"planned as {words}")
    # Written before the two were told apart: either framework, shown as it was recorded.
    old = parse_plan("llm-plan:v1,backend=nemo,usd=10,hours=2,steps=100")
    assert old is not None and old.backend == "nemo"
