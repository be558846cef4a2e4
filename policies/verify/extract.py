"""The policies a deployment will really attach, read back from the synthesized templates.

The matrix evaluates these documents, not the Python builders, so a stack that attaches something
other than what policies/ builds (an override lost, a CDK default added, a grant() call) is what
gets tested. CloudFormation intrinsics are resolved to the concrete names the spec implies:
pseudo parameters from the stack's environment, Ref/Fn::GetAtt from the resources' own names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policies.principals import PRINCIPALS, builder_name, created_principals
from spec import DeploymentSpec

PolicyDocument = dict[str, Any]
Template = dict[str, Any]


class ExtractionError(ValueError):
    """A template lacks a policy the spec implies, or holds an intrinsic that cannot be resolved."""


@dataclass(frozen=True)
class StackEnvironment:
    stack_name: str
    account: str
    region: str
    partition: str = "aws"
    url_suffix: str = "amazonaws.com"


# Where each resource type keeps the name CloudFormation would otherwise generate.
_NAME_PROPERTIES: dict[str, str] = {
    "AWS::S3::Bucket": "BucketName",
    "AWS::S3::AccessPoint": "Name",
    "AWS::IAM::Role": "RoleName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::IAM::InstanceProfile": "InstanceProfileName",
    "AWS::KMS::Alias": "AliasName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::SageMaker::NotebookInstance": "NotebookInstanceName",
}
_SUB_REFERENCE = re.compile(r"\$\{([^}!][^}]*)\}")


class Resolver:
    """Resolves the intrinsics of one template to strings.

    A resource without a name property gets CloudFormation's naming shape, `<stack>-<LogicalId>`,
    as a stand-in for the physical id that exists only after deployment.
    """

    def __init__(self, template: Template, environment: StackEnvironment) -> None:
        self.resources: dict[str, dict[str, Any]] = template.get("Resources", {})
        self.parameters: dict[str, Any] = template.get("Parameters", {})
        self.env = environment

    def pseudo(self, name: str) -> str | None:
        return {
            "AWS::Partition": self.env.partition,
            "AWS::Region": self.env.region,
            "AWS::AccountId": self.env.account,
            "AWS::URLSuffix": self.env.url_suffix,
            "AWS::StackName": self.env.stack_name,
        }.get(name)

    def physical_name(self, logical_id: str) -> str:
        resource = self._resource(logical_id, "Ref")
        prop = _NAME_PROPERTIES.get(resource["Type"])
        if prop and prop in resource.get("Properties", {}):
            return self.resolve(resource["Properties"][prop], f"{logical_id}.{prop}")
        return f"{self.env.stack_name}-{logical_id}"

    def ref(self, name: str, where: str) -> str:
        pseudo = self.pseudo(name)
        if pseudo is not None:
            return pseudo
        if name in self.parameters:
            default = self.parameters[name].get("Default")
            if default is None:
                raise ExtractionError(f"{where}: Ref {name} is a template parameter without a default")
            return str(default)
        return self.physical_name(name)

    def get_att(self, logical_id: str, attribute: str, where: str) -> str:
        resource = self._resource(logical_id, where)
        kind = resource["Type"]
        name = self.physical_name(logical_id)
        env = self.env
        arns = {
            "AWS::S3::Bucket": f"arn:{env.partition}:s3:::{name}",
            "AWS::S3::AccessPoint": f"arn:{env.partition}:s3:{env.region}:{env.account}:accesspoint/{name}",
            "AWS::IAM::Role": f"arn:{env.partition}:iam::{env.account}:role/{name}",
            "AWS::IAM::InstanceProfile": f"arn:{env.partition}:iam::{env.account}:instance-profile/{name}",
            "AWS::KMS::Key": f"arn:{env.partition}:kms:{env.region}:{env.account}:key/{name}",
            "AWS::Logs::LogGroup": f"arn:{env.partition}:logs:{env.region}:{env.account}:log-group:{name}:*",
            # AMP names workspaces ws-<uuid>; the stand-in keeps the logical id (the ARN pattern admits it).
            "AWS::APS::Workspace": f"arn:{env.partition}:aps:{env.region}:{env.account}:workspace/{name}",
        }
        if attribute == "Arn" and kind in arns:
            return arns[kind]
        if (kind, attribute) in {("AWS::KMS::Key", "KeyId"), ("AWS::IAM::Role", "RoleId")}:
            return name
        if kind == "AWS::EC2::VPC" and attribute == "DefaultSecurityGroup":
            return f"{name}-default-security-group"
        raise ExtractionError(f"{where}: Fn::GetAtt {logical_id}.{attribute} ({kind}) is not resolvable offline")

    def _resource(self, logical_id: str, where: str) -> dict[str, Any]:
        if logical_id not in self.resources:
            raise ExtractionError(
                f"{where}: refers to {logical_id!r}, which is not a resource of {self.env.stack_name}"
            )
        return self.resources[logical_id]

    def resolve(self, value: Any, where: str = "template") -> Any:
        """`value` with every intrinsic replaced by its concrete value."""
        if isinstance(value, list):
            return [self.resolve(item, f"{where}[{i}]") for i, item in enumerate(value)]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (name, argument), *_ = value.items()
            if name == "Ref":
                return self.ref(argument, where)
            if name == "Fn::GetAtt":
                logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
                return self.get_att(logical_id, attribute, where)
            if name == "Fn::Join":
                separator, parts = argument
                return separator.join(str(self.resolve(p, where)) for p in self.resolve(parts, where))
            if name == "Fn::Sub":
                return self._sub(argument, where)
            if name == "Fn::Select":
                index, items = argument
                return self.resolve(items, where)[int(self.resolve(index, where))]
            if name == "Fn::Split":
                separator, text = argument
                return str(self.resolve(text, where)).split(separator)
            if name.startswith("Fn::") or name == "Condition":
                raise ExtractionError(f"{where}: intrinsic {name} is not resolvable offline")
        return {key: self.resolve(item, f"{where}.{key}") for key, item in value.items()}

    def _sub(self, argument: Any, where: str) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument
        values = {k: str(self.resolve(v, where)) for k, v in variables.items()}

        def replace(match: re.Match[str]) -> str:
            reference = match.group(1)
            if reference in values:
                return values[reference]
            if "." in reference and self.pseudo(reference) is None:
                logical_id, attribute = reference.split(".", 1)
                return self.get_att(logical_id, attribute, where)
            return self.ref(reference, where)

        # '${!Literal}' is CloudFormation's escape for a literal '${Literal}'.
        return _SUB_REFERENCE.sub(replace, text).replace("${!", "${")


@dataclass(frozen=True)
class AccessPointFacts:
    name: str
    bucket: str
    vpc_id: str | None
    block_public_access: Mapping[str, bool]
    policy: PolicyDocument


@dataclass(frozen=True)
class RolePolicies:
    name: str
    inline: Mapping[str, PolicyDocument]  # policy name -> document (Policies and AWS::IAM::Policy)
    managed_policy_arns: tuple[str, ...]

    @property
    def documents(self) -> list[PolicyDocument]:
        return list(self.inline.values())


@dataclass(frozen=True)
class ExtractedPolicies:
    """The data-path policies of a deployment, resolved, as its templates attach them."""

    bucket_policy: PolicyDocument
    access_points: Mapping[str, AccessPointFacts]  # access point name -> facts
    endpoint_policy: PolicyDocument
    roles: Mapping[str, RolePolicies]  # role name -> policies
    key_policy: PolicyDocument | None  # None when the spec brings its own key
    key_arn: str
    sources: Mapping[str, str] = field(default_factory=dict)  # what -> "stack/LogicalId"
    # Interface endpoints of the compute VPC: service ("logs", "ecr.api", "notebook") -> policy, None when
    # the endpoint has none (the allow-all default).
    interface_endpoints: Mapping[str, PolicyDocument | None] = field(default_factory=dict)
    # The Prometheus workspace's ARN as resolved offline (policies that name it: head node, Grafana); None when the
    # templates hold none, or from the builders (the ARN exists only once CloudFormation made it).
    metrics_workspace_arn: str | None = None


def stack_environments(cdk_out: Path) -> dict[str, StackEnvironment]:
    """Stack name -> environment, from the cloud assembly's manifest."""
    manifest = json.loads((cdk_out / "manifest.json").read_text())
    environments = {}
    for name, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        match = re.fullmatch(r"aws://(\d{12})/([a-z0-9-]+)", artifact.get("environment", ""))
        if match is None:
            raise ExtractionError(f"{name}: environment {artifact.get('environment')!r} is not account/region-bound")
        environments[name] = StackEnvironment(name, match.group(1), match.group(2))
    return environments


def load_templates(cdk_out: Path, spec: DeploymentSpec) -> dict[str, Template]:
    """Stack key (data, network, identity, ...) -> template, for the stacks the assembly holds."""
    templates = {}
    for key, name in spec.stack_names.items():
        path = cdk_out / f"{name}.template.json"
        if path.exists():
            templates[key] = json.loads(path.read_text())
    return templates


def _only(found: list[tuple[str, dict[str, Any]]], what: str) -> tuple[str, dict[str, Any]]:
    if len(found) != 1:
        raise ExtractionError(f"{what}: expected exactly one, found {len(found)} ({', '.join(k for k, _ in found)})")
    return found[0]


def extract_policies(
    templates: Mapping[str, Template], spec: DeploymentSpec, environments: Mapping[str, StackEnvironment]
) -> ExtractedPolicies:
    """Every data-path policy of `spec`'s deployment from its templates; errors name what is missing."""
    for key in ("data", "network", "identity"):
        if key not in templates:
            raise ExtractionError(f"{spec.stack_names[key]}: stack template missing from the assembly")
    names = spec.stack_names
    data = Resolver(templates["data"], environments[names["data"]])
    network = Resolver(templates["network"], environments[names["network"]])
    sources: dict[str, str] = {}

    bucket_policies = [
        (logical, r)
        for logical, r in data.resources.items()
        if r["Type"] == "AWS::S3::BucketPolicy"
        and data.resolve(r["Properties"]["Bucket"], logical) == spec.data.bucket_name
    ]
    logical, resource = _only(bucket_policies, f"bucket policy of {spec.data.bucket_name}")
    bucket_policy = data.resolve(resource["Properties"]["PolicyDocument"], f"{logical}.PolicyDocument")
    sources["bucket"] = f"{names['data']}/{logical}"

    access_points: dict[str, AccessPointFacts] = {}
    for logical, r in data.resources.items():
        if r["Type"] != "AWS::S3::AccessPoint":
            continue
        props = data.resolve(r["Properties"], logical)
        name = props["Name"]
        access_points[name] = AccessPointFacts(
            name=name,
            bucket=props["Bucket"],
            vpc_id=props.get("VpcConfiguration", {}).get("VpcId"),
            block_public_access=props.get("PublicAccessBlockConfiguration", {}),
            policy=props.get("Policy", {}),
        )
        sources[f"access-point:{name}"] = f"{names['data']}/{logical}"
    for dataset in spec.data.datasets:
        if dataset.access_point not in access_points:
            raise ExtractionError(f"access point {dataset.access_point}: not in {names['data']}")

    s3_service = f"com.amazonaws.{spec.region}.s3"
    gateways = [
        (logical, r)
        for logical, r in network.resources.items()
        if r["Type"] == "AWS::EC2::VPCEndpoint"
        and network.resolve(r["Properties"].get("ServiceName"), logical) == s3_service
        and r["Properties"].get("VpcEndpointType", "Gateway") == "Gateway"
    ]
    logical, resource = _only(gateways, f"S3 gateway endpoint ({s3_service})")
    if "PolicyDocument" not in resource["Properties"]:
        raise ExtractionError(f"{logical}: the S3 gateway endpoint has the default (allow-all) policy")
    endpoint_policy = network.resolve(resource["Properties"]["PolicyDocument"], f"{logical}.PolicyDocument")
    sources["endpoint"] = f"{names['network']}/{logical}"

    interface_endpoints = _interface_endpoint_policies(network, spec.region, names["network"], sources)

    compute_stacks = [
        (names[key], Resolver(template, environments[names[key]]))
        for key, template in templates.items()
        if environments[names[key]].account == spec.accounts.compute
    ]
    roles: dict[str, RolePolicies] = {}
    for key in dict.fromkeys(entry.stack for entry in PRINCIPALS):  # the stacks that create our principals
        if key in templates:
            creating = Resolver(templates[key], environments[names[key]])
            roles.update(_role_policies(creating, names[key], sources, compute_stacks))

    metrics_workspace_arn: str | None = None
    if "observability" in templates:
        observability = Resolver(templates["observability"], environments[names["observability"]])
        workspaces = [(k, r) for k, r in observability.resources.items() if r["Type"] == "AWS::APS::Workspace"]
        logical, _ = _only(workspaces, "Prometheus workspace")
        metrics_workspace_arn = observability.get_att(logical, "Arn", logical)
        sources["metrics-workspace"] = f"{names['observability']}/{logical}"

    key_policy: PolicyDocument | None = None
    key_arn = spec.data.encryption.kms_key_arn or ""
    if spec.kms_key_is_managed:
        aliases = [
            (logical, r)
            for logical, r in data.resources.items()
            if r["Type"] == "AWS::KMS::Alias"
            and data.resolve(r["Properties"]["AliasName"], logical) == spec.kms_key_alias
        ]
        logical, alias = _only(aliases, f"KMS alias {spec.kms_key_alias}")
        target = alias["Properties"]["TargetKeyId"]
        key_logical = _referenced_resource(target)
        if key_logical is None or key_logical not in data.resources:
            raise ExtractionError(f"{logical}: TargetKeyId does not refer to a key of {names['data']}")
        key_policy = data.resolve(data.resources[key_logical]["Properties"]["KeyPolicy"], f"{key_logical}.KeyPolicy")
        key_arn = data.get_att(key_logical, "Arn", key_logical)
        sources["key"] = f"{names['data']}/{key_logical}"

    return ExtractedPolicies(
        bucket_policy=bucket_policy,
        access_points=access_points,
        endpoint_policy=endpoint_policy,
        roles=roles,
        key_policy=key_policy,
        key_arn=key_arn,
        sources=sources,
        interface_endpoints=interface_endpoints,
        metrics_workspace_arn=metrics_workspace_arn,
    )


def interface_endpoint_service(service_name: str, region: str) -> str:
    """'com.amazonaws.us-east-1.ecr.api' -> 'ecr.api'; 'aws.sagemaker.us-east-1.notebook' -> 'notebook'."""
    for prefix in (f"com.amazonaws.{region}.", f"aws.sagemaker.{region}."):
        if service_name.startswith(prefix):
            return service_name.removeprefix(prefix)
    raise ExtractionError(f"interface endpoint service {service_name!r}: not a service of region {region}")


def _interface_endpoint_policies(
    network: Resolver, region: str, stack_name: str, sources: dict[str, str]
) -> dict[str, PolicyDocument | None]:
    found: dict[str, PolicyDocument | None] = {}
    for logical, r in network.resources.items():
        props = r.get("Properties", {})
        if r["Type"] != "AWS::EC2::VPCEndpoint" or props.get("VpcEndpointType") != "Interface":
            continue
        service = interface_endpoint_service(network.resolve(props["ServiceName"], logical), region)
        if service in found:
            raise ExtractionError(f"{logical}: a second interface endpoint for {service}")
        policy = props.get("PolicyDocument")
        found[service] = None if policy is None else network.resolve(policy, f"{logical}.PolicyDocument")
        sources[f"endpoint:{service}"] = f"{stack_name}/{logical}"
    return found


def extract_endpoint_policies(cdk_out: Path, spec: DeploymentSpec) -> dict[str, PolicyDocument | None]:
    """Every VPC endpoint policy of the network stack, by service: "s3" and "dynamodb" (the gateways) and each
    interface endpoint ("logs", "ecr.api", ...; None where the endpoint has no policy). For oracles that
    evaluate a call as identity policy AND the endpoint policy it passes through."""
    templates = load_templates(cdk_out, spec)
    environments = stack_environments(cdk_out)
    name = spec.stack_names["network"]
    if "network" not in templates:
        raise ExtractionError(f"{name}: stack template missing from the assembly")
    network = Resolver(templates["network"], environments[name])
    policies: dict[str, PolicyDocument | None] = {}
    for logical, r in network.resources.items():
        props = r.get("Properties", {})
        if r["Type"] == "AWS::EC2::VPCEndpoint" and props.get("VpcEndpointType", "Gateway") == "Gateway":
            service = interface_endpoint_service(network.resolve(props["ServiceName"], logical), spec.region)
            policy = props.get("PolicyDocument")
            policies[service] = None if policy is None else network.resolve(policy, f"{logical}.PolicyDocument")
    policies.update(_interface_endpoint_policies(network, spec.region, name, {}))
    return policies


def _referenced_resource(value: Any) -> str | None:
    """The logical id behind a Ref or Fn::GetAtt, if `value` is one."""
    if not isinstance(value, dict) or len(value) != 1:
        return None
    if "Ref" in value:
        return str(value["Ref"])
    if "Fn::GetAtt" in value:
        argument = value["Fn::GetAtt"]
        return str(argument[0] if isinstance(argument, list) else argument.split(".", 1)[0])
    return None


def _role_policies(
    resolver: Resolver, stack_name: str, sources: dict[str, str], attaching: list[tuple[str, Resolver]]
) -> dict[str, RolePolicies]:
    """One stack's roles with every policy attached to them: their inline policies, and
    AWS::IAM::Policy resources of any compute-account stack that name them (by Ref or by name)."""
    inline: dict[str, dict[str, PolicyDocument]] = {}
    managed: dict[str, tuple[str, ...]] = {}
    for logical, r in resolver.resources.items():
        if r["Type"] != "AWS::IAM::Role":
            continue
        name = resolver.physical_name(logical)
        props = resolver.resolve(r.get("Properties", {}), logical)
        inline[name] = {p["PolicyName"]: p["PolicyDocument"] for p in props.get("Policies", [])}
        managed[name] = tuple(props.get("ManagedPolicyArns", []))
        sources[f"role:{name}"] = f"{stack_name}/{logical}"
    for other_stack, other in attaching:
        for logical, r in other.resources.items():
            if r["Type"] != "AWS::IAM::Policy":
                continue
            props = other.resolve(r["Properties"], logical)
            for role in props.get("Roles", []):
                if role in inline:
                    inline[role][props["PolicyName"]] = props["PolicyDocument"]
                    sources[f"role:{role}/{props['PolicyName']}"] = f"{other_stack}/{logical}"
    return {name: RolePolicies(name, inline[name], managed[name]) for name in inline}


def extract_from_assembly(cdk_out: Path, spec: DeploymentSpec) -> ExtractedPolicies:
    return extract_policies(load_templates(cdk_out, spec), spec, stack_environments(cdk_out))


def from_builders(spec: DeploymentSpec, key_arn: str | None = None) -> ExtractedPolicies:
    """The same documents straight from the builders in policies/, for spec variants the tests do not
    synthesize (the default spec's templates are checked against these by `drift_from_builders`).
    `key_arn`: the managed key's ARN as the templates render it (a stand-in otherwise)."""
    from policies import access_point_policy, bucket_policy, gateway_endpoint_policy, key_policy
    from policies.interface_endpoints import interface_endpoint_policy, wanted_interface_endpoints

    access_points = {
        d.access_point: AccessPointFacts(
            name=d.access_point,
            bucket=spec.data.bucket_name,
            vpc_id=spec.network.vpc_id,
            block_public_access={
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            policy=access_point_policy(spec, d),
        )
        for d in spec.data.datasets
    }
    inline = {entry.role_name(spec): entry.exact_documents(spec) for entry in created_principals(spec)}
    roles = {name: RolePolicies(name, documents, ()) for name, documents in inline.items() if documents}
    managed = spec.kms_key_is_managed
    key_arn = (
        spec.data.encryption.kms_key_arn
        or key_arn
        or (f"arn:aws:kms:{spec.region}:{spec.accounts.data}:key/{spec.stack_names['data']}-DatasetKey")
    )
    return ExtractedPolicies(
        bucket_policy=bucket_policy(spec, key_arn),
        access_points=access_points,
        endpoint_policy=gateway_endpoint_policy(spec),
        roles=roles,
        key_policy=key_policy(spec) if managed else None,
        key_arn=key_arn,
        sources={"builders": "policies/"},
        interface_endpoints={name: interface_endpoint_policy(spec, name) for name in wanted_interface_endpoints(spec)},
    )


def drift_from_builders(extracted: ExtractedPolicies, spec: DeploymentSpec) -> list[str]:
    """Where the templates attach something other than the builders produce (empty: no drift)."""
    built = from_builders(spec, extracted.key_arn)
    drift = []
    if extracted.bucket_policy != built.bucket_policy:
        drift.append(f"bucket policy ({extracted.sources.get('bucket')}) differs from policies.bucket_policy")
    if extracted.endpoint_policy != built.endpoint_policy:
        drift.append(
            f"endpoint policy ({extracted.sources.get('endpoint')}) differs from policies.gateway_endpoint_policy"
        )
    if built.key_policy is not None and extracted.key_policy != built.key_policy:
        drift.append(f"key policy ({extracted.sources.get('key')}) differs from policies.key_policy")
    for name, facts in built.access_points.items():
        found = extracted.access_points.get(name)
        if found is None or found.policy != facts.policy:
            drift.append(f"access point {name}: policy differs from policies.access_point_policy")
    if dict(extracted.interface_endpoints) != dict(built.interface_endpoints):
        differing = sorted(
            name
            for name in set(extracted.interface_endpoints) | set(built.interface_endpoints)
            if extracted.interface_endpoints.get(name, "missing") != built.interface_endpoints.get(name, "missing")
        )
        drift.append(f"interface endpoints {', '.join(differing)}: differ from policies.interface_endpoint_policy")
    for entry in created_principals(spec):
        role = entry.role_name(spec)
        found_role = extracted.roles.get(role)
        for name, document in entry.exact_documents(spec).items():
            if found_role is None or found_role.inline.get(name) != document:
                builder = builder_name(entry.exact_policies[name])
                drift.append(f"role {role}: inline policy {name!r} differs from {builder}")
    return drift
