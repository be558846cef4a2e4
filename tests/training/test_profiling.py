import json
from pathlib import Path

import pytest
import torch

from training import profiling
from training.config import ProfileSection
from training.profiling import StepProfiler


def _step() -> None:
    a = torch.randn(64, 64)
    (a @ a).sum()


def test_traces_exactly_the_window_as_chrome_json(tmp_path: Path) -> None:
    profiler = StepProfiler(ProfileSection(start_step=2, steps=2), tmp_path, rank=0, device=torch.device("cpu"))
    written = []
    for step in range(1, 6):
        profiler.before_step(step)
        _step()
        written.append(profiler.after_step(step))
    profiler.close(5)
    trace = tmp_path / "profile" / "rank0_steps2-3.json"
    assert written == [None, None, trace, None, None]
    events = json.loads(trace.read_text())["traceEvents"]
    assert any("aten::mm" in event.get("name", "") for event in events)


def test_no_window_no_trace_and_a_run_ending_inside_the_window_still_writes(tmp_path: Path) -> None:
    idle = StepProfiler(ProfileSection(), tmp_path / "a", rank=0, device=torch.device("cpu"))
    idle.before_step(1)
    assert idle.after_step(1) is None
    assert not (tmp_path / "a").exists()
    cut = StepProfiler(ProfileSection(start_step=1, steps=10), tmp_path / "b", rank=1, device=torch.device("cpu"))
    cut.before_step(1)
    _step()
    cut.close(1)
    assert (tmp_path / "b" / "profile" / "rank1_steps1-1.json").is_file()


def test_a_warmup_step_runs_before_the_window_and_memory_is_recorded_on_rank_0_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    created: list[dict] = []
    real = profiling.profile

    def recording(**kwargs):  # type: ignore[no-untyped-def]
        created.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(profiling, "profile", recording)
    for rank in (0, 1):
        profiler = StepProfiler(ProfileSection(start_step=3, steps=2, warmup=1), tmp_path, rank, torch.device("cpu"))
        started_at = []
        for step in range(1, 6):
            profiler.before_step(step)
            if profiler._profiler is not None and not started_at:
                started_at.append(step)
            _step()
            profiler.after_step(step)
        assert started_at == [2]  # one warm-up step before the window
    assert [(kw["profile_memory"], kw["record_shapes"]) for kw in created] == [(True, True), (False, False)]
    for rank in (0, 1):
        assert (tmp_path / "profile" / f"rank{rank}_steps3-4.json").is_file()
