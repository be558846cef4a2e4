import re

import pytest

from bench.planner_fit import main


def test_the_cost_of_one_loss_evaluation_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--evaluations", "2", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    match = re.fullmatch(
        r"planner fit loss over (\d+) fitted rows: (\d+\.\d\d) ms CPU per evaluation \(best of 1 x 2\)\n", out
    )
    assert match and int(match.group(1)) > 0 and float(match.group(2)) > 0, out


@pytest.mark.parametrize("flag", ["--evaluations", "--repeats"])
def test_a_count_below_one_is_refused_in_one_line(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([flag, "0"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f"{flag}: 0 must be at least 1")
