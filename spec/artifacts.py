"""Where the nodes' offline artifacts live in S3, as one pure function of the spec.

The compute account's artifacts stack creates one bucket, `<name>-artifacts-<compute account>`; the nodes install
from it without internet:

    wheelhouse/py<version>/                the wheels of requirements-node.txt (make wheelhouse), which the
                                                head node builds the training env from (cluster.python_wheelhouse)
    wheelhouse/py<version>/observability/  the pinned exporter and agent binaries (make observability-binaries);
                                                head_node.sh reads them beside the wheels
    nxdt/<Neuron SDK release>/                  the Trainium nodes' NxDT stack (make nxdt-wheelhouse;
                                                cluster.neuron.nxdt_wheelhouse); the head node reads only its
                                                nxdt-examples.tar.gz (NxDT's launcher, unpacked onto /fsx)
    nccl-tests/                                 with GPU queues: the pinned nccl-tests source (make
                                                nccl-tests-source), which the head node copies to /fsx for a GPU
                                                node to build (docs/fabric-checks.md)

A spec that names its own prefix keeps it. The cluster config (cluster.config_builder), the node and endpoint
policies (policies.artifacts, policies.endpoint) and the upload command (cluster.artifacts) all call
`artifact_locations`, so what is uploaded is what the nodes are told to read and allowed to.
"""

from __future__ import annotations

from dataclasses import dataclass

from spec.model import DeploymentSpec
from spec.platform.instances import instance_facts

WHEELHOUSE_FOLDER = "wheelhouse/"
NXDT_FOLDER = "nxdt/"
NXDT_EXAMPLES = "nxdt-examples.tar.gz"  # NxDT's examples/ (training_orchestrator.py): not in its wheel
NCCL_TESTS_FOLDER = "nccl-tests/"
# cluster/bootstrap/head_node.sh: observability.sh --binaries "${wheelhouse%/}/observability".
OBSERVABILITY_FOLDER = "observability/"


@dataclass(frozen=True)
class S3Folder:
    """A key prefix ending in '/' of one bucket."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: str) -> S3Folder:
        """'s3://bucket/a/b/' -> S3Folder('bucket', 'a/b/'); the spec's validators guarantee the shape."""
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        return cls(bucket, prefix)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def bucket_arn(self) -> str:
        return f"arn:aws:s3:::{self.bucket}"

    @property
    def objects_arn(self) -> str:
        """Every object under the folder (and nothing beside it: the prefix ends in '/')."""
        return f"{self.bucket_arn}/{self.prefix}*"

    def child(self, folder: str) -> S3Folder:
        return S3Folder(self.bucket, self.prefix + folder)

    def object_arn(self, name: str) -> str:
        """One object of the folder."""
        return f"{self.bucket_arn}/{self.prefix}{name}"


@dataclass(frozen=True)
class ArtifactLocations:
    bucket: str  # the artifacts bucket of the compute account (stacks/parts/artifacts_bucket.py creates it)
    python_wheelhouse: S3Folder | None  # None: the head node installs from PyPI (internet egress), or builds no env
    nxdt_wheelhouse: S3Folder | None  # None: no Trainium queue
    nccl_tests: S3Folder | None = None  # None: no GPU queue, so no fabric check with nccl-tests

    @property
    def observability_binaries(self) -> S3Folder | None:
        return None if self.python_wheelhouse is None else self.python_wheelhouse.child(OBSERVABILITY_FOLDER)

    @property
    def folders(self) -> tuple[S3Folder, ...]:
        """Every folder the nodes read (the observability binaries lie inside the wheelhouse)."""
        return tuple(f for f in (self.python_wheelhouse, self.nxdt_wheelhouse, self.nccl_tests) if f is not None)


def artifacts_bucket_name(spec: DeploymentSpec) -> str:
    """Deterministic, so the spec's defaults, the policies and the upload command can name it before it exists."""
    return f"{spec.name}-artifacts-{spec.accounts.compute}"


def artifact_locations(spec: DeploymentSpec) -> ArtifactLocations:
    bucket = artifacts_bucket_name(spec)
    cluster = spec.cluster
    if cluster is None:
        return ArtifactLocations(bucket, None, None)
    python: S3Folder | None = None
    if cluster.python_wheelhouse is not None:
        python = S3Folder.parse(cluster.python_wheelhouse)
    elif spec.network.internet_egress == "none" and cluster.fsx is not None:
        # Nothing reaches PyPI: the env on shared storage comes from the artifacts bucket.
        # By Python version only: make wheelhouse downloads manylinux wheels, the same for every cluster.os (and a
        # new OS, a replacement anyway, changes no argument of the head node).
        python = S3Folder(bucket, f"{WHEELHOUSE_FOLDER}py{cluster.python_version}/")
    nxdt: S3Folder | None = None
    if cluster.neuron is not None:
        given = cluster.neuron.nxdt_wheelhouse
        nxdt = S3Folder.parse(given) if given else S3Folder(bucket, f"{NXDT_FOLDER}{cluster.neuron.sdk_version}/")
    # With or without internet: the nodes build it from the same pinned source, one path for every cluster.
    gpu = any(instance_facts(queue.instance_type).accelerator == "gpu" for queue in cluster.queues)
    nccl_tests = S3Folder(bucket, NCCL_TESTS_FOLDER) if gpu else None
    return ArtifactLocations(bucket, python, nxdt, nccl_tests)
