import shutil
from pathlib import Path

import pytest

from training.checkpoint.errors import CheckpointSpaceError
from training.checkpoint.layout import MARKER, step_dir
from training.checkpoint.space import check_free_space, estimate_checkpoint_bytes, out_of_space_hint


def _fake_disk(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    from training.checkpoint import space

    monkeypatch.setattr(space.shutil, "disk_usage", lambda _: shutil._ntuple_diskusage(10 * free, 9 * free, free))


def test_estimate_uses_the_last_checkpoint_else_twelve_bytes_per_parameter(tmp_path: Path) -> None:
    assert estimate_checkpoint_bytes(tmp_path, 1000) == (12_000, "12 bytes x 1,000 parameters")
    path = step_dir(tmp_path, 3)
    path.mkdir()
    (path / "__0_0.distcp").write_bytes(b"x" * 5000)
    (path / MARKER).write_text("{}")
    assert estimate_checkpoint_bytes(tmp_path, 1000) == (5002, "size of step-3")


def test_refuses_below_the_margin_and_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_disk(monkeypatch, free=1 << 30)
    check_free_space(tmp_path, param_count=80_000_000, margin=1.0)  # 0.96 GB needed, 1 GiB free
    with pytest.raises(CheckpointSpaceError) as error:
        check_free_space(tmp_path, param_count=80_000_000, margin=1.2)
    message = str(error.value)
    assert message.startswith(
        f"checkpoint.dir: {str(tmp_path)!r} has 1.000 GiB free, the next checkpoint needs about 1.073 GiB"
    )
    assert "lower checkpoint.keep_last" in message
    assert "\n" not in message


def test_margin_zero_turns_the_check_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_disk(monkeypatch, free=0)
    check_free_space(tmp_path, param_count=10**9, margin=0.0)


def test_hint_names_enospc_only_when_the_disk_is_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_disk(monkeypatch, free=100)
    assert "No space left on device" in out_of_space_hint(tmp_path, param_count=1000)
    _fake_disk(monkeypatch, free=10**9)
    assert out_of_space_hint(tmp_path, param_count=1000) == ""
