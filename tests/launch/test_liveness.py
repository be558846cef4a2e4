"""launch/liveness.py: the heartbeat bounds, and on real gloo process groups (the ranks started as torchrun starts
them, under the wrapper) which rank a failure names as silent: a frozen rank (SIGSTOP) is, a crashing one is not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.verify.local_observability import free_ports
from launch import liveness
from launch.neuron import DEFAULT_EXEC_TIMEOUT_S, MIN_EXEC_TIMEOUT_S
from tests.waiting import wait_until

TOOL = Path(liveness.__file__)

STEPS = """
import datetime, os, signal, sys
import torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ["STEP_TIMEOUT_S"])))
rank = dist.get_rank()
for step in range(4):
    if step == 2 and rank == 1:
        fault = os.environ["FAULT"]
        if fault == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif fault == "raise":
            raise ValueError("a bug in step 2")
        elif fault == "exit":
            sys.exit(3)
    dist.all_reduce(torch.ones(1))
dist.destroy_process_group()
"""


@pytest.mark.parametrize("timeout_s", [MIN_EXEC_TIMEOUT_S, 30, DEFAULT_EXEC_TIMEOUT_S, 600, 1800])
def test_bounds_leave_a_live_rank_two_missed_beats_and_stay_under_half_the_runtime_timeout(timeout_s: int) -> None:
    interval, stale = liveness.heartbeat_bounds(timeout_s)
    assert interval >= 1 and stale >= 3 * interval
    assert stale <= timeout_s / 2


def _start_ranks(tmp_path: Path, fault: str, world_size: int = 2) -> tuple[list[subprocess.Popen[bytes]], Path]:
    script = tmp_path / "steps.py"
    script.write_text(STEPS)
    hang = tmp_path / "hang"
    (port,) = free_ports(1)
    ranks = []
    for rank in range(world_size):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "SLURMD_NODENAME": f"n{rank + 1}",
               "STEP_TIMEOUT_S": "15", "FAULT": fault}  # fmt: skip
        argv = [sys.executable, str(TOOL), "run", "--dir", str(hang), "--interval", "0.5", "--stale-after", "4"]
        ranks.append(subprocess.Popen([*argv, "--", str(script)], env=env))
    return ranks, hang


@pytest.mark.distributed
def test_a_frozen_rank_is_named_with_its_node_and_the_live_rank_leaves_its_traceback(tmp_path: Path) -> None:
    (live, frozen), hang = _start_ranks(tmp_path, "stop")
    try:
        assert live.wait(timeout=300) != 0  # its all-reduce timed out waiting for the frozen rank
        assert wait_until(lambda: _state(frozen.pid) == "T", "rank 1 stopped")
    finally:
        frozen.kill()
        frozen.wait()
    first = json.loads((hang / liveness.FIRST_FAILURE_FILE).read_text())
    assert (first["rank"], first["node"], first["world_size"]) == (0, "n1", 2)
    assert first["heartbeat_ages_s"]["1"] > 4 >= first["heartbeat_ages_s"]["0"], first
    assert "all_reduce" in (hang / "rank-0.traceback").read_text()

    found = subprocess.run(
        [sys.executable, str(TOOL), "suspects", "--dir", str(hang), "--nodes", "n1 n2"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "rank 0 failed first; 1 of 2 ranks had sent no heartbeat for over 4 s (1)"
    assert (hang / "suspect_nodes").read_text() == "n2\n"  # from the rank's own record, not the layout


@pytest.mark.distributed
@pytest.mark.parametrize("fault", ["raise", "exit"])
def test_a_rank_that_fails_while_every_rank_beats_is_an_ordinary_failure(tmp_path: Path, fault: str) -> None:
    """A crash (an exception, or sys.exit with a failure status) is no hang: the peers were beating when it failed,
    so nothing is named and no node would be drained; the crashing rank's traceback is kept."""
    ranks, hang = _start_ranks(tmp_path, fault)
    assert [rank.wait(timeout=300) != 0 for rank in ranks] == [True, True]
    first = json.loads((hang / liveness.FIRST_FAILURE_FILE).read_text())
    assert first["rank"] == 1 and max(first["heartbeat_ages_s"].values()) <= 4, first
    expected = "ValueError: a bug in step 2" if fault == "raise" else "SystemExit(3)"
    assert first["error"] == expected and expected in (hang / "rank-1.traceback").read_text()
    assert liveness.suspects(hang, ["n1", "n2"]) is None
    assert liveness.main(["suspects", "--dir", str(hang), "--nodes", "n1 n2"]) == 1
    assert not (hang / "suspect_nodes").exists()


def test_a_rank_that_never_beat_is_silent_and_placed_by_the_node_layout(tmp_path: Path) -> None:
    """A rank whose heartbeat file does not exist (its node never started it, or lost the file system before)
    counts as silent; with no record of its own, torchrun's layout (node rank = SLURM_NODEID) places it."""
    hang = tmp_path / "hang"
    hang.mkdir()
    ages = {"0": 0.2, "1": 0.3, "2": None, "3": None}
    first = {
        "rank": 0,
        "node": "n1",
        "at": 0,
        "world_size": 4,
        "stale_after_s": 25,
        "error": "",
        "heartbeat_ages_s": ages,
    }
    (hang / liveness.FIRST_FAILURE_FILE).write_text(json.dumps(first))
    assert liveness.suspects(hang, ["n1", "n2"]) == (
        "rank 0 failed first; 2 of 4 ranks had sent no heartbeat for over 25 s (2 3)",
        ["n2"],
    )


def test_no_failure_recorded_is_no_hang(tmp_path: Path) -> None:
    """The step was killed from outside (scancel, a time limit): no rank's script failed, so nothing is named."""
    (tmp_path / "hang").mkdir()
    assert liveness.suspects(tmp_path / "hang", ["n1"]) is None


def test_a_successful_run_leaves_no_failure_and_passes_the_arguments_through(tmp_path: Path) -> None:
    script = tmp_path / "echo.py"
    script.write_text("import json, sys\nprint(json.dumps([sys.argv, sys.path[0]]))\n")
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1"}
    argv = [sys.executable, str(TOOL), "run", "--dir", str(tmp_path / "hang"), "--interval", "1", "--stale-after", "3"]
    done = subprocess.run([*argv, "--", str(script), "--config-path", "d", "x=1"], env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert json.loads(done.stdout) == [[str(script), "--config-path", "d", "x=1"], str(tmp_path)]
    assert not (tmp_path / "hang" / liveness.FIRST_FAILURE_FILE).exists()
    assert json.loads((tmp_path / "hang" / "alive-rank-0").read_text())["rank"] == 0


def test_the_wrapper_imports_nothing_outside_the_standard_library() -> None:
    """Run by path with the Neuron venv's python on the nodes: the repo's packages are not importable there."""
    code = f"import runpy, sys; sys.path = [p for p in sys.path if 'site-packages' not in p]; runpy.run_path({str(TOOL)!r})"
    assert subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, check=False).returncode == 0


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""
