from pathlib import Path

from training.checkpoint.layout import (
    MARKER,
    complete_checkpoints,
    incomplete_entries,
    latest_complete,
    remove_checkpoint,
    step_dir,
    tmp_dir,
)


def _checkpoint(root: Path, step: int, committed: bool = True) -> Path:
    path = step_dir(root, step)
    path.mkdir(parents=True)
    (path / "__0_0.distcp").write_bytes(b"x" * 10)
    if committed:
        (path / MARKER).write_text("{}")
    return path


def test_only_committed_directories_count_and_steps_sort_numerically(tmp_path: Path) -> None:
    for step in (9, 10, 100):
        _checkpoint(tmp_path, step)
    _checkpoint(tmp_path, 200, committed=False)
    tmp_dir(tmp_path, 300).mkdir()
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    assert [step for step, _ in complete_checkpoints(tmp_path)] == [9, 10, 100]
    assert latest_complete(tmp_path) == (100, step_dir(tmp_path, 100))
    assert incomplete_entries(tmp_path) == [step_dir(tmp_path, 200), tmp_dir(tmp_path, 300)]


def test_missing_root_has_no_checkpoints(tmp_path: Path) -> None:
    assert latest_complete(tmp_path / "absent") is None
    assert incomplete_entries(tmp_path / "absent") == []


def test_removal_uncommits_before_deleting(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path, 5)
    remove_checkpoint(path)
    assert not path.exists()
    assert latest_complete(tmp_path) is None
