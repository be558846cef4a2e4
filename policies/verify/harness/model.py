"""What the matrix evaluates: who asks (Principal), how (Network), for what (S3Request, KmsRequest),
against which documents (PolicySet)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

PolicyDocument = dict[str, Any]


@dataclass(frozen=True)
class Principal:
    """A caller. `role` names the role whose identity policies (in the PolicySet) apply; None means the
    caller's identity policies are not ours to evaluate and are assumed to allow (the worst case)."""

    label: str
    arn: str
    org_id: str | None
    role: str | None = None
    is_aws_service: bool = False

    @property
    def account(self) -> str | None:
        return None if self.is_aws_service else self.arn.split(":")[4]

    def context(self) -> dict[str, str]:
        if self.is_aws_service:
            return {"aws:PrincipalIsAWSService": "true"}
        context = {
            "aws:PrincipalArn": self.arn,
            "aws:PrincipalAccount": str(self.account),
            "aws:PrincipalIsAWSService": "false",
        }
        if self.org_id is not None:
            context["aws:PrincipalOrgID"] = self.org_id
        return context


@dataclass(frozen=True)
class Network:
    """Where the request comes from: through the compute VPC's S3 gateway endpoint or not, the access
    point network origin S3 reports, and whether it uses TLS."""

    through_endpoint: bool = True
    origin: str = "VPC"
    tls: bool = True
    # The S3 endpoint a request not through ours passed (aws:SourceVpce): a second S3 endpoint in the VPC.
    other_endpoint: str | None = None


@dataclass(frozen=True)
class AccessPointTarget:
    arn: str
    owned: bool  # ours: its policy is in the PolicySet under its name

    @property
    def name(self) -> str:
        return self.arn.rsplit("/", 1)[-1]

    @property
    def account(self) -> str:
        return self.arn.split(":")[4]


@dataclass(frozen=True)
class S3Request:
    """One S3 call. With an access point, the request names the access point ARN and S3 checks the
    bucket policy against the bucket ARN; without, both are the bucket ARN."""

    principal: Principal
    action: str
    bucket: str
    bucket_account: str
    key: str | None = None  # object key; None for bucket-level actions
    list_prefix: str | None = None  # s3:prefix of ListBucket
    access_point: AccessPointTarget | None = None
    network: Network = field(default_factory=Network)
    ours: bool = True  # the dataset bucket: its policy and key are ours to evaluate
    # Request headers S3 exposes as condition keys (s3:x-amz-server-side-encryption, ...), as (key, value).
    headers: tuple[tuple[str, str], ...] = ()

    def header(self, key: str) -> str | None:
        return dict(self.headers).get(key)

    @property
    def bucket_resource(self) -> str:
        base = f"arn:aws:s3:::{self.bucket}"
        return f"{base}/{self.key}" if self.key is not None else base

    @property
    def request_resource(self) -> str:
        if self.access_point is None:
            return self.bucket_resource
        return f"{self.access_point.arn}/object/{self.key}" if self.key is not None else self.access_point.arn

    @property
    def request_account(self) -> str:
        return self.access_point.account if self.access_point else self.bucket_account

    def with_network(self, **changes: Any) -> S3Request:
        return replace(self, network=replace(self.network, **changes))


@dataclass(frozen=True)
class KmsRequest:
    """One KMS call on the dataset key, made by S3 on the caller's behalf (via_service) or directly."""

    principal: Principal
    action: str
    key_arn: str
    key_aliases: tuple[str, ...]
    via_service: str | None
    ours: bool = True  # the dataset key: its policy is ours to evaluate
    # kms:EncryptionContext:aws:s3:arn of a call S3 makes (the bucket, with Bucket Keys); None when direct.
    s3_arn_context: str | None = None

    @property
    def key_account(self) -> str:
        return self.key_arn.split(":")[4]


@dataclass(frozen=True)
class ApiRequest:
    """A call to another service than S3 (logs, ecr, sts, ...), through the compute VPC's interface endpoint
    for `endpoint` (None: not through the VPC). `resource_account` None: a resource AWS owns (an Amazon AMI,
    an AWS-owned SSM document), which belongs to no organization. `resource_type`: what the engine must
    read the resource as."""

    principal: Principal
    action: str
    resource: str  # an ARN, or "*" for an action without resource types
    resource_account: str | None
    endpoint: str | None
    resource_type: str | None
    context: tuple[tuple[str, str], ...] = ()


Request = S3Request | KmsRequest | ApiRequest


@dataclass(frozen=True)
class PolicySet:
    """Every document the matrix evaluates, by id:

    bucket, endpoint, key, access-point:<name>, identity:<role>/<policy name>, scp:<n>, rcp:<n>.
    Mutations replace one document and evaluate the whole matrix again.
    """

    documents: Mapping[str, PolicyDocument]
    role_arns: Mapping[str, str]  # role name -> ARN (the identity documents belong to these roles)
    organization_id: str | None
    organization_accounts: frozenset[str] = frozenset()  # accounts known to be in the organization
    # aws:SourceVpce of requests through the VPC's S3 gateway endpoint, and aws:SourceVpc of the VPC.
    s3_gateway_endpoint_id: str = "vpce-s3gateway0000000"
    vpc_id: str | None = None
    interface_endpoint_ids: Mapping[str, str] = field(default_factory=dict)  # service -> its endpoint id

    def interface_endpoint_id(self, service: str) -> str:
        """The endpoint's id: the spec's where known, else a stand-in of the endpoint id's shape."""
        return self.interface_endpoint_ids.get(service, "vpce-" + service.replace(".", "")[:17].ljust(17, "0"))

    def resource_org_id(self, account: str) -> str | None:
        return self.organization_id if account in self.organization_accounts else None

    def get(self, policy_id: str) -> PolicyDocument | None:
        return self.documents.get(policy_id)

    def identity_documents(self, role: str) -> dict[str, PolicyDocument]:
        prefix = f"identity:{role}/"
        return {pid.removeprefix(prefix): doc for pid, doc in self.documents.items() if pid.startswith(prefix)}

    def control_policies(self, kind: str) -> list[PolicyDocument]:
        return [doc for pid, doc in sorted(self.documents.items()) if pid.startswith(f"{kind}:")]

    def with_document(self, policy_id: str, document: PolicyDocument) -> PolicySet:
        if policy_id not in self.documents:
            raise KeyError(f"no policy {policy_id!r} in the policy set")
        return replace(self, documents={**self.documents, policy_id: document})
