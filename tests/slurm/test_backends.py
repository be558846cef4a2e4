"""The backend registry: each descriptor complete, --backend resolved to one of them, NeMo 2 and Bridge apart."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
import yaml

from slurm.backends import BACKENDS, OPTIONS, STACKS, backend_named, default_backend, resolve_backend
from slurm.errors import SubmitError
from slurm.target import resolve_target
from spec import load_spec
from spec.containers import DEFAULT_FRAMEWORK, FRAMEWORKS
from spec.platform.instances import Accelerator


def test_what_llm_submit_takes_is_unchanged() -> None:
    assert OPTIONS == ("fsdp", "nemo", "neuron")


@pytest.mark.parametrize("name", BACKENDS)
def test_every_descriptor_is_complete(name: str) -> None:
    backend = BACKENDS[name]
    assert backend.name == name and backend.title
    assert backend.stack in STACKS and backend.accelerator in get_args(Accelerator)
    assert backend.option in OPTIONS and backend.checkpoint_bytes_per_param >= 0
    # An option with several descriptors is told apart by the container framework's entry point.
    siblings = [b for b in BACKENDS.values() if b.option == backend.option]
    assert len(siblings) == 1 or backend.entry_point in {f.entry_point for f in FRAMEWORKS.values()}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_nemo_container_resolves_to_one_backend(framework: str) -> None:
    backend = resolve_backend("nemo", framework)
    assert backend.entry_point == FRAMEWORKS[framework].entry_point


def test_nemo_is_nemo2_or_bridge_by_the_specs_container() -> None:
    assert resolve_backend("nemo", "nemo-25.07").name == "nemo2"
    assert resolve_backend("nemo", "megatron-bridge-26.08").name == "bridge"
    assert resolve_backend("nemo").name == resolve_backend("nemo", DEFAULT_FRAMEWORK).name == "bridge"
    assert backend_named("nemo2").title == "NeMo 2" and backend_named("nemo").name == "bridge"
    assert resolve_backend("fsdp").name == "fsdp" and resolve_backend("neuron").name == "neuron"


def test_the_target_carries_the_backend_that_runs(tmp_path: Path) -> None:
    spec = yaml.safe_load(Path("spec/default.yaml").read_text())
    spec["cluster"]["containers"] = {"pyxis": True, "nemo_framework": "nemo-25.07", "ecr_repository": "llm-nemo-efa"}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert resolve_target(load_spec(tmp_path / "spec.yaml"), "nemo", None, None).backend.name == "nemo2"
    assert resolve_target(load_spec(None), "nemo", None, None).backend.name == "bridge"
    assert resolve_target(load_spec(None), "fsdp", None, None).backend.name == "fsdp"


def test_an_unknown_option_is_one_line_naming_it() -> None:
    with pytest.raises(SubmitError, match=r"^--backend: 'jax' is not one of fsdp, nemo, neuron$"):
        resolve_backend("jax")


def test_the_default_backend_follows_the_accelerator() -> None:
    gpu, neuron = default_backend("gpu"), default_backend("neuron")
    assert gpu is not None and gpu.name == "fsdp" and neuron is not None and neuron.name == "neuron"
    assert default_backend("none") is None


def test_checkpoint_bytes_are_each_backends_own() -> None:
    # FSDP: fp32 weights + two fp32 moments; Megatron: bf16 weights + fp32 main copy + two moments; NxDT: no stop save.
    assert {name: b.checkpoint_bytes_per_param for name, b in BACKENDS.items()} == {
        "fsdp": 12, "nemo2": 14, "bridge": 14, "neuron": 0,
    }  # fmt: skip
