"""Queue -> instance type -> what a job's nodes have."""

from __future__ import annotations

import pytest

from slurm.errors import SubmitError
from slurm.target import local_target, resolve_target
from spec import DeploymentSpec, load_spec

DEFAULT = load_spec(None)
TRN1 = load_spec("spec/examples/trn1-neuron.yaml")


def test_the_first_matching_queue_is_picked() -> None:
    target = resolve_target(DEFAULT, "fsdp", None, None)
    assert (target.queue, target.partition, target.instance.name) == ("gpu", "gpu", "p5.48xlarge")
    assert target.efa and target.workers_per_node == 8 and target.shared_dir == "/fsx"
    assert target.container_image is None


def test_nemo_takes_the_container_image_and_framework_from_the_spec() -> None:
    target = resolve_target(DEFAULT, "nemo", "gpu", None)
    assert target.container_image == "/fsx/containers/llm-nemo-efa-26.08-efa1.43.2.sqsh"
    assert target.nemo_framework == "megatron-bridge-26.08"
    assert resolve_target(DEFAULT, "fsdp", "gpu", None).nemo_framework is None


def test_trainium_runs_one_worker_per_neuron_core() -> None:
    target = resolve_target(TRN1, "neuron", "trn1", "other")
    assert target.workers_per_node == 32 and target.devices_per_node == 16
    assert target.partition == "other" and target.queue == "trn1"
    assert target.neuron is not None and target.neuron.compile_cache_dir == "/fsx/neuron-cache"


def test_the_local_profile_is_one_cpu_rank_per_node() -> None:
    target = local_target()
    assert (target.partition, target.workers_per_node, target.efa, target.local) == ("local", 1, False, True)


@pytest.mark.parametrize(
    ("spec", "backend", "queue", "message"),
    [
        (
            DEFAULT,
            "neuron",
            "gpu",
            "--queue: 'gpu' runs p5.48xlarge (gpu accelerators); --backend neuron needs a neuron queue",
        ),
        (TRN1, "nemo", None, "--queue: no gpu queue in the spec for --backend nemo (queues: trn1 (trn1.32xlarge))"),
        (DEFAULT, "jax", None, "--backend: 'jax' is not one of fsdp, nemo, neuron"),
    ],
)
def test_mismatches_are_one_line_errors(spec: DeploymentSpec, backend: str, queue: str | None, message: str) -> None:
    with pytest.raises(SubmitError) as raised:
        resolve_target(spec, backend, queue, None)
    assert str(raised.value) == message


def test_a_spec_without_a_cluster_section_is_refused() -> None:
    bare = DEFAULT.model_copy(update={"cluster": None})
    with pytest.raises(SubmitError, match=r"^--spec: spec 'llm-demo' has no cluster section"):
        resolve_target(bare, "fsdp", None, None)


def test_a_trn2_queue_job_is_refused_in_one_line_saying_why() -> None:
    """trn2's supported training stack is TorchNeuron + TorchTitan, which cannot be installed or checked here."""
    from pathlib import Path

    import yaml

    from spec import parse_spec

    doc = yaml.safe_load(Path("spec/examples/trn1-neuron.yaml").read_text())
    doc["cluster"]["queues"][0].update(name="trn2", instance_type="trn2.48xlarge")
    with pytest.raises(SubmitError) as raised:
        resolve_target(parse_spec(doc), "neuron", "trn2", None)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        "--queue: 'trn2' runs trn2.48xlarge, whose supported training stack is native PyTorch on Neuron "
        "(TorchNeuron) with TorchTitan, not the NxDT this backend renders;"
    )
    assert "docs/cluster.md" in message
