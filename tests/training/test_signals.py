import json
import os
import signal
from pathlib import Path

from training.signals import EXIT_REQUEUE, EXIT_STATUS_FILE, StopRequest, write_exit_status


def test_stop_signals_set_the_flag_and_handlers_are_restored() -> None:
    before = signal.getsignal(signal.SIGUSR1)
    request = StopRequest()
    request.install()
    try:
        assert not request.requested
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGTERM)
        assert request.requested
        assert request.signal_name == "SIGUSR1"  # the first one wins
    finally:
        request.uninstall()
    assert signal.getsignal(signal.SIGUSR1) == before


def test_exit_codes_are_distinct_and_the_status_file_names_the_reason(tmp_path: Path) -> None:
    from training import signals

    codes = [
        signals.EXIT_OK,
        signals.EXIT_CONFIG_ERROR,
        EXIT_REQUEUE,
        signals.EXIT_LOSS_GUARD,
        signals.EXIT_CHECKPOINT_FAILED,
        signals.EXIT_HANG,
    ]
    assert len(set(codes)) == len(codes)
    write_exit_status(tmp_path, EXIT_REQUEUE, "stopped on request (SIGTERM)", 12)
    status = json.loads((tmp_path / EXIT_STATUS_FILE).read_text())
    assert (status["exit_code"], status["reason"], status["step"]) == (42, "stopped on request (SIGTERM)", 12)
