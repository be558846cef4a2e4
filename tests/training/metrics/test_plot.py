from pathlib import Path

from tests.training.metrics.test_logger import RECORD
from training.metrics.logger import MetricsLogger
from training.metrics.plot import plot_run


def test_png_of_loss_and_throughput(tmp_path: Path) -> None:
    logger = MetricsLogger(tmp_path, enabled=True, tensorboard=False, total_steps=5, start_step=0)
    for step in range(1, 6):
        logger.log_train({**RECORD, "step": step, "loss": 3.0 - 0.1 * step})
    logger.log_validation(5, 2.6, batches=2)
    logger.close()
    out = plot_run(tmp_path)
    assert out == tmp_path / "metrics.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_plot_without_training_records(tmp_path: Path) -> None:
    assert plot_run(tmp_path) is None
