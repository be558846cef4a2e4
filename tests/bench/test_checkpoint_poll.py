import re

import pytest

from bench.checkpoint_poll import main


def test_two_ranks_poll_a_pending_save_and_the_cost_per_poll_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--ranks", "2", "--polls", "50"]) == 0
    out = capsys.readouterr().out
    match = re.fullmatch(
        r"poll of a pending async save, 2 gloo ranks, 50 polls: median (\d+) us, p99 (\d+) us per step\n", out
    )
    assert match and 0 < int(match.group(1)) <= int(match.group(2)), out
