"""The `cluster.containers:` section: the NeMo image GPU jobs run through pyxis/enroot, reachable without internet.

A private VPC reaches ECR (ecr.api, ecr.dkr and the S3 gateway endpoint), never nvcr.io. So the image is the
EFA-enabled build of containers/nemo-efa, pushed to an ECR repository of the compute account (`make nemo-image`),
and jobs run either its squashfs import on shared storage (`nemo_image: /fsx/...sqsh`, the default: no registry
traffic per job) or the ECR image itself (`nemo_image: <account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>`).
The compute nodes' role may pull from `ecr_repository` only (policies.cluster_nodes).

`nemo_framework` picks NVIDIA's NeMo Framework container the image is built FROM, and with it the job's entry
point (FRAMEWORKS): Megatron Bridge in the current container (the default), or NeMo 2.4 in nemo:25.07, kept as a
pinned choice. `image_tag` and `nemo_image` default to that framework's build.

CUDA per container, as NVIDIA's NeMo Framework and PyTorch container release notes give it (recalled, not opened in
this repo: confirm against the notes before relying on the refusal below for a new image): nemo:25.07 is
built on the PyTorch 25.06 container, CUDA 12.9 (its TORCH_CUDA_ARCH_LIST names 10.0, so B200 and B300 run its
sm_100 kernels); nemo:26.08 is a CUDA 13.0 image. Blackwell needs CUDA 12.8 or newer (B200, sm_100) and 12.9 or
newer (B300, sm_103); PyTorch's first wheels with sm_100 were 2.7's cu128 builds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from spec.fields import StrictModel, matches

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
EFA_INSTALLER_VERSION = "1.43.2"

FrameworkName = Literal["megatron-bridge-26.08", "nemo-25.07"]


@dataclass(frozen=True)
class Framework:
    """One NeMo Framework container the jobs can run, and how a job drives it."""

    base_image: str  # what containers/nemo-efa builds FROM (NEMO_IMAGE)
    tag: str  # the ECR tag of our EFA build: the base's tag and the EFA installer's version
    entry_point: str  # launch/jobs/<entry_point>, run in the container by nemo.sh
    check_import: str  # the module the image build imports to prove the framework is there
    versions: str  # what the container carries, for docs and notes
    # The CUDA toolkit the image's PyTorch and libraries are built with: a GPU newer than it has no kernels there
    # (spec.platform.validators refuses such a queue; spec.platform.instances.MIN_CUDA says what each GPU needs).
    cuda: tuple[int, int] = (0, 0)


# Megatron Bridge 0.6.0 is NeMo Framework 26.08's LLM training library (its GitHub release v0.6.0 is titled
# "NeMo Framework 26.08 - Megatron Bridge Release Notes"); megatron-bridge 0.6.0 is on PyPI, so the contract tests
# run the same version (tests/launch/contracts/bridge-lock.txt). NeMo 2.4.0 is nemo:25.07's (tests/launch/contracts/
# nemo-lock.txt). NeMo's own main line no longer has the LLM collection that 25.07's entry point uses.
FRAMEWORKS: dict[str, Framework] = {
    "megatron-bridge-26.08": Framework(
        base_image="nvcr.io/nvidia/nemo:26.08",
        tag=f"26.08-efa{EFA_INSTALLER_VERSION}",
        entry_point="bridge_pretrain.py",
        check_import="megatron.bridge",
        versions="NeMo Framework 26.08: Megatron Bridge 0.6.0, Megatron Core (main, 2026-07), PyTorch 2.13.0, CUDA 13.0",
        cuda=(13, 0),
    ),
    "nemo-25.07": Framework(
        base_image="nvcr.io/nvidia/nemo:25.07.00",
        tag=f"25.07.00-efa{EFA_INSTALLER_VERSION}",
        entry_point="nemo_pretrain.py",
        check_import="nemo.collections.llm",
        versions="NeMo Framework 25.07: NeMo 2.4.0 (NeMo 2 recipes, Lightning), NeMo-Run, CUDA 12.9",
        cuda=(12, 9),
    ),
}
DEFAULT_FRAMEWORK: FrameworkName = "megatron-bridge-26.08"
DEFAULT_TAG = FRAMEWORKS[DEFAULT_FRAMEWORK].tag


def default_sqsh(repository: str, tag: str) -> str:
    return f"/fsx/containers/{repository}-{tag}.sqsh"


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
    nemo_framework: FrameworkName = Field(
        default=DEFAULT_FRAMEWORK,
        description="The NeMo Framework container (and job entry point): megatron-bridge-26.08 or nemo-25.07.",
    )
    ecr_repository: Annotated[str, matches(_ECR_REPOSITORY_RE, "an ECR repository name such as llm-nemo-efa")] = Field(
        default=DEFAULT_REPOSITORY, description="Compute-account ECR repository of the EFA NeMo image."
    )
    image_tag: Annotated[str, matches(_TAG_RE, "an image tag such as 26.08-efa1.43.2")] = DEFAULT_TAG
    nemo_image: str = Field(
        default=default_sqsh(DEFAULT_REPOSITORY, DEFAULT_TAG),
        description="What jobs run: the .sqsh import on shared storage, or the ECR image itself.",
    )
    # Local NVMe (ParallelCluster mounts instance store at /scratch). Never shared storage: enroot
    # unpacks per node, and a shared runtime path breaks multi-node srun.
    enroot_local_dir: Annotated[str, matches(_MOUNT_DIR_RE, "an absolute path such as /scratch/enroot")] = (
        "/scratch/enroot"
    )

    @model_validator(mode="before")
    @classmethod
    def _framework_defaults(cls, data: Any) -> Any:
        """Without an image_tag or nemo_image, the chosen framework's build and its .sqsh on /fsx."""
        if not isinstance(data, dict):
            return data
        framework = FRAMEWORKS.get(str(data.get("nemo_framework", DEFAULT_FRAMEWORK)))
        if framework is None:  # the Literal names the choices
            return data
        data = dict(data)
        data.setdefault("image_tag", framework.tag)
        data.setdefault(
            "nemo_image", default_sqsh(str(data.get("ecr_repository", DEFAULT_REPOSITORY)), str(data["image_tag"]))
        )
        return data

    @property
    def framework(self) -> Framework:
        return FRAMEWORKS[self.nemo_framework]

    @field_validator("nemo_image")
    @classmethod
    def _reachable_image(cls, value: str) -> str:
        return _image_reference(value)

    def ecr_image(self, account: str, region: str) -> EcrImage:
        """The image `make nemo-image` pushes and the nodes may pull."""
        return EcrImage(account, region, self.ecr_repository, self.image_tag)
