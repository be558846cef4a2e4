"""The deployment spec: one YAML document that the stacks, the policies, the cluster and the
training jobs all read.

This module imports neither aws-cdk-lib nor torch: the head node's submit command and the
policy tests load the same spec.

Field-level rules live on the fields; rules that relate several fields live in
`spec.checks`, which reports them with the same `path: message (value)` shape.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator

from spec.cluster import ClusterSpec
from spec.fields import StrictModel, check_bucket_name, matches
from spec.observability import ObservabilitySpec
from spec.regions import DYNAMODB_PREFIX_LISTS, REGIONS, S3_PREFIX_LISTS

# Roles this repo creates in the compute account; datasets name them as readers/writers.
BUILTIN_ROLES: tuple[str, ...] = ("cluster-node", "head-node", "notebook")
# A queue with allowed_groups runs its nodes as its own role, `<name>-queue-<queue>`: datasets name it in readers and
# writers as `queue-<queue>`, so only the groups admitted to that partition reach them (docs/security.md).
QUEUE_ROLE_PREFIX = "queue-"
_QUEUE_ROLE_RE = re.compile(r"^queue-[a-z][a-z0-9-]{0,24}$")
# The role of the people who open SSM sessions on the nodes, created when perimeter.operator_roles names it.
OPERATOR_ROLE = "operator"

_ACCOUNT_RE = re.compile(r"^\d{12}$")
_ROLE_ARN_RE = re.compile(r"^arn:aws:iam::(?P<account>\d{12}):role/(?P<name>[\w+=,.@/-]{1,512})$")
_KMS_KEY_ARN_RE = re.compile(
    r"^arn:aws:kms:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):key/(?P<key_id>[0-9a-f-]{36}|mrk-[0-9a-f]{32})$"
)
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{1,22}[a-z0-9]$")
_DATASET_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
_ORG_ID_RE = re.compile(r"^o-[a-z0-9]{10,32}$")
_VPC_ID_RE = re.compile(r"^vpc-[0-9a-f]{8}(?:[0-9a-f]{9})?$")
_SUBNET_ID_RE = re.compile(r"^subnet-[0-9a-f]{8}(?:[0-9a-f]{9})?$")
_RTB_ID_RE = re.compile(r"^rtb-[0-9a-f]{8}(?:[0-9a-f]{9})?$")
_PREFIX_LIST_RE = re.compile(r"^pl-[0-9a-f]{8}(?:[0-9a-f]{9})?$")
_VPCE_ID_RE = re.compile(r"^vpce-[0-9a-f]{8}(?:[0-9a-f]{9})?$")
_AZ_RE = re.compile(r"^(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)[a-z]$")
CLOUDWATCH_RETENTION_DAYS = frozenset(
    {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}
)
_NOTEBOOK_TYPE_RE = re.compile(r"^ml\.[a-z0-9]+\.[a-z0-9]+$")


def _account_id(value: Any) -> str:
    # YAML reads an unquoted 111111111111 as an int; accept it only when it is exactly 12 digits
    # (an account id with a leading zero would already have lost it).
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not _ACCOUNT_RE.match(value):
        raise ValueError("must be a 12-digit AWS account id (quote it in YAML)")
    return value


AccountId = Annotated[str, BeforeValidator(_account_id)]


def check_access_point_name(name: str) -> str:
    """S3 access point naming rules."""
    if not 3 <= len(name) <= 50:
        raise ValueError("must be 3-50 characters")
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*[a-z0-9]", name):
        raise ValueError(
            "may hold only lowercase letters, digits and hyphens, and must begin and end with a letter or digit"
        )
    if name.startswith("xn--"):
        raise ValueError("must not begin with 'xn--' (reserved by S3)")
    if name.endswith("-s3alias"):
        raise ValueError("must not end with '-s3alias' (reserved by S3)")
    return name


def check_prefix(prefix: str) -> str:
    """A key prefix that a policy can scope to: 'a/b/' form."""
    if prefix in ("", "/") or set(prefix) <= {"/", "*"}:
        raise ValueError("must name a folder such as 'corpora/pile/'; the whole bucket cannot be granted")
    if not prefix.endswith("/"):
        raise ValueError("must end with '/' so that 'data/' does not also match 'data-private/'")
    if prefix.startswith("/"):
        raise ValueError("must not begin with '/' (S3 keys have no leading slash)")
    if "//" in prefix:
        raise ValueError("must not contain an empty path segment '//'")
    if any(ch in prefix for ch in "*?$"):
        raise ValueError("must not contain '*', '?' or '$' (policy wildcards and variables)")
    if not prefix.isascii() or any(ord(ch) < 32 for ch in prefix):
        raise ValueError("must be printable ASCII")
    return prefix


class Accounts(StrictModel):
    compute: AccountId = Field(description="Account that runs the cluster and notebooks.")
    data: AccountId = Field(description="Account that owns the bucket and its access points.")


class ExistingNetwork(StrictModel):
    """Bring-your-own network, for landing zones that own their VPCs."""

    subnet_ids: list[Annotated[str, matches(_SUBNET_ID_RE, "a subnet id such as subnet-0123456789abcdef0")]] = Field(
        min_length=1
    )
    route_table_ids: list[Annotated[str, matches(_RTB_ID_RE, "a route table id such as rtb-0123456789abcdef0")]] = (
        Field(min_length=1, description="Route tables of the subnets; the S3 gateway endpoint attaches to them.")
    )
    vpc_cidr: ipaddress.IPv4Network = Field(
        strict=False, description="CIDR of the existing VPC (endpoint security group ingress)."
    )


class NetworkSpec(StrictModel):
    mode: Literal["create", "existing"] = Field(
        default="create", description="create: the network stack builds the VPC; existing: use `existing`."
    )
    cidr: ipaddress.IPv4Network = Field(
        strict=False,
        default=ipaddress.IPv4Network("10.40.0.0/16"),
        description="VPC range (mode=create), /16 to /22, private.",
    )
    availability_zone: str = Field(description="AZ of the compute subnets (and of any capacity reservation).")
    vpc_id: Annotated[str, matches(_VPC_ID_RE, "a VPC id such as vpc-0123456789abcdef0")] | None = Field(
        default=None,
        description=(
            "The compute VPC id that the data account's access points accept. mode=existing: the VPC to use. "
            "mode=create: the VpcId output of the network stack (two-phase deploy: llm-phase-two writes it); until "
            "it is set the data stack is not synthesized."
        ),
    )
    existing: ExistingNetwork | None = Field(default=None, description="The VPC's subnets (mode=existing).")
    internet_egress: Literal["none", "nat"] = Field(
        default="none", description="none: nothing reaches the internet; nat: a NAT gateway in a public subnet."
    )
    s3_prefix_list_id: Annotated[str, matches(_PREFIX_LIST_RE, "a prefix list id such as pl-63a5400a")] | None = Field(
        default=None, description="Overrides the pinned per-region table."
    )
    dynamodb_prefix_list_id: Annotated[str, matches(_PREFIX_LIST_RE, "a prefix list id such as pl-02cd2c6b")] | None = (
        Field(default=None, description="Overrides the pinned per-region table (needed with a cluster).")
    )
    flow_log_retention_days: int = Field(default=90, description="VPC flow log retention (a CloudWatch value).")
    s3_gateway_endpoint_id: (
        Annotated[str, matches(_VPCE_ID_RE, "a VPC endpoint id such as vpce-0123456789abcdef0")] | None
    ) = Field(
        default=None,
        description=(
            "The S3GatewayEndpointId output of the network stack (two-phase deploy: llm-phase-two writes it, like "
            "vpc_id). When set, the "
            "access point policies also require aws:SourceVpce, so a second S3 endpoint in the VPC (one without "
            "our endpoint policy) reaches no dataset; until then synth warns what it would add."
        ),
    )
    sagemaker_api_endpoint_id: (
        Annotated[str, matches(_VPCE_ID_RE, "a VPC endpoint id such as vpce-0123456789abcdef0")] | None
    ) = Field(
        default=None,
        description=(
            "The SageMakerApiEndpointId output of the network stack (llm-phase-two writes it): the guardrail SCP then "
            "allows presigned notebook URLs only through this endpoint (aws:SourceVpce); until then only from the VPC "
            "(aws:SourceVpc)."
        ),
    )

    @field_validator("availability_zone")
    @classmethod
    def _az_shape(cls, value: str) -> str:
        if not _AZ_RE.match(value):
            raise ValueError("must be an availability zone name such as us-east-1a")
        return value

    @field_validator("flow_log_retention_days")
    @classmethod
    def _cloudwatch_retention(cls, value: int) -> int:
        if value not in CLOUDWATCH_RETENTION_DAYS:
            raise ValueError(f"must be one of CloudWatch's retention values {sorted(CLOUDWATCH_RETENTION_DAYS)}")
        return value

    @field_validator("cidr")
    @classmethod
    def _cidr_size(cls, value: ipaddress.IPv4Network) -> ipaddress.IPv4Network:
        if not 16 <= value.prefixlen <= 22:
            raise ValueError("must be between /16 and /22 (room for private, public and endpoint subnets)")
        if not value.is_private:
            raise ValueError("must be a private (RFC 1918) range")
        return value


class EncryptionSpec(StrictModel):
    kms_key_arn: (
        Annotated[str, matches(_KMS_KEY_ARN_RE, "a KMS key ARN such as arn:aws:kms:REGION:ACCOUNT:key/UUID")] | None
    ) = Field(default=None, description="None: the data stack creates and manages the key (with rotation).")


def _role_ref(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    if value in BUILTIN_ROLES or _QUEUE_ROLE_RE.match(value) or _ROLE_ARN_RE.match(value):
        return value
    raise ValueError(
        f"must be one of {', '.join(BUILTIN_ROLES)}, queue-QUEUE (the role of a queue with allowed_groups) or an IAM "
        "role ARN arn:aws:iam::ACCOUNT:role/NAME"
    )


def is_queue_role(ref: str) -> bool:
    """`queue-<queue>`: the node role of a queue with allowed_groups, created by this repo."""
    return _QUEUE_ROLE_RE.match(ref) is not None


RoleRef = Annotated[str, BeforeValidator(_role_ref)]


class DatasetSpec(StrictModel):
    name: Annotated[str, matches(_DATASET_NAME_RE, "lowercase letters, digits and hyphens, at most 32")] = Field(
        description="Names the dataset in job specs and policy statement ids."
    )
    prefix: Annotated[str, BeforeValidator(lambda v: check_prefix(v) if isinstance(v, str) else v)] = Field(
        description="Key prefix the dataset owns, e.g. 'corpora/pile/'; datasets' prefixes must not overlap."
    )
    access_point: Annotated[str, BeforeValidator(lambda v: check_access_point_name(v) if isinstance(v, str) else v)] = (
        Field(description="Name of the dataset's VPC-only access point (S3 naming rules).")
    )
    network_origin: str = Field(default="vpc", description="Must be 'vpc': Internet-origin access points are refused.")
    readers: list[RoleRef] = Field(default_factory=list, description="Compute-account roles that may Get/List.")
    writers: list[RoleRef] = Field(default_factory=list, description="Compute-account roles that may Put.")
    output_prefix: str | None = Field(
        default=None, description="Where writers may Put; inside `prefix`. Required when writers are set."
    )

    @field_validator("network_origin")
    @classmethod
    def _vpc_only(cls, value: str) -> str:
        if value.lower() != "vpc":
            raise ValueError("must be 'vpc': access points here accept only requests from the compute VPC")
        return "vpc"

    @field_validator("output_prefix")
    @classmethod
    def _output_prefix_shape(cls, value: str | None) -> str | None:
        return None if value is None else check_prefix(value)


class DataSpec(StrictModel):
    bucket_name: Annotated[str, BeforeValidator(lambda v: check_bucket_name(v) if isinstance(v, str) else v)] = Field(
        description="The dataset bucket (no dots); its access logs go to '<name>-logs'."
    )
    encryption: EncryptionSpec = Field(default_factory=EncryptionSpec, description="SSE-KMS key.")
    datasets: list[DatasetSpec] = Field(min_length=1, description="One access point per dataset.")
    noncurrent_version_days: int = Field(
        default=30, ge=1, le=3650, description="Days a replaced or deleted object version is kept."
    )
    checkpoint_replica: str | None = Field(
        default=None,
        description=(
            "Name of the dataset that every training job (FSDP, NeMo, Neuron) copies each committed checkpoint to, under "
            "its output_prefix and the "
            "run's name (docs/checkpointing.md); cluster-node must read and write it. None: the file system holds "
            "the only copy."
        ),
    )
    access_log_days: int = Field(
        default=1096,
        ge=90,
        le=3650,
        description="Days server access logs are kept (a deleted or overwritten log stays recoverable as long).",
    )

    @property
    def log_bucket_name(self) -> str:
        return f"{self.bucket_name}-logs"


def _policy_source(value: Any) -> Any:
    if isinstance(value, str):
        if not value.endswith(".json"):
            raise ValueError("must be a path to a .json policy document or an inline policy document")
        return value
    if isinstance(value, dict):
        if not value.get("Statement"):
            raise ValueError("must be a policy document with a Statement")
        return value
    raise ValueError("must be a path to a .json policy document or an inline policy document")


# An organization policy: a JSON file path (relative to the working directory) or an inline document.
PolicySource = Annotated[str | dict[str, Any], BeforeValidator(_policy_source)]


class PerimeterSpec(StrictModel):
    organization_bound: bool = Field(
        default=True,
        description="Bucket and endpoint policies require principals of `organization_id` (aws:PrincipalOrgID).",
    )
    require_vpc_origin_on_bucket: bool = Field(
        default=False,
        description=(
            "Also deny object access on the bucket itself unless it came through a VPC access point. "
            "Off by default: it blocks the data account's own direct uploads and replication."
        ),
    )
    scps: list[PolicySource] = Field(
        default_factory=list,
        description="Service control policies over both accounts; the policy tests evaluate them as a layer.",
    )
    rcps: list[PolicySource] = Field(
        default_factory=list,
        description="Resource control policies over the data account; the policy tests evaluate them as a layer.",
    )
    guardrail_scps: bool = Field(
        default=True,
        description=(
            "Evaluate this repo's guardrail SCPs (policies/guardrails.py: VPC-only access points, presigned notebook "
            "URLs only from the VPC, SSM sessions on the nodes only for operator_roles) as a layer of the matrix. "
            "`python -m policies.guardrails` prints them for the organization's administrators to attach."
        ),
    )
    operator_roles: list[Annotated[str, matches(_ROLE_ARN_RE, "an IAM role ARN arn:aws:iam::ACCOUNT:role/NAME")]] = (
        Field(
            default_factory=list,
            description=(
                "Roles that may open SSM sessions on the compute account's instances (guardrail SCP). Empty: the "
                "guardrail leaves sessions to IAM and says so. Naming `<name>-operator` of the compute account (as "
                "spec/default.yaml does) makes the identity stack create that role; roles of your own get nothing "
                "created."
            ),
        )
    )


class NotebookSpec(StrictModel):
    enabled: bool = Field(default=False, description="Build the notebook stack (and the notebook role).")
    instance_type: Annotated[str, matches(_NOTEBOOK_TYPE_RE, "a SageMaker instance type such as ml.t3.medium")] = (
        "ml.t3.medium"
    )
    volume_size_gb: int = Field(default=50, ge=5, le=16384)


class DeploymentSpec(StrictModel):
    name: Annotated[str, matches(_NAME_RE, "3-24 lowercase letters, digits and hyphens, starting with a letter")] = (
        Field(description="Prefix of stack and role names.")
    )
    region: str = Field(description="Region of both accounts' stacks (see spec/regions.py).")
    organization_id: Annotated[str, matches(_ORG_ID_RE, "an organization id such as o-a1b2c3d4e5")] | None = Field(
        default=None, description="AWS Organizations id; bucket and endpoint policies admit only its principals."
    )
    accounts: Accounts = Field(description="The two accounts of the design.")
    network: NetworkSpec = Field(description="The compute VPC.")
    data: DataSpec = Field(description="The dataset bucket, its key and its datasets.")
    perimeter: PerimeterSpec = Field(default_factory=PerimeterSpec, description="Organization-wide guard rails.")
    notebook: NotebookSpec = Field(default_factory=NotebookSpec, description="The optional SageMaker notebook.")
    # The ParallelCluster section; cluster/ gives it its schema.
    cluster: ClusterSpec | None = Field(
        default=None, description="The ParallelCluster (SLURM) cluster; see docs/cluster.md."
    )

    @field_validator("region")
    @classmethod
    def _known_region(cls, value: str) -> str:
        if value not in REGIONS:
            raise ValueError("is not a region this repo knows (see spec/regions.py)")
        return value

    # ---- derived names: every ARN a policy needs is a pure function of the spec ----

    @property
    def observability(self) -> ObservabilitySpec:
        """The cluster's observability section; without a cluster nothing is collected."""
        if self.cluster is None:
            return ObservabilitySpec(enabled=False, managed_prometheus=False)
        return self.cluster.observability

    @property
    def s3_prefix_list_id(self) -> str:
        resolved = self.network.s3_prefix_list_id or S3_PREFIX_LISTS.get(self.region)
        if resolved is None:  # spec.checks refuses such a spec; this guards direct use
            raise ValueError(f"network.s3_prefix_list_id: required for region {self.region!r}")
        return resolved

    @property
    def dynamodb_prefix_list_id(self) -> str:
        resolved = self.network.dynamodb_prefix_list_id or DYNAMODB_PREFIX_LISTS.get(self.region)
        if resolved is None:  # spec.checks refuses such a spec when a cluster is defined
            raise ValueError(f"network.dynamodb_prefix_list_id: required for region {self.region!r}")
        return resolved

    def role_name(self, role: str) -> str:
        """Deterministic role names, so the data account's policies can name them before they exist."""
        return f"{self.name}-{role}"

    def role_arn(self, ref: str) -> str:
        if ref in BUILTIN_ROLES or is_queue_role(ref):
            return f"arn:aws:iam::{self.accounts.compute}:role/{self.role_name(ref)}"
        return ref

    @property
    def operator_role_arn(self) -> str:
        """`<name>-operator` of the compute account: the operator role this repo creates when the spec names it."""
        return f"arn:aws:iam::{self.accounts.compute}:role/{self.role_name(OPERATOR_ROLE)}"

    @property
    def creates_operator_role(self) -> bool:
        return self.operator_role_arn in self.perimeter.operator_roles

    @property
    def bucket_arn(self) -> str:
        return f"arn:aws:s3:::{self.data.bucket_name}"

    def access_point_arn(self, dataset: DatasetSpec) -> str:
        return f"arn:aws:s3:{self.region}:{self.accounts.data}:accesspoint/{dataset.access_point}"

    @property
    def kms_key_alias(self) -> str:
        return f"alias/{self.name}-datasets"

    @property
    def kms_key_is_managed(self) -> bool:
        return self.data.encryption.kms_key_arn is None

    @property
    def s3_service_principal_for_kms(self) -> str:
        """The kms:ViaService value for S3 in this region."""
        return f"s3.{self.region}.amazonaws.com"

    def dataset(self, name: str) -> DatasetSpec:
        for dataset in self.data.datasets:
            if dataset.name == name:
                return dataset
        known = ", ".join(d.name for d in self.data.datasets)
        raise KeyError(f"no dataset named {name!r} (known: {known})")

    def datasets_readable_by(self, ref: str) -> list[DatasetSpec]:
        return [d for d in self.data.datasets if ref in d.readers]

    @property
    def checkpoint_dataset(self) -> DatasetSpec | None:
        """The dataset named by data.checkpoint_replica (the spec's checks make sure it exists)."""
        name = self.data.checkpoint_replica
        return next((d for d in self.data.datasets if d.name == name), None) if name else None

    def datasets_writable_by(self, ref: str) -> list[DatasetSpec]:
        return [d for d in self.data.datasets if ref in d.writers]

    @property
    def queue_roles(self) -> list[str]:
        """`queue-<queue>` of each queue with allowed_groups: roles this repo creates, in queue order."""
        if self.cluster is None:
            return []
        return [f"{QUEUE_ROLE_PREFIX}{queue.name}" for queue in self.cluster.queues if queue.allowed_groups]

    @property
    def compute_roles(self) -> list[str]:
        """The roles compute nodes run as: cluster-node on open queues, then each restricted queue's own."""
        return ["cluster-node", *self.queue_roles]

    @property
    def builtin_roles_in_use(self) -> list[str]:
        used = {ref for d in self.data.datasets for ref in (*d.readers, *d.writers)}
        return [role for role in BUILTIN_ROLES if role in used]

    @property
    def stack_names(self) -> dict[str, str]:
        return {
            "data": f"{self.name}-data",
            "network": f"{self.name}-network",
            "identity": f"{self.name}-identity",
            "artifacts": f"{self.name}-artifacts",
            "notebook": f"{self.name}-notebook",
            "cluster": f"{self.name}-cluster",
            "observability": f"{self.name}-observability",
        }


def database_availability_zones(spec: DeploymentSpec) -> tuple[str, str]:
    """The two AZs of the database subnets the network stack creates (network.mode create)."""
    first = spec.network.availability_zone
    assert spec.cluster is not None
    second = spec.cluster.accounting.database.second_availability_zone
    if second is None:
        second = f"{spec.region}{'b' if first == f'{spec.region}a' else 'a'}"
    return first, second
