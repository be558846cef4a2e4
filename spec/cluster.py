"""The `cluster:` section of the deployment spec: one AWS ParallelCluster 3 cluster for training.

Shapes and single-field rules live here; rules that relate fields (EFA needs a placement-group
decision, Capacity Block sizing, reservation AZ, Neuron pins, FSx increments, ...) live in
`spec.platform.validators` and run from `spec.checks`, so a bad spec fails at load, not after a
20-minute CloudFormation rollback. Imports no CDK and no torch.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator

from spec.accounting import AccountingSpec, UserName
from spec.containers import ContainersSpec
from spec.fields import StrictModel, check_bucket_name, matches
from spec.observability import ObservabilitySpec
from spec.users import GroupSpec, UserSpec

DEFAULT_PARALLELCLUSTER_VERSION = "3.16.1"
# The custom resource (cluster as a CloudFormation resource) exists from 3.6.0 on.
MINIMUM_PARALLELCLUSTER_VERSION = (3, 6, 0)

_QUEUE_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,24}$")
_RESERVATION_ID_RE = re.compile(r"^cr-[0-9a-f]{17}$")
_AZ_RE = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d[a-z]$")
_AMI_RE = re.compile(r"^ami-[0-9a-f]{8}(?:[0-9a-f]{9})?$")
_FSX_ID_RE = re.compile(r"^fs-[0-9a-f]{17}$")
_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_MOUNT_DIR_RE = re.compile(r"^/[a-zA-Z0-9_][a-zA-Z0-9_./-]*$")
_SSH_KEY_RE = re.compile(r"^[\x20-\x7e]{1,255}$")
_BACKUP_TIME_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
_S3_PREFIX_RE = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](?:/[A-Za-z0-9!_.*'()/-]*)?$")

# CloudWatch Logs accepts only these retention periods (ParallelCluster's schema repeats them).
LOG_RETENTION_DAYS: tuple[int, ...] = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653)

# FSx for Lustre storage capacity, GiB. The minimum is CloudFormation's for FileSystemType LUSTRE (cfn-lint 1.58's
# schemas/extensions/aws_fsx_filesystem/storage_capacity.json); the maximum is the FSx API's (botocore 1.44's fsx
# service model: StorageCapacity is an integer of at most 2**31 - 1). The increments per deployment type (SSD
# types: 1200 or multiples of 2400) are ParallelCluster's FsxStorageCapacityValidator's, checked in
# spec.platform.validators. Past these, the account's "Lustre storage capacity per file system" quota (adjustable,
# so not checked here) decides.
FSX_LUSTRE_MIN_GIB = 1200
FSX_LUSTRE_MAX_GIB = 2**31 - 1
# FSx for Lustre SCRATCH_2 has no throughput setting: its baseline is 200 MB/s per TiB.
SCRATCH_MB_PER_TIB = 200
# Automatic backups on a PERSISTENT file system unless the spec says otherwise: a week of daily restore points.
DEFAULT_FSX_BACKUP_RETENTION_DAYS = 7

OperatingSystem = Literal["alinux2023", "ubuntu2204", "ubuntu2404", "rhel9", "rocky9"]
# numpy 2.4 and torch 2.13 (requirements-node.txt) need Python 3.11 or newer.
PYTHON_VERSIONS: tuple[str, ...] = ("3.11", "3.12")


def _python_version(value: Any) -> Any:
    # YAML reads an unquoted 3.11 as a number: take it as the version it spells, but 3.10 reads as 3.1.
    if isinstance(value, float):
        if str(value) not in PYTHON_VERSIONS:
            raise ValueError(f"must be one of {', '.join(PYTHON_VERSIONS)}, quoted (YAML reads 3.10 as 3.1)")
        return str(value)
    return value


PythonVersion = Annotated[Literal["3.11", "3.12"], BeforeValidator(_python_version)]


def _s3_folder(value: Any) -> Any:
    """An S3 folder the nodes' read grants can scope to (policies.artifacts): a key prefix ending in '/'."""
    if not isinstance(value, str) or not _S3_PREFIX_RE.match(value):
        raise ValueError("must be an S3 prefix such as s3://my-bucket/wheelhouse/")
    bucket, _, prefix = value.removeprefix("s3://").partition("/")
    check_bucket_name(bucket, dots=True)
    if prefix.strip("/") and any(segment in ("", ".", "..") for segment in prefix.removesuffix("/").split("/")):
        raise ValueError("must not hold an empty, '.' or '..' path segment")
    if "*" in prefix:
        raise ValueError("must not contain '*' (a policy wildcard)")
    if not prefix.strip("/"):
        raise ValueError(f"must name a folder of the bucket, such as s3://{bucket}/wheelhouse/")
    if not prefix.endswith("/"):
        raise ValueError(f"must end with '/' so that '{prefix}' does not also grant '{prefix}-private/'")
    return value


S3FolderUri = Annotated[str, BeforeValidator(_s3_folder)]
QueueUpdateStrategy = Literal["DRAIN", "COMPUTE_FLEET_STOP", "TERMINATE"]
ScalingStrategy = Literal["all-or-nothing", "greedy-all-or-nothing", "best-effort"]
AllocationStrategy = Literal["lowest-price", "capacity-optimized", "price-capacity-optimized", "prioritized"]
DeletionPolicy = Literal["Retain", "Delete"]


def parse_version(version: str) -> tuple[int, int, int]:
    match = _VERSION_RE.match(version)
    if match is None:
        raise ValueError(f"{version!r} is not a MAJOR.MINOR.PATCH version")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


ReservationId = Annotated[str, matches(_RESERVATION_ID_RE, "a capacity reservation id such as cr-0123456789abcdef0")]
AvailabilityZone = Annotated[str, matches(_AZ_RE, "an availability zone name such as us-east-1a")]
AmiId = Annotated[str, matches(_AMI_RE, "an AMI id such as ami-0123456789abcdef0")]
MountDir = Annotated[str, matches(_MOUNT_DIR_RE, "an absolute path such as /fsx")]


class CapacitySpec(StrictModel):
    """Where the queue's instances come from."""

    type: Literal["on_demand", "odcr", "capacity_block"] = Field(
        default="on_demand",
        description=(
            "on_demand: plain On-Demand; odcr: an On-Demand Capacity Reservation; "
            "capacity_block: an EC2 Capacity Block for ML (fixed size, fixed start and end)."
        ),
    )
    reservation_id: ReservationId | None = Field(default=None, description="Required for odcr and capacity_block.")
    availability_zone: AvailabilityZone | None = Field(
        default=None, description="The reservation's AZ; must equal network.availability_zone."
    )


class QueueSpec(StrictModel):
    name: Annotated[str, matches(_QUEUE_NAME_RE, "1-25 lowercase letters, digits and hyphens, starting with a letter")]
    instance_type: str = Field(description="A type from spec/platform/instances.py.")
    min_count: int = Field(default=0, ge=0, le=10000, description="Static nodes (always running and billed).")
    max_count: int = Field(ge=1, le=10000)
    capacity: CapacitySpec = Field(default_factory=CapacitySpec)
    efa: bool | None = Field(default=None, description="None: on when the instance type has EFA interfaces.")
    placement_group: bool | None = Field(
        default=None,
        description=(
            "Explicit choice for EFA queues: true (a cluster placement group) or false (none; right for "
            "Capacity Blocks and usually for ODCRs, whose capacity already sits together)."
        ),
    )
    placement_group_name: str | None = Field(default=None, description="An existing placement group to use.")
    allocation_strategy: AllocationStrategy | None = None
    gpu_health_checks: bool = Field(default=True, description="ParallelCluster's DCGM check before each job (GPU).")
    job_exclusive_allocation: bool = Field(default=True, description="One job per node: no sharing of accelerators.")
    root_volume_gib: int = Field(default=200, ge=35, le=16384)
    allowed_groups: list[UserName] = Field(
        default_factory=list,
        description=(
            "Groups of cluster.groups whose members may submit here (Slurm AllowGroups); empty: everyone, on the "
            "cluster-node role. Set: the nodes run as their own role `queue-<name>`, which reads only the datasets "
            "naming it in readers/writers, so who may read a dataset is who may submit to a queue whose role can."
        ),
    )

    def efa_enabled(self, efa_capable: bool) -> bool:
        return efa_capable if self.efa is None else self.efa


class HeadNodeSpec(StrictModel):
    instance_type: str = Field(default="m6i.2xlarge", description="A head-node type from spec/platform/instances.py.")
    root_volume_gib: int = Field(default=200, ge=35, le=16384)


class FsxSpec(StrictModel):
    """A FSx for Lustre file system that ParallelCluster creates (or an existing one, by id)."""

    mount_dir: MountDir = "/fsx"
    storage_gib: int = Field(
        default=1200,
        ge=FSX_LUSTRE_MIN_GIB,
        le=FSX_LUSTRE_MAX_GIB,
        description="1200 or a multiple of 2400 (SSD deployment types); at most the account's FSx quota.",
    )
    deployment_type: Literal["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"] = "PERSISTENT_2"
    throughput_mb_per_tib: int | None = Field(
        default=250, description="PERSISTENT_2: 125/250/500/1000; PERSISTENT_1: 50/100/200; SCRATCH_2: unset."
    )
    data_compression: Literal["LZ4", "NONE"] = "LZ4"
    deletion_policy: DeletionPolicy = Field(
        default="Retain", description="Retain keeps the file system (and its data) when the cluster is deleted."
    )
    file_system_id: Annotated[str, matches(_FSX_ID_RE, "a file system id such as fs-0123456789abcdef0")] | None = Field(
        default=None, description="Mount an existing file system instead of creating one."
    )
    automatic_backup_retention_days: int | None = Field(
        default=None,
        ge=0,
        le=90,
        description=(
            "Days FSx keeps its daily automatic backups (0-90; 0 turns them off). None: "
            f"{DEFAULT_FSX_BACKUP_RETENTION_DAYS} on PERSISTENT types (the FSx API's own default is 0, no backups); "
            "SCRATCH_2 has no backups."
        ),
    )
    daily_automatic_backup_start_time: (
        Annotated[str, matches(_BACKUP_TIME_RE, "a UTC time HH:MM such as 03:00")] | None
    ) = Field(default=None, description="When the daily backup starts (UTC, HH:MM); None: FSx picks a time.")

    def backup_retention_days(self) -> int:
        """The retention the cluster config asks for: the field, or the default of its deployment type."""
        if self.automatic_backup_retention_days is not None:
            return self.automatic_backup_retention_days
        return 0 if self.deployment_type.startswith("SCRATCH") else DEFAULT_FSX_BACKUP_RETENTION_DAYS

    def baseline_mb_per_s(self) -> float:
        """The file system's baseline throughput: storage (TiB) x throughput per TiB (SCRATCH_2: 200 per TiB)."""
        per_tib = self.throughput_mb_per_tib if self.throughput_mb_per_tib is not None else SCRATCH_MB_PER_TIB
        return self.storage_gib / 1024 * per_tib


# Processes leaving, the exit-status file, the requeue itself: the last part of every stop (planner.stop_window too).
STOP_EXIT_MARGIN_S = 30.0
# Slurm refuses a KillWait above this (slurm.conf(5)).
SLURM_MAX_KILL_WAIT_S = 65533


class StopSaveSpec(StrictModel):
    """The longest stop a job on this cluster makes: the step in flight, then its checkpoint written to cluster.fsx.

    Slurm's KillWait (the seconds between SIGTERM and SIGKILL: scancel, a preemption, a time limit) is derived from
    it, so a stop that TERM asks for can finish; the prolog's free-space floor on the shared file system is one such
    checkpoint. llm-submit's signal-lead note prints both figures for each job ("step N s + checkpoint N GB")."""

    checkpoint_gb: float = Field(
        default=113.0,
        gt=0,
        description=(
            "GB of the largest checkpoint with optimizer state a job writes (parameters x 12 for fsdp, x 14 for "
            "nemo). Default: Llama 3 8B on nemo, 8.03 B x 14 = 112.4 GB."
        ),
    )
    step_s: float = Field(default=30.0, ge=0, description="Seconds of the step in flight when the stop arrives.")

    def seconds(self, fsx: FsxSpec) -> float:
        """The step, the write at the file system's baseline throughput, and the exit."""
        return self.step_s + self.checkpoint_gb * 1000 / fsx.baseline_mb_per_s() + STOP_EXIT_MARGIN_S

    def kill_wait_s(self, fsx: FsxSpec) -> int:
        """Slurm's KillWait for this stop, in whole seconds."""
        return math.ceil(self.seconds(fsx))


NEURON_PACKAGES: tuple[str, ...] = (
    "aws-neuronx-dkms",
    "aws-neuronx-runtime-lib",
    "aws-neuronx-collectives",
    "aws-neuronx-tools",
    "torch-neuronx",
    "neuronx-cc",
)


class NeuronSpec(StrictModel):
    """Neuron SDK for trn1 queues, pinned: every node runs the same driver, runtime and compiler."""

    sdk_version: Annotated[str, matches(_VERSION_RE, "a Neuron SDK release such as 2.26.1")]
    packages: dict[str, str] | None = Field(
        default=None,
        description="Package pins; None: the release's pins from spec/platform/neuron.py (required for other releases).",
    )
    compile_cache_dir: MountDir = Field(
        default="/fsx/neuron-cache", description="Neuron compile cache; on shared storage so every node reuses it."
    )
    custom_ami: AmiId | None = Field(
        default=None,
        description="Neuron AMI built from cluster/bootstrap/neuron-image.yaml; required without internet egress.",
    )
    nxdt_wheelhouse: S3FolderUri | None = Field(
        default=None,
        description=(
            "S3 folder of the NxDT stack (make nxdt-wheelhouse) that trn1 nodes install from when their AMI lacks "
            "it. None: s3://<name>-artifacts-<compute account>/nxdt/<sdk_version>/ (make upload-artifacts)."
        ),
    )

    @field_validator("packages")
    @classmethod
    def _known_packages(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        unknown = sorted(set(value) - set(NEURON_PACKAGES))
        if unknown:
            raise ValueError(f"has unknown package(s) {', '.join(unknown)}; known: {', '.join(NEURON_PACKAGES)}")
        missing = [name for name in NEURON_PACKAGES if name not in value]
        if missing:
            raise ValueError(f"must pin every Neuron package; missing: {', '.join(missing)}")
        for name, version in value.items():
            if not re.fullmatch(r"\d+(?:\.\d+){2,5}", version):
                raise ValueError(f"pin for {name} must be a plain version such as 2.24.7.0, not {version!r}")
        return value


class ClusterSpec(StrictModel):
    parallelcluster_version: Annotated[str, matches(_VERSION_RE, "a version such as 3.16.1")] = (
        DEFAULT_PARALLELCLUSTER_VERSION
    )
    os: OperatingSystem = "alinux2023"
    custom_ami: AmiId | None = Field(default=None, description="Cluster-wide AMI (ParallelCluster-built).")
    head_node: HeadNodeSpec = Field(default_factory=HeadNodeSpec)
    ssh_key_name: Annotated[str, matches(_SSH_KEY_RE, "an EC2 key pair name")] | None = Field(
        default=None, description="None: no SSH key; connect through SSM Session Manager."
    )
    queues: list[QueueSpec] = Field(min_length=1, max_length=50)
    scaledown_idletime_minutes: int = Field(default=10, ge=1, le=1440)
    queue_update_strategy: QueueUpdateStrategy = Field(
        default="DRAIN", description="How queue changes reach running nodes on update (DRAIN waits for jobs)."
    )
    scaling_strategy: ScalingStrategy = Field(
        default="all-or-nothing", description="all-or-nothing: a multi-node job gets every node or none."
    )
    fsx: FsxSpec | None = Field(default_factory=FsxSpec)
    neuron: NeuronSpec | None = None
    containers: ContainersSpec = Field(default_factory=ContainersSpec)
    deletion_policy: DeletionPolicy = Field(
        default="Delete",
        description="Custom::PclusterCluster DeletionPolicy: Delete removes the cluster with the stack.",
    )
    termination_protection: bool = Field(default=True, description="Termination protection on the cluster stack.")
    log_retention_days: int = 30
    bootstrap_timeout_minutes: int = Field(default=30, ge=5, le=180)
    python_version: PythonVersion = Field(
        default="3.11",
        description=(
            "python3.X the head node builds the training env on shared storage with (every node runs it); "
            "the wheelhouse must be built for the same version (make wheelhouse WHEELHOUSE_PYTHON=...)."
        ),
    )
    python_wheelhouse: S3FolderUri | None = Field(
        default=None,
        description=(
            "S3 folder holding the wheels of requirements-node.txt and, in its observability/, the exporters' "
            "binaries (make upload-artifacts builds and uploads both). None: with network.internet_egress none, "
            "s3://<name>-artifacts-<compute account>/wheelhouse/py<python_version>/ in the bucket the "
            "artifacts stack creates; with nat, PyPI (and no exporters' binaries). Another bucket must be in the "
            "compute account."
        ),
    )
    stop_save: StopSaveSpec = Field(
        default_factory=StopSaveSpec,
        description="The longest stop a job makes: sets Slurm's KillWait and the shared file system's free-space floor.",
    )
    prices: dict[str, float] = Field(
        default_factory=dict, description="On-demand USD per hour by instance type; overrides the facts table."
    )
    observability: ObservabilitySpec = Field(
        default_factory=ObservabilitySpec,
        description="Metrics exporters, Prometheus and Grafana; see docs/observability.md.",
    )
    accounting: AccountingSpec = Field(
        default_factory=AccountingSpec,
        description="Slurm accounting database, fair-share and per-team QoS; see docs/observability.md#accounting.",
    )
    users: list[UserSpec] = Field(
        default_factory=list,
        description="People's accounts, created alike on every node; empty: the AMI's default user only. See "
        "docs/cluster.md#users-and-groups.",
    )
    groups: list[GroupSpec] = Field(default_factory=list, description="The groups cluster.users belong to.")

    @field_validator("parallelcluster_version")
    @classmethod
    def _supported_version(cls, value: str) -> str:
        if parse_version(value) < MINIMUM_PARALLELCLUSTER_VERSION:
            raise ValueError("must be 3.6.0 or newer (the cluster custom resource arrived in 3.6.0)")
        return value

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"must be one of CloudWatch Logs' periods: {', '.join(map(str, LOG_RETENTION_DAYS))}")
        return value

    @field_validator("prices")
    @classmethod
    def _positive_prices(cls, value: dict[str, float]) -> dict[str, float]:
        for name, price in value.items():
            if price <= 0:
                raise ValueError(f"price for {name} must be positive, not {price}")
        return value

    def queue(self, name: str) -> QueueSpec:
        for queue in self.queues:
            if queue.name == name:
                return queue
        raise KeyError(f"no queue named {name!r} (known: {', '.join(q.name for q in self.queues)})")
