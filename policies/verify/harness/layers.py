"""A request as an AND over independent layers, each one a separate engine simulation.

Each layer runs with its own policy real and every other policy neutral (allow-all), so a layer's
decision is that policy's alone: weakening ONE layer is visible even where other layers still deny.
The request is allowed only when every layer allows.

Layers of an S3 request through an access point of the dataset bucket:
  identity         the caller's identity policies, on the access point ARN
  endpoint         the gateway endpoint policy, on the access point ARN
  endpoint-bucket  the gateway endpoint policy, on the bucket ARN (S3 checks both at the endpoint)
  access-point     the access point policy
  bucket           the bucket policy, on the bucket ARN (engine-blind keys decided by the harness)
  kms-identity     the caller's identity policies, on the kms call S3 makes for it
  key              the key policy, on that kms call
  scp / rcp        the organization's control policies, when the spec gives any
A call to another service (ApiRequest) has the interface endpoint's policy as its layer
(interface-endpoint), the caller's identity policies when it is one of our roles, and the SCPs for
principals of the organization.
Layers whose policy is not ours (another account's identity, access point or bucket) are not
evaluated: they are assumed to allow, the worst case.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from policies.verify.harness.conditions import (
    NEVER_MATCHING_RESOURCE,
    ContextValue,
    Decided,
    blind_keys_for,
    decide_policy,
    expected_ignored_keys,
    may_name_resource,
    named_statements,
    names_action,
)
from policies.verify.harness.engine import (
    ALLOWED,
    EXPLICITLY_DENIED,
    IMPLICITLY_DENIED,
    Decision,
    EngineResult,
    PolicyAnalysis,
    simulation_key,
)
from policies.verify.harness.model import ApiRequest, KmsRequest, PolicyDocument, PolicySet, Request, S3Request

NEUTRAL_IDENTITY: PolicyDocument = {
    "Version": "2012-10-17",
    "Statement": [{"Sid": "NeutralIdentity", "Effect": "Allow", "Action": "*", "Resource": "*"}],
}
NEUTRAL_RESOURCE: PolicyDocument = {
    "Version": "2012-10-17",
    "Statement": [{"Sid": "NeutralResource", "Effect": "Allow", "Principal": "*", "Action": "*", "Resource": "*"}],
}
# AWS attaches FullAWSAccess to every level of an organization; the spec's SCPs come in addition.
FULL_AWS_ACCESS: PolicyDocument = {
    "Version": "2012-10-17",
    "Statement": [{"Sid": "FullAWSAccess", "Effect": "Allow", "Action": "*", "Resource": "*"}],
}


def default_key_policy(account: str) -> PolicyDocument:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DefaultKeyPolicy",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{account}:root"},
                "Action": "kms:*",
                "Resource": "*",
            }
        ],
    }


# Leave out statements that cannot apply to a layer's request (switched off only by the test that
# proves it changes nothing).
PRUNE_STATEMENTS = True

IDENTITY = "identity"
ENDPOINT = "endpoint"
ENDPOINT_BUCKET = "endpoint-bucket"
INTERFACE_ENDPOINT = "interface-endpoint"
ACCESS_POINT = "access-point"
BUCKET = "bucket"
KMS_IDENTITY = "kms-identity"
KEY = "key"
SCP = "scp"
RCP = "rcp"
LAYER_ORDER: tuple[str, ...] = (
    IDENTITY,
    SCP,
    ENDPOINT,
    ENDPOINT_BUCKET,
    INTERFACE_ENDPOINT,
    ACCESS_POINT,
    BUCKET,
    RCP,
    KMS_IDENTITY,
    KEY,
)
# Which analysis of the engine's answer holds the layer's own verdict.
_ANALYSIS_OF: dict[str, str] = {
    IDENTITY: "identity",
    KMS_IDENTITY: "identity",
    ENDPOINT: "endpoint",
    ENDPOINT_BUCKET: "endpoint",
    INTERFACE_ENDPOINT: "endpoint",
    ACCESS_POINT: "resource",
    BUCKET: "resource",
    KEY: "resource",
    SCP: "scp",
    RCP: "rcp",
}
_RESOURCE_TYPES: dict[str, str] = {
    "accesspoint-object": "accesspointobject",
    "accesspoint": "accesspoint",
    "bucket-object": "object",
    "bucket": "bucket",
    "key": "key",
}


class HarnessError(AssertionError):
    """The engine answered something the harness must not accept silently."""


@dataclass(frozen=True)
class Layer:
    name: str
    policy_ids: tuple[str, ...]  # the documents this layer evaluates
    simulation: dict[str, Any]
    decided: tuple[Decided, ...]  # conditions the harness decided (engine-blind keys)
    expected_ignored: frozenset[str]
    expected_resource_type: str | None

    @cached_property
    def key(self) -> str:
        return simulation_key(self.simulation)


@dataclass(frozen=True)
class LayerOutcome:
    layer: str
    policy_ids: tuple[str, ...]
    decision: Decision
    allow_sids: tuple[str, ...]
    deny_sids: tuple[str, ...]
    reasons: tuple[str, ...]  # why the decision holds, statement by statement

    @property
    def denial(self) -> frozenset[str] | None:
        """None when allowed; the explicit Deny statements (empty when implicitly denied) otherwise."""
        if self.decision == ALLOWED:
            return None
        return frozenset(self.deny_sids)


def _resource_kind(resource: str) -> str:
    if resource.startswith("arn:aws:kms:"):
        return "key"
    if ":accesspoint/" in resource:
        return "accesspoint-object" if "/object/" in resource else "accesspoint"
    return "bucket-object" if "/" in resource.removeprefix("arn:aws:s3:::") else "bucket"


def _simulation(
    request: Request,
    action: str,
    resource: str,
    resource_account: str,
    context: Mapping[str, ContextValue],
    *,
    identity: list[tuple[str, PolicyDocument]] | None = None,
    resource_policy: PolicyDocument | None = None,
    endpoint: PolicyDocument | None = None,
    scps: list[PolicyDocument] | None = None,
    rcps: list[PolicyDocument] | None = None,
    organization_id: str | None = None,
) -> dict[str, Any]:
    principal = request.principal
    same_account = principal.account == resource_account
    if principal.is_aws_service:
        identity_policies: list[dict[str, Any]] = []
    elif identity is None:
        identity_policies = [{"name": "neutral", "policy": NEUTRAL_IDENTITY}]
    else:
        identity_policies = [{"name": name, "policy": doc} for name, doc in identity]
    if resource_policy is None and not same_account:
        resource_policy = NEUTRAL_RESOURCE
    elif resource_policy is None and resource.startswith("arn:aws:kms:"):
        # A key always has a policy, and KMS honours identity policies only when it delegates to
        # IAM: the neutral key policy is the default one, which does exactly that.
        resource_policy = default_key_policy(resource_account)
    simulation: dict[str, Any] = {
        "request": {
            "principal": principal.arn,
            "action": action,
            "resource": {"resource": resource, "accountId": resource_account},
            "contextVariables": dict(context),
        },
        "identityPolicies": identity_policies,
        "serviceControlPolicies": [],
        "resourceControlPolicies": [],
    }
    if resource_policy is not None:
        simulation["resourcePolicy"] = resource_policy
    if endpoint is not None:
        simulation["vpcEndpointPolicies"] = [{"name": "s3-gateway", "policy": endpoint}]
    org = organization_id or "o-organization"
    if scps is not None:
        policies = [{"name": "FullAWSAccess", "policy": FULL_AWS_ACCESS}]
        policies += [{"name": f"scp-{i}", "policy": doc} for i, doc in enumerate(scps)]
        simulation["serviceControlPolicies"] = [{"orgIdentifier": org, "policies": policies}]
    if rcps is not None:
        policies = [{"name": f"rcp-{i}", "policy": doc} for i, doc in enumerate(rcps)]
        simulation["resourceControlPolicies"] = [{"orgIdentifier": org, "policies": policies}]
    return simulation


def _layer(
    name: str,
    policy_ids: tuple[str, ...],
    request: Request,
    action: str,
    resource: str,
    resource_account: str,
    context: Mapping[str, ContextValue],
    resource_type: str | Literal[False] | None = False,
    **policies: Any,
) -> Layer:
    """One layer. Each document is first reduced to what can bear on this request: on a bucket
    resource its engine-blind conditions are decided, and statements that cannot apply (another
    action, a resource that cannot match, a decided condition that fails) are left out. This makes a
    mutation of an unrelated statement produce the same simulation, which the engine's cache then
    answers; tests/policies/verify/harness/test_layers.py checks that it changes no decision."""
    blind = blind_keys_for(resource)
    decided: list[Decided] = []

    def reduce(document: PolicyDocument) -> PolicyDocument:
        document = named_statements(document)
        if PRUNE_STATEMENTS:
            kept = [s for s in document["Statement"] if names_action(s, action) and may_name_resource(s, resource)]
            document = {**document, "Statement": kept}
        if blind:
            document, found = decide_policy(document, context, blind, action)
            decided.extend(found)
            if PRUNE_STATEMENTS:
                kept = [s for s in document["Statement"] if s.get("Resource") != NEVER_MATCHING_RESOURCE]
                document = {**document, "Statement": kept}
        return document

    for kind in ("resource_policy", "endpoint"):
        if policies.get(kind) is not None:
            policies[kind] = reduce(policies[kind])
    for kind in ("scps", "rcps"):
        if policies.get(kind) is not None:
            policies[kind] = [reduce(doc) for doc in policies[kind]]
    if policies.get("identity") is not None:
        policies["identity"] = [(n, reduce(doc)) for n, doc in policies["identity"]]
    return Layer(
        name=name,
        policy_ids=policy_ids,
        simulation=_simulation(request, action, resource, resource_account, context, **policies),
        decided=tuple(decided),
        expected_ignored=expected_ignored_keys(resource, context),
        # False: derived from the ARN (S3 and KMS); otherwise the request's own (None for no resource type).
        expected_resource_type=_RESOURCE_TYPES[_resource_kind(resource)] if resource_type is False else resource_type,
    )


def s3_context(request: S3Request, resource_account: str, policies: PolicySet) -> dict[str, ContextValue]:
    context: dict[str, ContextValue] = dict(request.principal.context())
    context["aws:SecureTransport"] = "true" if request.network.tls else "false"
    context["aws:ResourceAccount"] = resource_account
    resource_org = policies.resource_org_id(resource_account)
    if resource_org is not None:
        context["aws:ResourceOrgID"] = resource_org
    if request.network.through_endpoint:
        context["aws:SourceVpce"] = policies.s3_gateway_endpoint_id
    elif request.network.other_endpoint is not None:
        context["aws:SourceVpce"] = request.network.other_endpoint
    context.update(dict(request.headers))
    if request.access_point is not None:
        context["s3:DataAccessPointAccount"] = request.access_point.account
        context["s3:DataAccessPointArn"] = request.access_point.arn
        context["s3:AccessPointNetworkOrigin"] = request.network.origin
    if request.list_prefix is not None:
        context["s3:prefix"] = request.list_prefix
    return context


def kms_context(request: KmsRequest, policies: PolicySet) -> dict[str, ContextValue]:
    context: dict[str, ContextValue] = dict(request.principal.context())
    context["aws:SecureTransport"] = "true"
    context["aws:ResourceAccount"] = request.key_account
    resource_org = policies.resource_org_id(request.key_account)
    if resource_org is not None:
        context["aws:ResourceOrgID"] = resource_org
    if request.principal.account is not None:
        context["kms:CallerAccount"] = request.principal.account
    if request.via_service is not None:
        context["kms:ViaService"] = request.via_service
    if request.key_aliases:
        context["kms:ResourceAliases"] = list(request.key_aliases)
    if request.s3_arn_context is not None:
        context["kms:EncryptionContext:aws:s3:arn"] = request.s3_arn_context
    return context


def api_context(request: ApiRequest, policies: PolicySet) -> dict[str, ContextValue]:
    context: dict[str, ContextValue] = dict(request.principal.context())
    context["aws:SecureTransport"] = "true"
    if request.resource_account is not None:
        context["aws:ResourceAccount"] = request.resource_account
        resource_org = policies.resource_org_id(request.resource_account)
        if resource_org is not None:
            context["aws:ResourceOrgID"] = resource_org
    if request.endpoint is not None:
        context["aws:SourceVpce"] = policies.interface_endpoint_id(request.endpoint)
        if policies.vpc_id is not None:
            context["aws:SourceVpc"] = policies.vpc_id
    context.update(dict(request.context))
    return context


def api_layers(request: ApiRequest, policies: PolicySet) -> list[Layer]:
    """The caller's identity policies when it is one of our roles, the interface endpoint the call passes, and the
    SCPs of its principal's organization. Another caller's identity policies and the resource's policy are not
    ours here: assumed to allow (the worst case)."""
    context = api_context(request, policies)
    account = request.resource_account or ""
    layers: list[Layer] = []
    identity = _identity(policies, request)
    if identity is not None:
        role_ids = tuple(f"identity:{request.principal.role}/{n}" for n, _ in identity)
        layers.append(
            _layer(
                IDENTITY,
                role_ids,
                request,
                request.action,
                request.resource,
                account,
                context,
                request.resource_type,
                identity=identity,
            )
        )
    if request.endpoint is not None:
        policy_id = f"endpoint:{request.endpoint}"
        endpoint = policies.documents.get(policy_id)
        if endpoint is not None:
            layers.append(
                _layer(
                    INTERFACE_ENDPOINT,
                    (policy_id,),
                    request,
                    request.action,
                    request.resource,
                    account,
                    context,
                    request.resource_type,
                    endpoint=endpoint,
                )
            )
    scp = _scp_layer(request, policies, request.resource, account, context, request.resource_type)
    return [*layers, *([scp] if scp else [])]


def _identity(policies: PolicySet, request: Request) -> list[tuple[str, PolicyDocument]] | None:
    role = request.principal.role
    if role is None:
        return None
    documents = policies.identity_documents(role)
    if not documents:
        raise HarnessError(f"role {role}: no identity policies in the policy set")
    return list(documents.items())


def s3_layers(request: S3Request, policies: PolicySet) -> list[Layer]:
    org = policies.organization_id
    ap = request.access_point
    resource, account = request.request_resource, request.request_account
    context = s3_context(request, account, policies)
    bucket_context = s3_context(request, request.bucket_account, policies)
    layers: list[Layer] = []
    identity = _identity(policies, request)
    if identity is not None:
        role_ids = tuple(f"identity:{request.principal.role}/{n}" for n, _ in identity)
        layers.append(
            _layer(IDENTITY, role_ids, request, request.action, resource, account, context, identity=identity)
        )
    if request.network.through_endpoint:
        endpoint = policies.documents["endpoint"]
        layers.append(
            _layer(ENDPOINT, ("endpoint",), request, request.action, resource, account, context, endpoint=endpoint)
        )
        if ap is not None:
            layers.append(
                _layer(
                    ENDPOINT_BUCKET,
                    ("endpoint",),
                    request,
                    request.action,
                    request.bucket_resource,
                    request.bucket_account,
                    bucket_context,
                    endpoint=endpoint,
                )
            )
    if ap is not None and ap.owned:
        policy_id = f"access-point:{ap.name}"
        layers.append(
            _layer(
                ACCESS_POINT,
                (policy_id,),
                request,
                request.action,
                resource,
                account,
                context,
                resource_policy=policies.documents[policy_id],
            )
        )
    if request.ours:
        layers.append(
            _layer(
                BUCKET,
                ("bucket",),
                request,
                request.action,
                request.bucket_resource,
                request.bucket_account,
                bucket_context,
                resource_policy=policies.documents["bucket"],
            )
        )
    scp = _scp_layer(request, policies, resource, account, context)
    if scp is not None:
        layers.append(scp)
    rcps = policies.control_policies("rcp")
    if rcps and request.ours and org is not None:
        layers.append(
            _layer(
                RCP,
                _ids(policies, "rcp"),
                request,
                request.action,
                request.bucket_resource,
                request.bucket_account,
                bucket_context,
                rcps=rcps,
                organization_id=org,
            )
        )
    return layers


def _scp_layer(
    request: Request,
    policies: PolicySet,
    resource: str,
    account: str,
    context: Mapping[str, ContextValue],
    resource_type: str | Literal[False] | None = False,
) -> Layer | None:
    """The organization's SCPs, for a principal of the organization (None when there are none to apply)."""
    org = policies.organization_id
    scps = policies.control_policies("scp")
    if not scps or org is None or request.principal.org_id != org:
        return None
    return _layer(
        SCP,
        _ids(policies, "scp"),
        request,
        request.action,
        resource,
        account,
        context,
        resource_type,
        scps=scps,
        organization_id=org,
    )


def _ids(policies: PolicySet, kind: str) -> tuple[str, ...]:
    return tuple(sorted(pid for pid in policies.documents if pid.startswith(f"{kind}:")))


def kms_layers(request: KmsRequest, policies: PolicySet) -> list[Layer]:
    context = kms_context(request, policies)
    layers: list[Layer] = []
    identity = _identity(policies, request)
    if identity is not None:
        role_ids = tuple(f"identity:{request.principal.role}/{n}" for n, _ in identity)
        layers.append(
            _layer(
                KMS_IDENTITY,
                role_ids,
                request,
                request.action,
                request.key_arn,
                request.key_account,
                context,
                identity=identity,
            )
        )
    key_policy = policies.get("key")
    if key_policy is not None and request.ours:
        layers.append(
            _layer(
                KEY,
                ("key",),
                request,
                request.action,
                request.key_arn,
                request.key_account,
                context,
                resource_policy=key_policy,
            )
        )
    org = policies.organization_id
    scp = _scp_layer(request, policies, request.key_arn, request.key_account, context)
    if scp is not None:
        layers.append(scp)
    rcps = policies.control_policies("rcp")
    if rcps and request.ours and org is not None:
        layers.append(
            _layer(
                RCP,
                _ids(policies, "rcp"),
                request,
                request.action,
                request.key_arn,
                request.key_account,
                context,
                rcps=rcps,
                organization_id=org,
            )
        )
    return layers


def kms_call_for(request: S3Request, key_arn: str, key_aliases: tuple[str, ...], via_service: str) -> KmsRequest | None:
    """The call S3 makes to KMS for the caller: Decrypt to read, GenerateDataKey to write (with the key the
    request names, else the bucket's default: the dataset key). SSE-S3 and SSE-C writes call no KMS key."""
    kms_action = {"s3:GetObject": "kms:Decrypt", "s3:PutObject": "kms:GenerateDataKey"}.get(request.action)
    if kms_action is None or not request.ours or request.key is None:
        return None
    if request.header("s3:x-amz-server-side-encryption-customer-algorithm") is not None:
        return None
    if request.header("s3:x-amz-server-side-encryption") not in (None, "aws:kms"):
        return None
    bucket = f"arn:aws:s3:::{request.bucket}"  # the encryption context with Bucket Keys
    named = request.header("s3:x-amz-server-side-encryption-aws-kms-key-id")
    if named is None and request.header("s3:x-amz-server-side-encryption") == "aws:kms":
        # SSE-KMS without a key id: S3 uses the AWS managed key aws/s3 of the bucket's account.
        aws_s3 = f"arn:aws:kms:{key_arn.split(':')[3]}:{request.bucket_account}:key/aws-managed-s3"
        return KmsRequest(
            request.principal, kms_action, aws_s3, ("alias/aws/s3",), via_service, ours=False, s3_arn_context=bucket
        )
    if named is not None and named != key_arn:
        return KmsRequest(request.principal, kms_action, named, (), via_service, ours=False, s3_arn_context=bucket)
    return KmsRequest(request.principal, kms_action, key_arn, key_aliases, via_service, s3_arn_context=bucket)


def layers_for(
    request: Request, policies: PolicySet, key_arn: str, key_aliases: tuple[str, ...], via_service: str
) -> list[Layer]:
    if isinstance(request, KmsRequest):
        return kms_layers(request, policies)
    if isinstance(request, ApiRequest):
        return api_layers(request, policies)
    layers = s3_layers(request, policies)
    kms_call = kms_call_for(request, key_arn, key_aliases, via_service)
    if kms_call is not None:
        layers += [layer for layer in kms_layers(kms_call, policies) if layer.name in (KMS_IDENTITY, KEY)]
    return layers


def outcome(layer: Layer, result: EngineResult) -> LayerOutcome:
    """The layer's verdict, after checking that the engine saw the request the harness meant."""
    ignored = {k.lower() for k in result.ignored_context_keys}
    expected = {k.lower() for k in layer.expected_ignored}
    if ignored != expected:
        raise HarnessError(
            f"layer {layer.name}: the engine ignored context keys {sorted(ignored)}, expected exactly "
            f"{sorted(expected)}; an ignored key silently weakens the test"
        )
    if result.resource_type != layer.expected_resource_type:
        raise HarnessError(
            f"layer {layer.name}: the engine read the resource as {result.resource_type!r}, "
            f"expected {layer.expected_resource_type!r}"
        )
    analysis = result.analyses.get(_ANALYSIS_OF[layer.name])
    if analysis is None:
        raise HarnessError(f"layer {layer.name}: the engine returned no {_ANALYSIS_OF[layer.name]} analysis")
    decision = _layer_decision(result.decision, analysis, _s3_policy_of_callers_account(layer))
    reasons = [d.describe() for d in layer.decided if decision != ALLOWED and d.names_action and not d.holds]
    if decision == EXPLICITLY_DENIED:
        reasons += [
            f"{s.sid}: explicit Deny ({', '.join(s.matched_conditions) or 'unconditional'})" for s in analysis.deny
        ]
    elif decision == IMPLICITLY_DENIED:
        reasons += [f"{s.sid}: does not apply ({s.why_not()})" for s in analysis.near_misses if s.effect == "Allow"]
        if not reasons:
            reasons.append("no Allow statement covers this action on this resource")
    return LayerOutcome(
        layer=layer.name,
        policy_ids=layer.policy_ids,
        decision=decision,
        allow_sids=tuple(s.sid for s in analysis.allow),
        deny_sids=tuple(s.sid for s in analysis.deny),
        reasons=tuple(reasons),
    )


def _s3_policy_of_callers_account(layer: Layer) -> bool:
    """A bucket or access point policy judging a caller of its own account, where it need not allow (IAM: within one
    account an Allow in the identity policy suffices; a KMS key policy is not such a policy)."""
    request = layer.simulation["request"]
    caller_account = str(request["principal"]).split(":")[4] if ":" in str(request["principal"]) else None
    return layer.name in (BUCKET, ACCESS_POINT) and caller_account == request["resource"]["accountId"]


def _layer_decision(overall: Decision, analysis: PolicyAnalysis, own_account: bool = False) -> Decision:
    """The other policies of the simulation are neutral, so the overall result is this layer's own;
    a disagreement would mean a neutral policy interfered, which the harness must not hide. With `own_account`
    (an S3 resource policy and a caller of its account) a policy that does not allow (but does not deny either) lets
    the caller's identity policy (neutral here) decide: the layer allows."""
    own = {"AllowedForAccount": ALLOWED, "NotApplicable": IMPLICITLY_DENIED, "DeniedForAccount": IMPLICITLY_DENIED}
    if own_account:
        own.update({"NotApplicable": ALLOWED, IMPLICITLY_DENIED: ALLOWED})
    layer_result = own.get(analysis.result, analysis.result)
    if layer_result != overall:
        raise HarnessError(f"the layer's own analysis says {analysis.result}, the overall result {overall}")
    return overall
