"""DataPerimeter: our own cdk-nag rule pack, for what AwsSolutions does not check.

Registered next to AwsSolutionsChecks (stacks/assemble.py): a finding fails synth like any cdk-nag
finding and is acknowledged the same way (stacks/nag/acknowledge.py), per construct and with a reason.

  DataPerimeter-AP1   an S3 access point accepts requests from a VPC only
  DataPerimeter-AP2   an S3 access point blocks all public access (all four settings)
  DataPerimeter-RP1   no Allow for a wildcard principal without a condition that scopes the caller,
                      in bucket, access point and key policies (one finding per statement)
  DataPerimeter-VPCE1 every VPC endpoint (gateway or interface) has its own policy, unless its service takes
                      none (policies.interface_endpoints.POLICYLESS), and none of its Allows is open-ended
  DataPerimeter-VPCE2 the S3 gateway endpoint policy lists the access points (and their bucket)
  DataPerimeter-EC1   security-group egress goes only to declared destinations: security groups,
                      the spec's S3 and DynamoDB prefix lists, the VPC's CIDR, the internet only
                      where the spec chose NAT egress (HTTP/HTTPS) (one finding per rule)
  DataPerimeter-SM1   a SageMaker notebook has no direct internet access
  DataPerimeter-SM2   a SageMaker notebook gives its users no root access
  DataPerimeter-SM3   a SageMaker notebook answers IMDSv2 only

Like every cdk-nag rule, these read construct properties: a raw property override (escape hatch)
is not visible to them. The data path's documents are additionally evaluated from the synthesized
templates by the access matrix (policies/verify/matrix/), which does see overrides.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard

import jsii
from aws_cdk import CfnResource, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from cdk_nag import IApplyRule, NagMessageLevel, NagPack, NagRuleCompliance
from constructs import IConstruct

from policies.interface_endpoints import POLICYLESS
from spec import DeploymentSpec

PACK_NAME = "DataPerimeter"
RuleResult = NagRuleCompliance | list[str]

# Condition keys that narrow WHO may use a wildcard-principal Allow (positive operators only).
CALLER_SCOPING_KEYS = frozenset(
    {
        "aws:principalorgid",
        "aws:principalorgpaths",
        "aws:principalaccount",
        "aws:principalarn",
        "aws:sourceaccount",
        "aws:sourcearn",
        "aws:sourceorgid",
        "aws:sourceorgpaths",
        "aws:sourcevpc",
        "aws:sourcevpce",
        "aws:userid",
        "s3:dataaccesspointaccount",
        "s3:dataaccesspointarn",
        "kms:calleraccount",
    }
)
_POSITIVE_OPERATORS = frozenset({"stringequals", "stringequalsignorecase", "stringlike", "arnequals", "arnlike"})
_BLOCK_PUBLIC_ACCESS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
# CDK's egress rule for a group that may send nothing: it matches no real traffic.
_CDK_NO_EGRESS = {"cidrIp": "255.255.255.255/32", "ipProtocol": "icmp", "fromPort": 252, "toPort": 86}


def _statements(document: Any) -> list[dict[str, Any]]:
    if not isinstance(document, dict):
        return []
    statements = document.get("Statement", [])
    return [s for s in (statements if isinstance(statements, list) else [statements]) if isinstance(s, dict)]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _sid(statement: Mapping[str, Any], index: int) -> str:
    return str(statement.get("Sid") or f"Statement{index + 1}")


def is_wildcard_principal(statement: Mapping[str, Any]) -> bool:
    if "NotPrincipal" in statement:
        return True
    principal = statement.get("Principal")
    if principal == "*":
        return True
    return isinstance(principal, dict) and "*" in _as_list(principal.get("AWS", []))


def scopes_the_caller(statement: Mapping[str, Any]) -> bool:
    """Whether a condition limits who the statement admits (a positive match on a caller key, or AWS
    service principals only)."""
    for operator, block in (statement.get("Condition") or {}).items():
        base = str(operator).lower().split(":")[-1]
        if base == "bool" and isinstance(block, dict):
            flag = {k.lower(): v for k, v in block.items()}.get("aws:principalisawsservice")
            if flag is not None and all(str(v).lower() == "true" for v in _as_list(flag)):
                return True
        if base not in _POSITIVE_OPERATORS or not isinstance(block, dict):
            continue
        for key, values in block.items():
            if key.lower() in CALLER_SCOPING_KEYS and all(v != "*" for v in _as_list(values)):
                return True
    return False


def open_wildcard_allows(document: Any) -> list[str]:
    """Sids of Allow statements for a wildcard principal that nothing scopes to a caller."""
    return [
        _sid(statement, index)
        for index, statement in enumerate(_statements(document))
        if statement.get("Effect") == "Allow" and is_wildcard_principal(statement) and not scopes_the_caller(statement)
    ]


def _resolve(node: CfnResource, value: Any) -> Any:
    return Stack.of(node).resolve(value)


# ---- the rules: each takes a CfnResource and returns a compliance or granular findings ------------


def access_point_vpc_origin(node: CfnResource) -> RuleResult:
    if not isinstance(node, s3.CfnAccessPoint):
        return NagRuleCompliance.NOT_APPLICABLE
    vpc = _resolve(node, node.vpc_configuration) or {}
    return NagRuleCompliance.COMPLIANT if vpc.get("vpcId") else NagRuleCompliance.NON_COMPLIANT


def access_point_block_public_access(node: CfnResource) -> RuleResult:
    if not isinstance(node, s3.CfnAccessPoint):
        return NagRuleCompliance.NOT_APPLICABLE
    settings = _resolve(node, node.public_access_block_configuration) or {}
    blocked = all(settings.get(name) is True for name in _BLOCK_PUBLIC_ACCESS)
    return NagRuleCompliance.COMPLIANT if blocked else NagRuleCompliance.NON_COMPLIANT


def _resource_policy(node: CfnResource) -> Any:
    if isinstance(node, s3.CfnBucketPolicy):
        return node.policy_document
    if isinstance(node, s3.CfnAccessPoint):
        return node.policy
    if isinstance(node, kms.CfnKey):
        return node.key_policy
    return None


def no_open_wildcard_principal(node: CfnResource) -> RuleResult:
    if not isinstance(node, s3.CfnBucketPolicy | s3.CfnAccessPoint | kms.CfnKey):
        return NagRuleCompliance.NOT_APPLICABLE
    document = _resolve(node, _resource_policy(node))
    if document is None:
        return NagRuleCompliance.NOT_APPLICABLE if isinstance(node, s3.CfnAccessPoint) else NagRuleCompliance.COMPLIANT
    findings = open_wildcard_allows(document)
    return findings or NagRuleCompliance.COMPLIANT


def _s3_gateway(node: CfnResource) -> TypeGuard[ec2.CfnVPCEndpoint]:
    if not isinstance(node, ec2.CfnVPCEndpoint):
        return False
    service = _resolve(node, node.service_name)
    kind = node.vpc_endpoint_type or "Gateway"
    return isinstance(service, str) and service.endswith(".s3") and kind == "Gateway"


def _open_ended(statement: Mapping[str, Any]) -> bool:
    resources = [str(r) for r in _as_list(statement.get("Resource", "*"))]
    everything = {"*", "arn:aws:s3:::*", "arn:aws:s3:::*/*"}
    return "NotResource" in statement or any(r in everything for r in resources)


def _endpoint_service(node: ec2.CfnVPCEndpoint) -> str:
    """The last part of the service name: 's3', 'logs', 'ecr.api', 'notebook'."""
    service = _resolve(node, node.service_name)
    if not isinstance(service, str):
        return ""
    parts = service.split(".")
    # com.amazonaws.<region>.<service...> and aws.sagemaker.<region>.<service...>
    return ".".join(parts[3:]) if len(parts) > 3 else parts[-1]


def endpoint_policy_is_bounded(node: CfnResource) -> RuleResult:
    if not isinstance(node, ec2.CfnVPCEndpoint):
        return NagRuleCompliance.NOT_APPLICABLE
    document = _resolve(node, node.policy_document)
    if not _statements(document):
        if (node.vpc_endpoint_type or "Gateway") == "Interface" and _endpoint_service(node) in POLICYLESS:
            return NagRuleCompliance.COMPLIANT  # the service takes no endpoint policy
        return NagRuleCompliance.NON_COMPLIANT  # the default policy allows everything
    open_ended = [
        _sid(statement, index)
        for index, statement in enumerate(_statements(document))
        if statement.get("Effect") == "Allow" and _open_ended(statement) and not scopes_the_caller(statement)
    ]
    return open_ended or NagRuleCompliance.COMPLIANT


def endpoint_lists_access_points(spec: DeploymentSpec | None) -> Callable[[CfnResource], RuleResult]:
    def rule(node: CfnResource) -> RuleResult:
        if not _s3_gateway(node):
            return NagRuleCompliance.NOT_APPLICABLE
        document = _resolve(node, node.policy_document)
        listed = {
            str(r) for s in _statements(document) if s.get("Effect") == "Allow" for r in _as_list(s.get("Resource", []))
        }
        if spec is None:
            has_access_point = any(":accesspoint/" in r for r in listed)
            return NagRuleCompliance.COMPLIANT if has_access_point else NagRuleCompliance.NON_COMPLIANT
        wanted = [spec.bucket_arn, f"{spec.bucket_arn}/*"]
        for dataset in spec.data.datasets:
            arn = spec.access_point_arn(dataset)
            wanted += [arn, f"{arn}/object/*"]
        missing = [arn for arn in wanted if arn not in listed]
        return missing or NagRuleCompliance.COMPLIANT

    return rule


def _allowed_networks(spec: DeploymentSpec | None) -> list[ipaddress.IPv4Network]:
    if spec is None:
        return [ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
    network = spec.network
    cidr = network.existing.vpc_cidr if network.mode == "existing" and network.existing else network.cidr
    return [ipaddress.IPv4Network(str(cidr))]


def _allowed_prefix_lists(spec: DeploymentSpec) -> set[str]:
    """The AWS-managed prefix lists of the spec's gateway endpoints (S3, and DynamoDB where pinned)."""
    allowed = {spec.s3_prefix_list_id}
    # No DynamoDB prefix list for the region: then nothing may send to one.
    with contextlib.suppress(ValueError):
        allowed.add(spec.dynamodb_prefix_list_id)
    return allowed


EC2_DEFAULT_EGRESS = "ec2-default-egress:-1:all"


def _egress_findings(rule: Mapping[str, Any], spec: DeploymentSpec | None) -> list[str]:
    if {k: rule.get(k) for k in _CDK_NO_EGRESS} == _CDK_NO_EGRESS:
        return []
    protocol = str(rule.get("ipProtocol", "-1"))
    ports = "all" if protocol == "-1" else f"{rule.get('fromPort')}-{rule.get('toPort')}"
    if rule.get("destinationSecurityGroupId") is not None:
        return []
    prefix_list = rule.get("destinationPrefixListId")
    if prefix_list is not None:
        allowed_lists = _allowed_prefix_lists(spec) if spec is not None else None
        if not isinstance(prefix_list, str) or allowed_lists is None or prefix_list in allowed_lists:
            return []
        return [f"{prefix_list}:{protocol}:{ports}"]
    if rule.get("cidrIpv6") is not None:
        return [f"{rule['cidrIpv6']}:{protocol}:{ports}"]
    cidr = rule.get("cidrIp")
    if isinstance(cidr, dict):
        attribute = cidr.get("Fn::GetAtt")
        if isinstance(attribute, list) and attribute[-1] == "CidrBlock":
            return []  # the VPC's own CIDR, by reference
        return [f"unresolved-cidr:{protocol}:{ports}"]
    network = ipaddress.IPv4Network(str(cidr), strict=False)
    if any(network.subnet_of(allowed) for allowed in _allowed_networks(spec)):
        return []
    internet_by_spec = spec is not None and spec.network.internet_egress == "nat"
    web_ports = protocol == "tcp" and rule.get("fromPort") == rule.get("toPort") and rule.get("fromPort") in (80, 443)
    if internet_by_spec and web_ports:
        return []
    return [f"{cidr}:{protocol}:{ports}"]


def egress_to_declared_destinations(spec: DeploymentSpec | None) -> Callable[[CfnResource], RuleResult]:
    def rule(node: CfnResource) -> RuleResult:
        if isinstance(node, ec2.CfnSecurityGroup):
            rules = _resolve(node, node.security_group_egress) or []
            if not rules:
                # EC2's allow-all default egress stays unless the group itself lists a rule (CDK drops its
                # placeholder once any rule is added, even one it writes as a separate SecurityGroupEgress).
                return [EC2_DEFAULT_EGRESS]
        elif isinstance(node, ec2.CfnSecurityGroupEgress):
            rules = [
                {
                    "ipProtocol": node.ip_protocol,
                    "fromPort": node.from_port,
                    "toPort": node.to_port,
                    "cidrIp": _resolve(node, node.cidr_ip),
                    "cidrIpv6": _resolve(node, node.cidr_ipv6),
                    "destinationPrefixListId": _resolve(node, node.destination_prefix_list_id),
                    "destinationSecurityGroupId": _resolve(node, node.destination_security_group_id),
                }
            ]
        else:
            return NagRuleCompliance.NOT_APPLICABLE
        findings = [finding for egress in rules for finding in _egress_findings(egress, spec)]
        return findings or NagRuleCompliance.COMPLIANT

    return rule


def _notebook_setting(
    node: CfnResource, read: Callable[[sagemaker.CfnNotebookInstance], Any], wanted: str
) -> RuleResult:
    if not isinstance(node, sagemaker.CfnNotebookInstance):
        return NagRuleCompliance.NOT_APPLICABLE
    value = _resolve(node, read(node))
    return NagRuleCompliance.COMPLIANT if value == wanted else NagRuleCompliance.NON_COMPLIANT


def notebook_no_direct_internet(node: CfnResource) -> RuleResult:
    # CloudFormation's default is Enabled: an unset property is non-compliant.
    return _notebook_setting(node, lambda n: n.direct_internet_access, "Disabled")


def notebook_no_root(node: CfnResource) -> RuleResult:
    return _notebook_setting(node, lambda n: n.root_access, "Disabled")


def notebook_imdsv2_only(node: CfnResource) -> RuleResult:
    def version(notebook: sagemaker.CfnNotebookInstance) -> Any:
        config = Stack.of(notebook).resolve(notebook.instance_metadata_service_configuration) or {}
        return config.get("minimumInstanceMetadataServiceVersion")

    return _notebook_setting(node, version, "2")


# ---- the pack -------------------------------------------------------------------------------------


@jsii.implements(IApplyRule)
class _AppliedRule:
    """One rule applied to one resource (cdk-nag's IApplyRule, implemented in Python)."""

    def __init__(
        self, suffix: str, info: str, explanation: str, node: CfnResource, check: Callable[[CfnResource], RuleResult]
    ) -> None:
        self._suffix, self._info, self._explanation, self._node, self._check = suffix, info, explanation, node, check

    @property
    def rule_suffix_override(self) -> str:
        return self._suffix

    @property
    def info(self) -> str:
        return self._info

    @property
    def explanation(self) -> str:
        return self._explanation

    @property
    def level(self) -> NagMessageLevel:
        return NagMessageLevel.ERROR

    @property
    def node(self) -> CfnResource:
        return self._node

    def rule(self, node: CfnResource) -> RuleResult:
        return self._check(node)


RuleSpec = tuple[str, str, str, Callable[[CfnResource], RuleResult]]


def rules_for(spec: DeploymentSpec | None) -> list[RuleSpec]:
    """(rule suffix, info, explanation, check) for every rule of the pack."""
    return [
        (
            "AP1",
            "The S3 access point accepts requests from the internet.",
            "Dataset access points serve the compute VPC only (VpcConfiguration); the origin cannot change later.",
            access_point_vpc_origin,
        ),
        (
            "AP2",
            "The S3 access point does not block all public access.",
            "All four Block Public Access settings keep a policy mistake from making the dataset public.",
            access_point_block_public_access,
        ),
        (
            "RP1",
            "The policy allows a wildcard principal without a condition that scopes the caller.",
            "Principal '*' must be narrowed by the organization, an account, a role ARN or an access point.",
            no_open_wildcard_principal,
        ),
        (
            "VPCE1",
            "The VPC endpoint policy is the default or allows open-ended access.",
            "An endpoint is the VPC's way to a service: it must bound the principals and resources it serves.",
            endpoint_policy_is_bounded,
        ),
        (
            "VPCE2",
            "The S3 gateway endpoint policy does not list the dataset access points and their bucket.",
            "Requests through an access point are authorized against both its ARN and the bucket's at the endpoint.",
            endpoint_lists_access_points(spec),
        ),
        (
            "EC1",
            "The security group sends traffic to a destination the spec does not declare.",
            "Egress goes to security groups, the S3 prefix list and the VPC; the internet only where the spec says.",
            egress_to_declared_destinations(spec),
        ),
        (
            "SM1",
            "The SageMaker notebook has direct internet access.",
            "The notebook reaches AWS through the VPC's endpoints only.",
            notebook_no_direct_internet,
        ),
        (
            "SM2",
            "The SageMaker notebook gives its users root access.",
            "Without root, users cannot change the instance's network or credentials setup.",
            notebook_no_root,
        ),
        (
            "SM3",
            "The SageMaker notebook accepts IMDSv1.",
            "IMDSv2 only: session-bound metadata requests resist SSRF credential theft.",
            notebook_imdsv2_only,
        ),
    ]


class DataPerimeterChecks(NagPack):
    """The data-perimeter rules; `spec` makes EC1 and VPCE2 exact (without it they use safe defaults)."""

    def __init__(self, scope: IConstruct | None = None, spec: DeploymentSpec | None = None) -> None:
        super().__init__(scope)
        self._pack_name = PACK_NAME
        self._rules = rules_for(spec)

    @property
    def name(self) -> str:
        return PACK_NAME

    @property
    def rule_ids(self) -> list[str]:
        return [f"{PACK_NAME}-{suffix}" for suffix, *_ in self._rules]

    def _check_resource(self, node: CfnResource) -> None:
        for suffix, info, explanation, check in self._rules:
            # IApplyRule declares setters that only JS-side structs need; jsii reads these properties.
            self._apply_rule(_AppliedRule(suffix, info, explanation, node, check))  # type: ignore[arg-type]


def findings(pack: NagPack, scope: IConstruct) -> dict[str, list[str]]:
    """Rule id (with granular finding) -> construct paths, from validating `scope` directly."""
    report = pack.validate_scope(scope)
    return {
        v.rule_name: [r.construct_path for r in v.violating_resources if r.construct_path is not None]
        for v in report.violations
    }


def rule_ids(findings_by_rule: Iterable[str]) -> set[str]:
    """'DataPerimeter-EC1[0.0.0.0/0:tcp:22]' -> 'DataPerimeter-EC1'."""
    return {finding.split("[", 1)[0] for finding in findings_by_rule}
