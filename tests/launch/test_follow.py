"""Following a job's log and summarising its run directory (the demo's last step)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from launch.follow import LogFollower, summarize


def test_the_log_is_printed_as_it_grows_with_the_environment_folded(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "fsdp-run-7.out"
    out = io.StringIO()
    follower = LogFollower(logs, out)
    log.write_text("job: start\n---- environment ----\nA=1\nB=2\n---- end of environment ----\nstep 1 loss 9")
    follower.poll()
    assert out.getvalue() == "job: start\n  (job environment: 2 variables, in the log)\n"
    with log.open("a") as handle:
        handle.write(".5\nstep 2 loss 8.1\n")
    follower.poll()
    assert out.getvalue().endswith("step 1 loss 9.5\nstep 2 loss 8.1\n")  # the partial line waited for its end


def test_the_summary_takes_the_last_attempt_of_each_step_and_the_newest_committed_checkpoint(tmp_path: Path) -> None:
    records = [
        {"kind": "event", "event": "start", "world_size": 2},
        *({"kind": "train", "step": s, "loss": 10.0 - s, "tokens_per_s": 100.0 + s} for s in range(1, 6)),
        {"kind": "event", "event": "start", "world_size": 2},  # resumed at step 4
        {"kind": "train", "step": 5, "loss": 4.5, "tokens_per_s": 90.0},
        {"kind": "train", "step": 6, "loss": 4.0, "tokens_per_s": 95.0},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"kind": "tr')
    for step, committed in ((4, True), (6, True), (8, False)):
        directory = tmp_path / "checkpoints" / f"step-{step}"
        directory.mkdir(parents=True)
        if committed:
            (directory / "COMMITTED").touch()
    summary = summarize(tmp_path)
    assert (summary.final_step, summary.final_loss, summary.world_size) == (6, 4.0, 2)
    assert summary.tokens_per_s_per_device == 101.5  # median of 101, 102, 103, 104, 90, 95
    assert summary.checkpoint == tmp_path / "checkpoints" / "step-6"
    assert summary.plot is None
    lines = summary.lines()
    assert lines[0] == "final loss      4.0000 at step 6"
    assert lines[1].startswith("throughput      102 tokens/s per rank, 203 tokens/s over 2 ranks")


def test_a_megatron_bridge_run_is_summarized_by_its_last_finished_checkpoint(tmp_path: Path) -> None:
    run = tmp_path / "bridge-run"
    for step, finished in ((20, True), (40, True), (60, False)):  # 60: a save the time limit cut short
        (run / "checkpoints" / f"iter_{step:07d}").mkdir(parents=True)
        if finished:
            (run / "checkpoints" / f"iter_{step:07d}" / "train_state.pt").touch()
    (run / "tensorboard").mkdir()
    (run / "exit_status.json").write_text('{"exit_code": 42, "reason": "stopped on SIGUSR1 after a checkpoint"}')
    summary = summarize(run)
    assert summary.checkpoint == run / "checkpoints" / "iter_0000040"
    assert summary.tensorboard == run / "tensorboard"
    assert "exit status     42 (stopped on SIGUSR1 after a checkpoint)" in summary.lines()


def test_a_nemo_checkpoint_still_marked_unfinished_is_not_the_runs_checkpoint(tmp_path: Path) -> None:
    # NeMo's ModelCheckpoint creates `<checkpoint>-unfinished` beside a checkpoint before any rank writes it and
    # removes it after all have: a time limit mid-save leaves the directory and its marker.
    checkpoints = tmp_path / "nemo" / "run" / "checkpoints"
    done, cut = checkpoints / "run--step=99-last", checkpoints / "run--step=199-last"
    done.mkdir(parents=True)
    cut.mkdir()
    (checkpoints / "run--step=199-last-unfinished").touch()
    assert summarize(tmp_path).checkpoint == done


def test_nemo_and_neuron_runs_are_summarized_by_their_own_checkpoints_and_exit_status(tmp_path: Path) -> None:
    nemo = tmp_path / "nemo-run"
    checkpoints = nemo / "nemo" / "nemo-run" / "checkpoints"
    for name in ("nemo-run--val_loss=2.10-step=99-consumed_samples=6400.0", "nemo-run--val_loss=1.90-step=199-last"):
        (checkpoints / name).mkdir(parents=True)
    (nemo / "nemo" / "nemo-run" / "events.out.tfevents.1.host").touch()
    (nemo / "exit_status.json").write_text('{"exit_code": 42, "reason": "stopped on SIGUSR1 after a checkpoint"}')
    summary = summarize(nemo)
    assert summary.checkpoint == checkpoints / "nemo-run--val_loss=1.90-step=199-last"
    assert summary.tensorboard == nemo / "nemo"
    assert "exit status     42 (stopped on SIGUSR1 after a checkpoint)" in summary.lines()

    neuron = tmp_path / "pythia"
    (neuron / "nxdt" / "checkpoints" / "pythia--step=1000-consumed_samples=256000.0.ckpt").mkdir(parents=True)
    (neuron / "nxdt" / "checkpoints" / "pythia--step=500-consumed_samples=128000.0.ckpt").mkdir(parents=True)
    assert (
        summarize(neuron).checkpoint
        == neuron / "nxdt" / "checkpoints" / "pythia--step=1000-consumed_samples=256000.0.ckpt"
    )
