import json
import math
import sys
from pathlib import Path

import pytest

from training.metrics.logger import MetricsLogger, latest_per_step, read_metrics

RECORD = {
    "step": 1,
    "loss": 2.5,
    "lr": 1e-4,
    "grad_norm": 0.5,
    "tokens_per_s": 1000.0,
    "mfu": 0.4,
    "hfu": 0.5,
    "megatron_util": 0.45,
    "mem_gib": 1.0,
    "step_time_s": 0.1,
}


def test_records_are_json_lines_with_a_kind(tmp_path: Path) -> None:
    logger = MetricsLogger(tmp_path, enabled=True, tensorboard=True, total_steps=2, start_step=0)
    logger.log_event("start", step=0)
    logger.log_train(RECORD)
    logger.log_train({**RECORD, "step": 2, "loss": math.nan})
    logger.log_validation(2, 2.4, batches=3)
    logger.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["event", "train", "train", "validation"]
    assert json.loads(lines[2])["loss"] == "nan"  # JSON has no NaN; kept visible
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))


def test_only_rank_zero_writes(tmp_path: Path) -> None:
    logger = MetricsLogger(tmp_path / "run", enabled=False, tensorboard=True, total_steps=2, start_step=0)
    logger.log_train(RECORD)
    logger.close()
    assert not (tmp_path / "run").exists()


def test_plain_lines_without_a_terminal_and_a_bar_with_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="training")
    logger = MetricsLogger(tmp_path / "a", enabled=True, tensorboard=False, total_steps=2, start_step=0)
    logger.log_train(RECORD)
    logger.close()
    assert "step 1 loss 2.5000" in caplog.text

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    caplog.clear()
    logger = MetricsLogger(tmp_path / "b", enabled=True, tensorboard=False, total_steps=2, start_step=0)
    assert logger._bar is not None
    logger.log_train(RECORD)
    logger.close()
    assert "step 1 loss" not in caplog.text


def test_latest_record_per_step_wins_after_a_resume(tmp_path: Path) -> None:
    logger = MetricsLogger(tmp_path, enabled=True, tensorboard=False, total_steps=3, start_step=0)
    for step, loss in ((1, 3.0), (2, 2.9), (3, 2.8), (2, 2.7), (3, 2.6)):
        logger.log_train({**RECORD, "step": step, "loss": loss})
    logger.close()
    steps = latest_per_step(read_metrics(tmp_path / "metrics.jsonl"), "train")
    assert [(r["step"], r["loss"]) for r in steps] == [(1, 3.0), (2, 2.7), (3, 2.6)]
