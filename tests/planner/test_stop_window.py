"""The time a stop needs (planner/stop_window.py) with the default spec's storage and a faster one."""

from __future__ import annotations

import pytest

from planner.stop_window import EXIT_MARGIN_S, stop_window, storage_mb_per_s
from spec import load_spec
from spec.cluster import FsxSpec
from training.models.registry import get_model_args

DEFAULT_FSX = load_spec(None).cluster.fsx  # type: ignore[union-attr]
FAST_FSX = FsxSpec(storage_gib=4800, throughput_mb_per_tib=1000)


def test_the_default_specs_fsx_writes_about_300_mb_per_s() -> None:
    assert DEFAULT_FSX is not None
    assert storage_mb_per_s(DEFAULT_FSX) == pytest.approx(1200 / 1024 * 250)  # 293 MB/s
    assert storage_mb_per_s(FAST_FSX) == pytest.approx(4688, abs=1)


def test_llama3_8b_with_optimizer_state_does_not_fit_300_s_on_the_default_fsx() -> None:
    assert DEFAULT_FSX is not None
    window = stop_window(get_model_args("llama3-8b"), "nemo", DEFAULT_FSX, step_s=10.0)
    assert window.checkpoint_bytes == pytest.approx(112e9, rel=0.01)
    assert window.save_s == pytest.approx(383, abs=2)  # about 6 minutes
    assert window.lead_s == pytest.approx(10 + 383 + EXIT_MARGIN_S, abs=2) and window.lead_s > 300


def test_faster_storage_fits_in_the_default_lead() -> None:
    window = stop_window(get_model_args("llama3-8b"), "nemo", FAST_FSX, step_s=10.0)
    assert window.save_s == pytest.approx(24, abs=1) and window.lead_s < 300


def test_fsdp_saves_12_bytes_per_parameter_and_neuron_nothing_on_a_stop() -> None:
    model = get_model_args("llama3-8b")
    assert DEFAULT_FSX is not None
    fsdp = stop_window(model, "fsdp", DEFAULT_FSX, 0.0)
    assert fsdp.checkpoint_bytes == pytest.approx(96e9, rel=0.01)
    assert stop_window(model, "neuron", DEFAULT_FSX, 5.0).lead_s == 5 + EXIT_MARGIN_S
