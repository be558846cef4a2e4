"""Job environment rules: only what applies to the instance type and software versions."""

from __future__ import annotations

import dataclasses

import pytest

from slurm.errors import SubmitError
from slurm.netenv import gpu_env, nemo_env, neuron_env, parse_version
from slurm.target import resolve_target
from spec import load_spec

P5 = resolve_target(load_spec(None), "fsdp", None, None)
P4D = resolve_target(load_spec("spec/examples/p4d-odcr.yaml"), "fsdp", None, None)
TRN1 = resolve_target(load_spec("spec/examples/trn1-neuron.yaml"), "neuron", None, None)


def test_current_efa_stack_needs_only_the_provider_settings() -> None:
    env = gpu_env(P5)
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_HUGE_PAGE"] == "0"
    assert "FI_EFA_USE_DEVICE_RDMA" not in env and "NCCL_PROTO" not in env
    assert "RDMAV_FORK_SAFE" not in env
    # The aws-ofi-nccl plugin by name: a node without it fails instead of running NCCL over TCP sockets.
    assert env["NCCL_NET"] == "AWS Libfabric"


def test_gpudirect_rdma_is_requested_before_libfabric_1_18() -> None:
    assert gpu_env(P4D, libfabric="1.17.1")["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert gpu_env(P4D, aws_ofi_nccl="1.6.0")["FI_EFA_USE_DEVICE_RDMA"] == "1"


def test_simple_protocol_only_for_aws_ofi_nccl_1_5_and_older() -> None:
    assert gpu_env(P4D, aws_ofi_nccl="1.5.0")["NCCL_PROTO"] == "simple"
    assert "NCCL_PROTO" not in gpu_env(P4D, aws_ofi_nccl="1.6.0")


def test_p5_refuses_an_aws_ofi_nccl_older_than_1_7_3() -> None:
    with pytest.raises(SubmitError, match=r"--aws-ofi-nccl-version: 1.7.2 is too old for p5.48xlarge"):
        gpu_env(P5, aws_ofi_nccl="1.7.2")


def test_a_queue_without_efa_gets_no_libfabric_settings() -> None:
    env = gpu_env(dataclasses.replace(P5, efa=False))
    assert not any(name.startswith("FI_") for name in env) and "NCCL_NET" not in env
    assert env["NCCL_SOCKET_IFNAME"] == "^docker,lo,veth"


def test_nemo_and_neuron_extras() -> None:
    assert nemo_env() == {
        "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
        "NVTE_DP_AMAX_REDUCE_INTERVAL": "0",
        "NVTE_ASYNC_AMAX_REDUCTION": "1",
    }
    env = neuron_env(TRN1)
    assert env["NEURON_COMPILE_CACHE_URL"] == "/fsx/neuron-cache"
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1" and env["FI_EFA_FORK_SAFE"] == "1"
    # Set once, by NxDT from the config's compiler_flags (it appends them to the environment's).
    assert "NEURON_CC_FLAGS" not in env


@pytest.mark.parametrize("text", ["1", "1.x", "v1.2.3", "1.2.3.4"])
def test_versions_must_be_numeric(text: str) -> None:
    with pytest.raises(SubmitError, match="--opt: "):
        parse_version(text, "--opt")


@pytest.mark.parametrize("instance", ["p6-b200.48xlarge", "p6-b300.48xlarge"])
def test_blackwell_gets_the_efa_settings_and_the_p5_floor_on_aws_ofi_nccl(instance: str) -> None:
    from spec.platform.instances import instance_facts

    blackwell = dataclasses.replace(P5, instance=instance_facts(instance))
    env = gpu_env(blackwell)
    assert env["FI_PROVIDER"] == "efa" and env["NCCL_NET"] == "AWS Libfabric"
    assert "FI_EFA_USE_DEVICE_RDMA" not in env
    with pytest.raises(SubmitError, match=rf"--aws-ofi-nccl-version: 1.7.2 is too old for {instance}"):
        gpu_env(blackwell, aws_ofi_nccl="1.7.2")
