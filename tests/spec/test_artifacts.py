"""spec.artifacts: where the nodes' offline artifacts live, derived from the spec (one pure function for the cluster
config, the policies and the upload command), and the rules on the prefixes a spec may give instead."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from spec import DEFAULT_SPEC_PATH, SpecError, load_spec, parse_spec
from spec.artifacts import S3Folder, artifact_locations, artifacts_bucket_name

TRN1 = DEFAULT_SPEC_PATH.parent / "examples" / "trn1-neuron.yaml"


def spec_data(path: Any = DEFAULT_SPEC_PATH) -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(path.read_text()))


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as error:
        parse_spec(data)
    return [str(problem) for problem in error.value.problems]


def test_the_artifacts_bucket_is_named_from_the_spec() -> None:
    spec = load_spec()
    assert artifacts_bucket_name(spec) == "llm-demo-artifacts-111111111111"
    assert artifact_locations(spec).bucket == "llm-demo-artifacts-111111111111"


def test_without_internet_the_wheelhouse_defaults_to_the_artifacts_bucket() -> None:
    spec = load_spec()
    assert spec.cluster is not None and spec.cluster.python_wheelhouse is None  # the default spec names none
    locations = artifact_locations(spec)
    assert locations.python_wheelhouse == S3Folder("llm-demo-artifacts-111111111111", "wheelhouse/py3.11/")
    assert locations.python_wheelhouse.uri == "s3://llm-demo-artifacts-111111111111/wheelhouse/py3.11/"
    # head_node.sh installs the exporters from the wheelhouse's observability/ folder.
    assert locations.observability_binaries == S3Folder(
        "llm-demo-artifacts-111111111111", "wheelhouse/py3.11/observability/"
    )
    assert locations.nxdt_wheelhouse is None  # no Trainium queue
    assert locations.folders == (locations.python_wheelhouse, locations.nccl_tests)


def test_the_default_follows_the_nodes_python_not_their_os() -> None:
    data = spec_data()
    data["cluster"].update(os="ubuntu2404", python_version="3.12")
    folder = artifact_locations(parse_spec(data)).python_wheelhouse
    assert folder is not None and folder.prefix == "wheelhouse/py3.12/"  # manylinux wheels, whatever the OS


def test_a_wheelhouse_in_another_bucket_is_kept() -> None:
    data = spec_data()
    data["cluster"]["python_wheelhouse"] = "s3://team-wheels-111111111111/py311/"
    locations = artifact_locations(parse_spec(data))
    assert locations.python_wheelhouse == S3Folder("team-wheels-111111111111", "py311/")
    assert locations.observability_binaries == S3Folder("team-wheels-111111111111", "py311/observability/")
    assert locations.bucket == "llm-demo-artifacts-111111111111"  # the stack still creates its own


def test_with_internet_and_no_wheelhouse_the_env_comes_from_pypi() -> None:
    data = spec_data()
    data["network"]["internet_egress"] = "nat"
    locations = artifact_locations(parse_spec(data))
    assert locations.python_wheelhouse is None and locations.observability_binaries is None
    data["network"]["internet_egress"] = "none"
    data["cluster"]["fsx"] = None  # no shared storage, so no env to build and nothing to read
    assert artifact_locations(parse_spec(data)).python_wheelhouse is None


def test_gpu_queues_get_the_nccl_tests_source_folder_whatever_the_egress() -> None:
    """The fabric check's nccl-tests is built on /fsx from a source tarball the head node copies from here
    (docs/fabric-checks.md): one path, with or without internet."""
    data = spec_data()
    assert artifact_locations(parse_spec(data)).nccl_tests == S3Folder("llm-demo-artifacts-111111111111", "nccl-tests/")
    data["network"]["internet_egress"] = "nat"
    assert artifact_locations(parse_spec(data)).nccl_tests == S3Folder("llm-demo-artifacts-111111111111", "nccl-tests/")
    assert artifact_locations(load_spec(TRN1)).nccl_tests is None  # Trainium's nccom-test comes with its tools


def test_trainium_nodes_get_the_nxdt_wheelhouse_of_the_spec_release() -> None:
    spec = load_spec(TRN1)
    locations = artifact_locations(spec)
    assert locations.nxdt_wheelhouse == S3Folder("llm-demo-artifacts-111111111111", "nxdt/2.26.1/")
    assert locations.folders == (locations.python_wheelhouse, locations.nxdt_wheelhouse)
    data = spec_data(TRN1)
    data["cluster"]["neuron"]["nxdt_wheelhouse"] = "s3://team-wheels-111111111111/nxdt/"
    nxdt = artifact_locations(parse_spec(data)).nxdt_wheelhouse
    assert nxdt == S3Folder("team-wheels-111111111111", "nxdt/")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("s3://team-wheels", "must name a folder of the bucket, such as s3://team-wheels/wheelhouse/"),
        ("s3://team-wheels/", "must name a folder of the bucket, such as s3://team-wheels/wheelhouse/"),
        ("s3://team-wheels/py311", "must end with '/' so that 'py311' does not also grant 'py311-private/'"),
        ("s3://team-wheels/py*/", "must not contain '*' (a policy wildcard)"),
    ],
)
def test_a_wheelhouse_must_be_a_folder_the_grants_can_scope_to(value: str, why: str) -> None:
    data = spec_data()
    data["cluster"]["python_wheelhouse"] = value
    assert problems(data) == [f"cluster.python_wheelhouse: {value!r} {why}"]


def test_the_nxdt_wheelhouse_follows_the_same_rules() -> None:
    data = spec_data(TRN1)
    data["cluster"]["neuron"]["nxdt_wheelhouse"] = "s3://team-wheels/nxdt"
    assert problems(data) == [
        "cluster.neuron.nxdt_wheelhouse: 's3://team-wheels/nxdt' must end with '/' so that 'nxdt' does not also "
        "grant 'nxdt-private/'"
    ]
