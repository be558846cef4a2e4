"""The catalogue's entry shapes: what an entry derives from its own facts."""

from __future__ import annotations

import pytest

from spec.platform.hardware_facts import ChipFacts, InstanceFacts
from spec.platform.instances import CHIPS, instance_facts


def _node(accelerator: str, chip: ChipFacts | None) -> InstanceFacts:
    return InstanceFacts("x.large", accelerator, 8, 80.0, 4, 400, 1e15, 1.0, 96, 1024, chip=chip)  # type: ignore[arg-type]


def test_nvlink_per_gpu_is_the_chips_one_way_link_in_gb_per_s() -> None:
    assert _node("gpu", CHIPS["H100"]).nvlink_gb_per_s_per_gpu == 450.0
    assert instance_facts("p6-b200.48xlarge").nvlink_gb_per_s_per_gpu == 900.0
    assert instance_facts("p4d.24xlarge").nvlink_gb_per_s_per_gpu == 300.0


@pytest.mark.parametrize(("accelerator", "chip"), [("neuron", CHIPS["Trainium1"]), ("gpu", None), ("none", None)])
def test_no_nvlink_without_a_gpu_chip(accelerator: str, chip: ChipFacts | None) -> None:
    assert _node(accelerator, chip).nvlink_gb_per_s_per_gpu is None
