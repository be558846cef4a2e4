"""Where metrics go: DIR/metrics.jsonl (one JSON object per line), TensorBoard, and the console.

Only rank 0 writes. The console gets a progress bar when stdout is a terminal and plain log lines otherwise
(batch logs stay readable). Records carry a "kind": "train", "validation" or "event" (start, resume, stop).
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("training")

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
_TB_KEYS = ("loss", "lr", "grad_norm", "tokens_per_s", "mfu", "hfu", "megatron_util", "mem_gib", "step_time_s")


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN/inf; keep them visible as strings
    return value


class MetricsLogger:
    def __init__(self, run_dir: Path, *, enabled: bool, tensorboard: bool, total_steps: int, start_step: int) -> None:
        self.enabled = enabled
        self.path = run_dir / METRICS_FILE
        self._file = None
        self._writer = None
        self._bar = None
        if not enabled:
            return
        run_dir.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(run_dir / TENSORBOARD_DIR))
        if sys.stdout.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, initial=start_step, unit="step", dynamic_ncols=True)

    def _write(self, record: dict[str, Any]) -> None:
        assert self._file is not None
        self._file.write(json.dumps({k: _clean(v) for k, v in record.items()}) + "\n")
        self._file.flush()

    def log_train(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self._write({"kind": "train", **record, "time": round(time.time(), 3)})
        step = record["step"]
        if self._writer is not None:
            for key in _TB_KEYS:
                value = record.get(key)
                if isinstance(value, (int, float)):
                    self._writer.add_scalar(f"train/{key}", value, step)
        summary = (
            f"step {step} loss {record['loss']:.4f} lr {record['lr']:.3e} grad_norm {record['grad_norm']:.3f} "
            f"tok/s/dev {record['tokens_per_s']:.0f} mfu {record['mfu']:.2%} mem {record['mem_gib']:.2f} GiB"
        )
        if self._bar is not None:
            self._bar.update(step - self._bar.n)
            self._bar.set_postfix_str(summary.split(" ", 2)[2])
        else:
            log.info(summary)

    def log_validation(self, step: int, val_loss: float, batches: int) -> None:
        if not self.enabled:
            return
        self._write({"kind": "validation", "step": step, "val_loss": val_loss, "batches": batches})
        if self._writer is not None:
            self._writer.add_scalar("validation/loss", val_loss, step)
        self._console(f"step {step} validation loss {val_loss:.4f} over {batches} batches")

    def log_event(self, event: str, **fields: Any) -> None:
        if not self.enabled:
            return
        self._write({"kind": "event", "event": event, **fields, "time": round(time.time(), 3)})

    def _console(self, line: str) -> None:
        if self._bar is not None:
            self._bar.write(line)
        else:
            log.info(line)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._writer is not None:
            self._writer.close()
        if self._file is not None:
            self._file.close()


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def latest_per_step(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """One record per step, the last one written (a resumed run logs again the steps after its checkpoint)."""
    by_step: dict[int, dict[str, Any]] = {}
    for record in records:
        if record.get("kind") == kind:
            by_step[record["step"]] = record
    return [by_step[step] for step in sorted(by_step)]
