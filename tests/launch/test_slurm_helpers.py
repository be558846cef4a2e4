"""The job tests' waits decide from what the job left behind, not from one look at its state."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.launch.slurm_helpers import attempt_started, resumed_steps, wait_for_restart
from tests.waiting import wait_until


class StateOnly:
    """A cluster whose scontrol answers come from a list, the last one repeated."""

    def __init__(self, *answers: dict[str, str]) -> None:
        self.answers = list(answers)
        self.log_dir = Path("/nonexistent")

    def job(self, job_id: str) -> dict[str, str]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def _log(run_dir: Path, *restarts: int) -> Path:
    (run_dir / "logs").mkdir(parents=True)
    lines = [f"job[2026-11-26T10:00:0{r}Z]: job 8 (nemo-run) restart {r}; 0 failed attempts requeued of at most 0"
             for r in restarts]  # fmt: skip
    (run_dir / "logs" / "nemo-run-8.out").write_text("\n".join([*lines, "job[...]: finished", ""]))
    return run_dir


def test_an_attempt_that_ran_and_ended_between_two_looks_is_seen(tmp_path: Path) -> None:
    # The CI failure: the first look at the job already found the requeued attempt COMPLETED.
    run_dir = _log(tmp_path / "run", 0, 1)
    completed = StateOnly({"JobState": "COMPLETED", "Restarts": "1", "ExitCode": "0:0"})
    wait_for_restart(completed, run_dir, "8", 1)  # type: ignore[arg-type]
    assert attempt_started(run_dir, "8", 0) and attempt_started(run_dir, "8", 1)
    assert not attempt_started(run_dir, "8", 2) and not attempt_started(run_dir, "18", 1)


def test_a_job_that_ended_without_the_attempt_is_named_with_its_log(tmp_path: Path) -> None:
    run_dir = _log(tmp_path / "run", 0)
    failed = StateOnly({"JobState": "RUNNING", "Restarts": "0"}, {"JobState": "FAILED", "Restarts": "0"})
    with pytest.raises(AssertionError, match=r"job 8 ended \(FAILED, Restarts 0\) without starting attempt 2") as e:
        wait_for_restart(failed, run_dir, "8", 1)  # type: ignore[arg-type]
    assert "restart 0; 0 failed attempts" in str(e.value)


def test_resumes_are_read_in_order_from_the_trainers_lines(tmp_path: Path) -> None:
    run_dir = _log(tmp_path / "run", 0)
    with (run_dir / "logs" / "nemo-run-8.out").open("a") as log:
        log.write("INFO resumed from /x/checkpoints/step-4 at step 4 (16 samples consumed)\n")
        log.write("INFO resumed from /x/checkpoints/step-10 at step 10 (40 samples consumed)\n")
    assert resumed_steps(run_dir) == [4, 10]


def test_an_expired_wait_says_what_it_waited_for_and_the_story() -> None:
    with pytest.raises(AssertionError, match=r"waited 0 s for the moon\nno moon tonight"):
        wait_until(lambda: False, "the moon", 0.0, lambda: "no moon tonight", poll_s=0.0)
    assert wait_until(lambda: 7, "seven", 0.0) == 7
