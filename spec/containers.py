"""The `cluster.containers:` section: the NeMo image GPU jobs run through pyxis/enroot, reachable without internet.

A private VPC reaches ECR (ecr.api, ecr.dkr and the S3 gateway endpoint), never nvcr.io. So the image is the
EFA-enabled build of containers/nemo-efa, pushed to an ECR repository of the compute account (`make nemo-image`),
and jobs run either its squashfs import on shared storage (`nemo_image: /fsx/...sqsh`, the default: no registry
traffic per job) or the ECR image itself (`nemo_image: <account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>`).
The compute nodes' role may pull from `ecr_repository` only (policies.cluster_nodes).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, field_validator

from spec.errors import SpecProblem
from spec.fields import StrictModel, matches

if TYPE_CHECKING:
    from spec.model import DeploymentSpec

# ECR's repository-name grammar (lowercase components separated by / . _ -) and Docker's tag grammar.
_ECR_REPOSITORY_RE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
ECR_IMAGE_RE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com/"
    r"(?P<repository>[a-z0-9][a-z0-9._/-]*):(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127})$"
)
_SQSH_RE = re.compile(r"^/[A-Za-z0-9_][A-Za-z0-9_./-]*\.sqsh$")
_MOUNT_DIR_RE = re.compile(r"^/[a-zA-Z0-9_][a-zA-Z0-9_./-]*$")

DEFAULT_REPOSITORY = "llm-nemo-efa"
# NeMo 25.07 (NeMo 2.4.0) with EFA installer 1.43.2: containers/nemo-efa/Dockerfile's build arguments.
DEFAULT_TAG = "25.07.00-efa1.43.2"


@dataclass(frozen=True)
class EcrImage:
    account: str
    region: str
    repository: str
    tag: str

    @property
    def registry(self) -> str:
        return f"{self.account}.dkr.ecr.{self.region}.amazonaws.com"

    @property
    def reference(self) -> str:
        """What docker push/pull take."""
        return f"{self.registry}/{self.repository}:{self.tag}"

    @property
    def enroot_uri(self) -> str:
        """What enroot import and pyxis take: the registry is separated from the image by '#'."""
        return f"docker://{self.registry}#{self.repository}:{self.tag}"

    @property
    def repository_arn(self) -> str:
        return f"arn:aws:ecr:{self.region}:{self.account}:repository/{self.repository}"


def parse_ecr_image(reference: str) -> EcrImage | None:
    match = ECR_IMAGE_RE.match(reference)
    return EcrImage(**match.groupdict()) if match else None


def pyxis_image(image: str) -> str:
    """--container-image for pyxis: a .sqsh path as is; a registry reference with its registry before a '#'
    (pyxis would otherwise look the whole reference up on Docker Hub)."""
    if image.startswith("/") or "#" in image:
        return image
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return image


def _image_reference(value: str) -> str:
    if _SQSH_RE.match(value) or ECR_IMAGE_RE.match(value):
        return value
    registry = value.split("/", 1)[0] if "/" in value else "docker.io"
    raise ValueError(
        f"must be a .sqsh file on shared storage or an image in the compute account's ECR "
        f"(<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>); the cluster's VPC cannot reach {registry}"
    )


class ContainersSpec(StrictModel):
    """Containers on GPU queues: pyxis (srun --container-image) on enroot."""

    pyxis: bool = True
    ecr_repository: Annotated[str, matches(_ECR_REPOSITORY_RE, "an ECR repository name such as llm-nemo-efa")] = Field(
        default=DEFAULT_REPOSITORY, description="Compute-account ECR repository of the EFA NeMo image."
    )
    image_tag: Annotated[str, matches(_TAG_RE, "an image tag such as 25.07.00-efa1.43.2")] = DEFAULT_TAG
    nemo_image: str = Field(
        default=f"/fsx/containers/{DEFAULT_REPOSITORY}-{DEFAULT_TAG}.sqsh",
        description="What jobs run: the .sqsh import on shared storage, or the ECR image itself.",
    )
    # Local NVMe (ParallelCluster mounts instance store at /scratch). Never shared storage: enroot
    # unpacks per node, and a shared runtime path breaks multi-node srun.
    enroot_local_dir: Annotated[str, matches(_MOUNT_DIR_RE, "an absolute path such as /scratch/enroot")] = (
        "/scratch/enroot"
    )

    @field_validator("nemo_image")
    @classmethod
    def _reachable_image(cls, value: str) -> str:
        return _image_reference(value)

    def ecr_image(self, account: str, region: str) -> EcrImage:
        """The image `make nemo-image` pushes and the nodes may pull."""
        return EcrImage(account, region, self.ecr_repository, self.image_tag)


def container_problems(spec: DeploymentSpec) -> Iterator[SpecProblem]:
    """The image must be the compute account's, in the deployment region, or a .sqsh on the cluster's FSx."""
    cluster = spec.cluster
    if cluster is None or not cluster.containers.pyxis:
        return
    containers = cluster.containers
    image = containers.nemo_image
    ecr = parse_ecr_image(image)
    path = "cluster.containers.nemo_image"
    if ecr is not None:
        if ecr.account != spec.accounts.compute:
            yield SpecProblem(
                path, f"is in account {ecr.account}, not the compute account {spec.accounts.compute}", image
            )
        if ecr.region != spec.region:
            yield SpecProblem(path, f"is in region {ecr.region}, not the deployment region {spec.region}", image)
        if ecr.repository != containers.ecr_repository:
            yield SpecProblem(
                path,
                f"is not in cluster.containers.ecr_repository ({containers.ecr_repository}): the nodes may pull only that",
                image,
            )
        return
    # Without a shared file system the cluster may still train without NeMo: training.submit refuses a NeMo job.
    if cluster.fsx is not None and not image.startswith(cluster.fsx.mount_dir.rstrip("/") + "/"):
        yield SpecProblem(
            path, f"is not on the shared file system ({cluster.fsx.mount_dir}): every node reads it", image
        )
