"""The access matrix: every (principal, action, resource, context) the design promises to allow or
to deny, generated from the spec, each with the layers expected to deny it.

Grant cases come from the datasets (every reader and writer: what they may do, and the nearest
things they may not). Perimeter cases are fixed threats: other accounts, other organizations,
no TLS, Internet origin, exfiltration through the endpoint, keys used outside S3. A case holds
when the overall decision AND the set of denying layers (with their explicit Deny statements)
are exactly as expected, so weakening one layer shows even where another still denies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from policies.documents import READ_OBJECT_ACTIONS, WRITE_OBJECT_ACTIONS
from policies.endpoint import wheelhouse_location
from policies.guardrails import GUARDRAIL_POLICY_ID, guardrail_scps
from policies.verify.extract import ExtractedPolicies
from policies.verify.harness.engine import ALLOWED, EXPLICITLY_DENIED, IMPLICITLY_DENIED, Decision, Engine
from policies.verify.harness.layers import (
    ACCESS_POINT,
    BUCKET,
    ENDPOINT,
    ENDPOINT_BUCKET,
    IDENTITY,
    INTERFACE_ENDPOINT,
    KEY,
    KMS_IDENTITY,
    LAYER_ORDER,
    SCP,
    Layer,
    LayerOutcome,
    layers_for,
    outcome,
)
from policies.verify.harness.model import (
    AccessPointTarget,
    ApiRequest,
    KmsRequest,
    Network,
    PolicyDocument,
    PolicySet,
    Principal,
    Request,
    S3Request,
)
from spec import BUILTIN_ROLES, DatasetSpec, DeploymentSpec, SpecError, SpecProblem

OUTSIDE_ACCOUNT = "333333333333"  # an account outside the organization
OTHER_ORG_ACCOUNT = "444444444444"
OTHER_ORG_ID = "o-zz9yx8wv7u6t"

Denials = Mapping[str, frozenset[str]]  # layer -> its explicit Deny statements (empty: implicit deny)


def merge(*parts: Denials) -> dict[str, frozenset[str]]:
    """Denials of several reasons together: per layer, an explicit Deny outweighs an implicit one."""
    merged: dict[str, frozenset[str]] = {}
    for part in parts:
        for layer, sids in part.items():
            merged[layer] = merged.get(layer, frozenset()) | sids
    return merged


def implicit(*layers: str) -> dict[str, frozenset[str]]:
    return {layer: frozenset() for layer in layers}


def explicit(layer: str, *sids: str) -> dict[str, frozenset[str]]:
    return {layer: frozenset(sids)}


@dataclass(frozen=True)
class Case:
    case_id: str
    group: str  # "grant": generated from the datasets; "perimeter": fixed threats; "platform": endpoint needs
    title: str
    request: Request
    denials: Denials  # empty: expected to be allowed
    variant: Callable[[PolicySet], PolicySet] | None = field(default=None, compare=False)
    why: str = ""  # the invariant the case holds the design to

    @property
    def expect_allowed(self) -> bool:
        return not self.denials


@dataclass(frozen=True)
class MatrixContext:
    """What every case needs beyond the request: the dataset key S3 uses on the caller's behalf."""

    key_arn: str
    key_aliases: tuple[str, ...]
    via_service: str


@dataclass(frozen=True)
class CaseResult:
    case: Case
    layers: tuple[LayerOutcome, ...]

    @property
    def decision(self) -> Decision:
        decisions = {layer.decision for layer in self.layers}
        if EXPLICITLY_DENIED in decisions:
            return EXPLICITLY_DENIED
        return IMPLICITLY_DENIED if IMPLICITLY_DENIED in decisions else ALLOWED

    @property
    def denials(self) -> dict[str, frozenset[str]]:
        return {layer.layer: denial for layer in self.layers if (denial := layer.denial) is not None}

    def mismatches(self) -> list[str]:
        expected, actual = dict(self.case.denials), self.denials
        problems = []
        if (self.decision == ALLOWED) != self.case.expect_allowed:
            problems.append(f"decision {self.decision}, expected {'Allowed' if self.case.expect_allowed else 'denied'}")
        evaluated = {layer.layer for layer in self.layers}
        for layer in LAYER_ORDER:
            if layer in evaluated and expected.get(layer) != actual.get(layer):
                problems.append(f"{layer}: {_show(actual.get(layer))}, expected {_show(expected.get(layer))}")
        for layer in sorted(set(expected) - evaluated):
            problems.append(f"{layer}: expected to deny but not evaluated")
        return problems

    @property
    def as_expected(self) -> bool:
        return not self.mismatches()


def _show(denial: frozenset[str] | None) -> str:
    if denial is None:
        return "allows"
    return f"denies explicitly ({', '.join(sorted(denial))})" if denial else "denies implicitly"


# ---- the policy set, from the templates ------------------------------------------------------


def load_control_policies(spec: DeploymentSpec, base: Path | None = None) -> dict[str, PolicyDocument]:
    """scp:<n> / rcp:<n> -> document, from the spec's perimeter (files are read relative to `base`)."""
    documents: dict[str, PolicyDocument] = {}
    for kind, sources in (("scp", spec.perimeter.scps), ("rcp", spec.perimeter.rcps)):
        for index, source in enumerate(sources):
            if isinstance(source, dict):
                documents[f"{kind}:{index}"] = source
                continue
            path = (base or Path.cwd()) / source
            try:
                documents[f"{kind}:{index}"] = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as error:
                problem = SpecProblem(f"perimeter.{kind}s[{index}]", f"cannot be read as JSON: {error}", source)
                raise SpecError([problem]) from None
    return documents


def policy_set(extracted: ExtractedPolicies, spec: DeploymentSpec, base: Path | None = None) -> PolicySet:
    documents: dict[str, PolicyDocument] = {
        "bucket": extracted.bucket_policy,
        "endpoint": extracted.endpoint_policy,
    }
    for name, facts in extracted.access_points.items():
        documents[f"access-point:{name}"] = facts.policy
    role_arns: dict[str, str] = {}
    for role, policies in extracted.roles.items():
        role_arns[role] = f"arn:aws:iam::{spec.accounts.compute}:role/{role}"
        for policy_name, document in policies.inline.items():
            documents[f"identity:{role}/{policy_name}"] = document
    if extracted.key_policy is not None:
        documents["key"] = extracted.key_policy
    for service, endpoint_policy in extracted.interface_endpoints.items():
        if endpoint_policy is not None:
            documents[f"endpoint:{service}"] = endpoint_policy
    documents.update(load_control_policies(spec, base))
    guardrails = guardrail_scps(spec)
    if guardrails is not None:
        documents[GUARDRAIL_POLICY_ID] = guardrails
    org_accounts = frozenset({spec.accounts.compute, spec.accounts.data}) if spec.organization_id else frozenset()
    endpoint_ids = {}
    if spec.network.sagemaker_api_endpoint_id is not None:
        endpoint_ids["sagemaker.api"] = spec.network.sagemaker_api_endpoint_id
    gateway = (
        {"s3_gateway_endpoint_id": spec.network.s3_gateway_endpoint_id} if spec.network.s3_gateway_endpoint_id else {}
    )
    return PolicySet(
        documents=documents,
        role_arns=role_arns,
        organization_id=spec.organization_id,
        organization_accounts=org_accounts,
        vpc_id=spec.network.vpc_id,
        interface_endpoint_ids=endpoint_ids,
        **gateway,
    )


def matrix_context(spec: DeploymentSpec, extracted: ExtractedPolicies) -> MatrixContext:
    aliases = (spec.kms_key_alias,) if spec.kms_key_is_managed else ()
    return MatrixContext(extracted.key_arn, aliases, spec.s3_service_principal_for_kms)


# ---- the cases ------------------------------------------------------------------------------


def _role(spec: DeploymentSpec, ref: str) -> Principal:
    """A reader/writer; only the built-in roles' identity policies are in the templates (a role given
    by ARN belongs to someone else: its identity policies are assumed to allow)."""
    role = spec.role_name(ref) if ref in BUILTIN_ROLES else None
    return Principal(label=ref, arn=spec.role_arn(ref), org_id=spec.organization_id, role=role)


def _ap(spec: DeploymentSpec, dataset: DatasetSpec) -> AccessPointTarget:
    return AccessPointTarget(spec.access_point_arn(dataset), owned=True)


def _through_ap(
    spec: DeploymentSpec,
    principal: Principal,
    action: str,
    dataset: DatasetSpec,
    key: str | None = None,
    list_prefix: str | None = None,
) -> S3Request:
    return S3Request(
        principal=principal,
        action=action,
        bucket=spec.data.bucket_name,
        bucket_account=spec.accounts.data,
        key=key,
        list_prefix=list_prefix,
        access_point=_ap(spec, dataset),
    )


def _sibling(prefix: str) -> str:
    """A prefix that shares the string but not the folder: 'data/' -> 'data-private/'."""
    return prefix.rstrip("/") + "-private/"


ALL_S3_LAYERS: tuple[str, ...] = (IDENTITY, ENDPOINT, ENDPOINT_BUCKET, ACCESS_POINT, BUCKET)


def dataset_cases(spec: DeploymentSpec) -> list[Case]:
    cases: list[Case] = []
    has_writers = any(d.writers for d in spec.data.datasets)
    for dataset in spec.data.datasets:
        prefix = dataset.prefix
        sample = f"{prefix}shard-00000.bin"
        for ref in dataset.readers:
            who = _role(spec, ref)
            tag = f"{dataset.name}/{ref}"
            cases += [
                Case(
                    f"read/{tag}",
                    "grant",
                    f"{ref} reads {dataset.name} under {prefix} through its access point",
                    _through_ap(spec, who, "s3:GetObject", dataset, key=sample),
                    {},
                    why="readers read their dataset: every layer allows, the key decrypts through S3",
                ),
                Case(
                    f"list/{tag}",
                    "grant",
                    f"{ref} lists {dataset.name} under {prefix}",
                    _through_ap(spec, who, "s3:ListBucket", dataset, list_prefix=prefix),
                    {},
                    why="readers list their dataset's prefix",
                ),
                Case(
                    f"read-sibling-prefix/{tag}",
                    "grant",
                    f"{ref} reads {_sibling(prefix)} through {dataset.name}'s access point",
                    _through_ap(spec, who, "s3:GetObject", dataset, key=f"{_sibling(prefix)}shard-00000.bin"),
                    implicit(IDENTITY, ACCESS_POINT),
                    why="a grant stops at its folder: 'data/' does not cover 'data-private/'",
                ),
                Case(
                    f"list-sibling-prefix/{tag}",
                    "grant",
                    f"{ref} lists {_sibling(prefix)} through {dataset.name}'s access point",
                    _through_ap(spec, who, "s3:ListBucket", dataset, list_prefix=_sibling(prefix)),
                    implicit(IDENTITY, ACCESS_POINT),
                    why="listing is scoped by s3:prefix to the dataset's folder",
                ),
                Case(
                    f"delete/{tag}",
                    "grant",
                    f"{ref} deletes under {prefix}",
                    _through_ap(spec, who, "s3:DeleteObject", dataset, key=sample),
                    implicit(*ALL_S3_LAYERS),
                    why="no layer grants deletes: datasets are immutable from the compute side",
                ),
                Case(
                    f"list-versions/{tag}",
                    "grant",
                    f"{ref} lists object versions under {prefix}",
                    _through_ap(spec, who, "s3:ListBucketVersions", dataset, list_prefix=prefix),
                    implicit(*ALL_S3_LAYERS),
                    why="old versions of replaced objects are not part of the grant",
                ),
            ]
            direct = S3Request(who, "s3:GetObject", spec.data.bucket_name, spec.accounts.data, key=sample)
            cases += [
                Case(
                    f"read-bucket-directly/{tag}",
                    "grant",
                    f"{ref} reads {dataset.name} on the bucket directly, without its access point",
                    direct,
                    implicit(IDENTITY, BUCKET),
                    why="the bucket delegates to its access points only",
                ),
                Case(
                    f"list-bucket-directly/{tag}",
                    "grant",
                    f"{ref} lists {prefix} on the bucket directly, without its access point",
                    replace(direct, action="s3:ListBucket", key=None, list_prefix=prefix),
                    implicit(IDENTITY, BUCKET),
                    why="listing is delegated to the access points too",
                ),
            ]
            if ref not in dataset.writers:
                denials = implicit(IDENTITY, ACCESS_POINT)
                if not spec.datasets_writable_by(ref):
                    denials.update(implicit(KMS_IDENTITY, KEY))
                if not has_writers:
                    denials.update(implicit(ENDPOINT, ENDPOINT_BUCKET, BUCKET))
                cases.append(
                    Case(
                        f"write-through-read-grant/{tag}",
                        "grant",
                        f"{ref} writes under {prefix} with its read grant",
                        _through_ap(spec, who, "s3:PutObject", dataset, key=f"{prefix}upload.bin"),
                        denials,
                        why="a read grant never writes",
                    )
                )
        for ref in dataset.writers:
            assert dataset.output_prefix is not None
            who = _role(spec, ref)
            tag = f"{dataset.name}/{ref}"
            output = dataset.output_prefix
            cases += [
                Case(
                    f"write/{tag}",
                    "grant",
                    f"{ref} writes {dataset.name} under {output}",
                    _through_ap(spec, who, "s3:PutObject", dataset, key=f"{output}shard-00000.bin"),
                    {},
                    why="writers put under their output prefix; the key generates data keys through S3",
                ),
                Case(
                    f"write-beside-output/{tag}",
                    "grant",
                    f"{ref} writes {_sibling(output)}, beside its output prefix",
                    _through_ap(spec, who, "s3:PutObject", dataset, key=f"{_sibling(output)}shard-00000.bin"),
                    implicit(IDENTITY, ACCESS_POINT),
                    why="writes stop at the output folder",
                ),
                Case(
                    f"delete-output/{tag}",
                    "grant",
                    f"{ref} deletes under its output prefix {output}",
                    _through_ap(spec, who, "s3:DeleteObject", dataset, key=f"{output}shard-00000.bin"),
                    implicit(*ALL_S3_LAYERS),
                    why="writers add objects; they do not delete them",
                ),
            ]
        for ref in spec.builtin_roles_in_use:
            if ref in dataset.readers or ref in dataset.writers:
                continue
            cases.append(
                Case(
                    f"read-other-dataset/{dataset.name}/{ref}",
                    "grant",
                    f"{ref}, not a reader of {dataset.name}, reads it through its access point",
                    _through_ap(spec, _role(spec, ref), "s3:GetObject", dataset, key=sample),
                    implicit(IDENTITY, ACCESS_POINT),
                    why="a role reads only the datasets that name it",
                )
            )
    return cases


def key_cases(spec: DeploymentSpec, context: MatrixContext) -> list[Case]:
    """Per role: the dataset key only through S3, only this key."""
    cases: list[Case] = []
    managed = spec.kms_key_is_managed
    other_key = f"arn:aws:kms:{spec.region}:{spec.accounts.data}:key/0a0a0a0a-1b1b-2c2c-3d3d-4e4e4e4e4e4e"
    foreign_key = f"arn:aws:kms:{spec.region}:{OUTSIDE_ACCOUNT}:key/5f5f5f5f-6a6a-7b7b-8c8c-9d9d9d9d9d9d"
    for ref in spec.builtin_roles_in_use:
        who = _role(spec, ref)
        cases += [
            Case(
                f"decrypt-outside-s3/{ref}",
                "perimeter",
                f"{ref} calls kms:Decrypt on the dataset key directly, not through S3, claiming the bucket's "
                "encryption context (any caller can)",
                KmsRequest(
                    who, "kms:Decrypt", context.key_arn, context.key_aliases, None, s3_arn_context=spec.bucket_arn
                ),
                implicit(KMS_IDENTITY, KEY) if managed else implicit(KMS_IDENTITY),
                why="the data key never leaves S3: kms:ViaService on both sides",
            ),
            Case(
                f"foreign-key-same-alias/{ref}",
                "perimeter",
                f"{ref} uses a key of account {OUTSIDE_ACCOUNT} that carries the same alias name, through S3",
                KmsRequest(who, "kms:Decrypt", foreign_key, context.key_aliases, context.via_service, ours=False),
                implicit(KMS_IDENTITY),
                why="the identity policy names the data account's keys, not any key with the alias",
            ),
        ]
        if managed:
            scratch = f"arn:aws:s3:::{spec.name}-scratch-{spec.accounts.compute}"
            cases.append(
                Case(
                    f"key-for-another-bucket/{ref}",
                    "perimeter",
                    f"{ref} has S3 decrypt an object of another bucket ({scratch}) with the dataset key",
                    KmsRequest(
                        who,
                        "kms:Decrypt",
                        context.key_arn,
                        context.key_aliases,
                        context.via_service,
                        s3_arn_context=scratch,
                    ),
                    implicit(KEY),
                    why="the key serves the dataset bucket only (kms:EncryptionContext:aws:s3:arn)",
                )
            )
            cases.append(
                Case(
                    f"other-data-account-key/{ref}",
                    "perimeter",
                    f"{ref} uses another key of the data account through S3",
                    KmsRequest(who, "kms:Decrypt", other_key, ("alias/another-team",), context.via_service, ours=False),
                    implicit(KMS_IDENTITY),
                    why="kms:ResourceAliases pins the identity grant to the dataset key",
                )
            )
    if managed:
        cases += [
            Case(
                "key-admin-manages-key",
                "perimeter",
                "an administrator of the data account updates the key policy",
                KmsRequest(
                    Principal(
                        "data-account key admin",
                        f"arn:aws:iam::{spec.accounts.data}:role/key-admin",
                        spec.organization_id,
                    ),
                    "kms:PutKeyPolicy",
                    context.key_arn,
                    context.key_aliases,
                    None,
                ),
                {},
                why="the key stays manageable: the data account's IAM decides who administers it",
            ),
            Case(
                "compute-admin-decrypts-key",
                "perimeter",
                "a compute-account administrator (kms:* on *) decrypts with the dataset key directly",
                KmsRequest(
                    Principal(
                        "compute admin", f"arn:aws:iam::{spec.accounts.compute}:role/ops-admin", spec.organization_id
                    ),
                    "kms:Decrypt",
                    context.key_arn,
                    context.key_aliases,
                    None,
                ),
                implicit(KEY),
                why="the key policy trusts only the dataset roles, whatever the compute account's IAM says",
            ),
        ]
    return cases


def perimeter_cases(spec: DeploymentSpec) -> list[Case]:
    dataset = next(d for d in spec.data.datasets if d.readers)
    reader_ref = dataset.readers[0]
    reader = _role(spec, reader_ref)
    sample = f"{dataset.prefix}shard-00000.bin"
    bucket, data, compute, region = spec.data.bucket_name, spec.accounts.data, spec.accounts.compute, spec.region
    org = spec.organization_id
    read = _through_ap(spec, reader, "s3:GetObject", dataset, key=sample)
    org_deny = explicit(BUCKET, "DenyPrincipalsOutsideOrganization") if spec.perimeter.organization_bound else {}
    endpoint_org = implicit(ENDPOINT, ENDPOINT_BUCKET) if spec.perimeter.organization_bound else {}
    admin = Principal("compute admin (s3:*, kms:* on *)", f"arn:aws:iam::{compute}:role/ops-admin", org)
    intruder = Principal("other organization's role", f"arn:aws:iam::{OTHER_ORG_ACCOUNT}:role/intruder", OTHER_ORG_ID)
    same_name = Principal(
        f"{reader_ref} name in account {OUTSIDE_ACCOUNT}",
        f"arn:aws:iam::{OUTSIDE_ACCOUNT}:role/{spec.role_name(reader_ref)}",
        None,
        role=spec.role_name(reader_ref),
    )
    shadow_ap = AccessPointTarget(
        f"arn:aws:s3:{region}:{compute}:accesspoint/shadow-{dataset.access_point}", owned=False
    )
    outside_ap = AccessPointTarget(f"arn:aws:s3:{region}:{OUTSIDE_ACCOUNT}:accesspoint/drop", owned=False)
    no_endpoint = Network(through_endpoint=False, origin="Internet")

    def direct(principal: Principal, action: str, key: str | None, **changes: object) -> S3Request:
        return S3Request(principal, action, bucket, data, key=key, **changes)  # type: ignore[arg-type]

    return [
        Case(
            "same-role-name-other-account",
            "perimeter",
            f"a role named {spec.role_name(reader_ref)} in account {OUTSIDE_ACCOUNT}, with the same identity "
            "policy, reads through the access point from the compute VPC",
            S3Request(same_name, "s3:GetObject", bucket, data, key=sample, access_point=_ap(spec, dataset)),
            {**endpoint_org, **implicit(ACCESS_POINT, KEY), **org_deny},
            why="names are not identities: the data account trusts the compute account's roles only",
        ),
        Case(
            "compute-account-access-point",
            "perimeter",
            f"{reader_ref} reads through an access point the compute account created on the bucket",
            S3Request(reader, "s3:GetObject", bucket, data, key=sample, access_point=shadow_ap),
            implicit(IDENTITY, ENDPOINT, BUCKET),
            why="only the data account's access points are delegated to (s3:DataAccessPointAccount)",
        ),
        Case(
            "compute-account-access-point-outside-vpc",
            "perimeter",
            "a compute-account administrator reads through its own access point on the bucket, outside the VPC",
            S3Request(admin, "s3:GetObject", bucket, data, key=sample, access_point=shadow_ap, network=no_endpoint),
            implicit(BUCKET, KEY),
            why="the bucket policy alone stops access points of other accounts",
        ),
        Case(
            "outside-account-access-point",
            "perimeter",
            f"account {OUTSIDE_ACCOUNT} reads through an access point it created on the bucket",
            S3Request(
                Principal("outside admin", f"arn:aws:iam::{OUTSIDE_ACCOUNT}:role/admin", None),
                "s3:GetObject",
                bucket,
                data,
                key=sample,
                access_point=AccessPointTarget(
                    f"arn:aws:s3:{region}:{OUTSIDE_ACCOUNT}:accesspoint/shadow", owned=False
                ),
                network=no_endpoint,
            ),
            {**implicit(KEY), **org_deny} if org_deny else implicit(BUCKET, KEY),
            why="an access point of another account is no way in",
        ),
        Case(
            "no-tls",
            "perimeter",
            f"{reader_ref} reads through the access point without TLS",
            read.with_network(tls=False),
            explicit(BUCKET, "DenyRequestsWithoutTls"),
            why="TLS only, whoever asks",
        ),
        Case(
            "list-whole-access-point",
            "perimeter",
            f"{reader_ref} lists the whole access point (no prefix)",
            _through_ap(spec, reader, "s3:ListBucket", dataset),
            implicit(IDENTITY, ACCESS_POINT),
            why="a listing without s3:prefix is a listing of everything",
        ),
        Case(
            "exfiltration-outside-bucket",
            "perimeter",
            f"{reader_ref} copies data to a bucket of account {OUTSIDE_ACCOUNT} through the endpoint",
            S3Request(reader, "s3:PutObject", "exfil-drop-333333333333", OUTSIDE_ACCOUNT, key="loot.bin", ours=False),
            implicit(IDENTITY, ENDPOINT),
            why="the endpoint names every bucket the VPC may use",
        ),
        Case(
            "exfiltration-by-admin",
            "perimeter",
            "a compute-account administrator (s3:* on *) copies data to an outside bucket through the endpoint",
            S3Request(admin, "s3:PutObject", "exfil-drop-333333333333", OUTSIDE_ACCOUNT, key="loot.bin", ours=False),
            implicit(ENDPOINT),
            why="the endpoint holds even when an identity policy is too broad",
        ),
        Case(
            "exfiltration-outside-access-point",
            "perimeter",
            f"a compute-account administrator writes through an access point of account {OUTSIDE_ACCOUNT}",
            S3Request(
                admin,
                "s3:PutObject",
                "drop-bucket-333333333333",
                OUTSIDE_ACCOUNT,
                key="loot.bin",
                access_point=outside_ap,
                ours=False,
            ),
            implicit(ENDPOINT, ENDPOINT_BUCKET),
            why="access points of other accounts are not listed at the endpoint",
        ),
        Case(
            "ingress-outside-bucket",
            "perimeter",
            "a compute-account administrator reads from an unvetted outside bucket through the endpoint",
            S3Request(admin, "s3:GetObject", "tools-333333333333", OUTSIDE_ACCOUNT, key="payload.sh", ours=False),
            implicit(ENDPOINT),
            why="the nodes read only the AWS-owned buckets they need",
        ),
        Case(
            "outside-organization-credentials",
            "perimeter",
            f"credentials of another organization (account {OTHER_ORG_ACCOUNT}, s3:* on *) read through the "
            "access point from the compute VPC",
            S3Request(intruder, "s3:GetObject", bucket, data, key=sample, access_point=_ap(spec, dataset)),
            {**endpoint_org, **implicit(ACCESS_POINT, KEY), **org_deny},
            why="the organization is the perimeter: endpoint and bucket both check aws:PrincipalOrgID",
        ),
        Case(
            "aws-service-writes-bucket",
            "perimeter",
            "an AWS service principal (S3 server access logging) writes into the dataset bucket",
            S3Request(
                Principal("logging.s3.amazonaws.com", "logging.s3.amazonaws.com", None, is_aws_service=True),
                "s3:PutObject",
                bucket,
                data,
                key="logs/entry.log",
                network=no_endpoint,
            ),
            implicit(BUCKET, KEY),
            why="no statement grants a service; the organization Deny leaves services to the grants",
        ),
        Case(
            "endpoint-lists-only-bucket-arns",
            "perimeter",
            f"regression: with an endpoint policy naming only the bucket ARNs, {reader_ref} reads through the access point",
            read,
            implicit(ENDPOINT),
            variant=endpoint_without_access_points,
            why="the endpoint authorizes the access point ARN too, so both must be listed",
        ),
    ]


def dataset_perimeter_cases(spec: DeploymentSpec) -> list[Case]:
    """Per dataset and per access point statement: callers the statement must not admit."""
    admin = Principal(
        "compute admin (s3:*, kms:* on *)", f"arn:aws:iam::{spec.accounts.compute}:role/ops-admin", spec.organization_id
    )
    cases: list[Case] = []
    for dataset in spec.data.datasets:
        requests: list[tuple[str, str, str, str | None, str | None]] = []  # verb, role, action, key, list prefix
        if dataset.readers:
            requests += [
                ("read", dataset.readers[0], "s3:GetObject", f"{dataset.prefix}shard-00000.bin", None),
                ("list", dataset.readers[0], "s3:ListBucket", None, dataset.prefix),
            ]
        if dataset.writers:
            assert dataset.output_prefix is not None
            requests.append(
                ("write", dataset.writers[0], "s3:PutObject", f"{dataset.output_prefix}shard-00000.bin", None)
            )
        for verb, ref, action, key, list_prefix in requests:
            reaches_key = action != "s3:ListBucket"
            cases += [
                Case(
                    f"unrelated-role-{verb}/{dataset.name}",
                    "perimeter",
                    f"an unrelated compute-account role with s3:* and kms:* on * tries to {verb} {dataset.name}",
                    _through_ap(spec, admin, action, dataset, key=key, list_prefix=list_prefix),
                    implicit(ACCESS_POINT, KEY) if reaches_key else implicit(ACCESS_POINT),
                    why="the access point and the key trust named roles, not the whole compute account",
                ),
                Case(
                    f"internet-origin-{verb}/{dataset.name}",
                    "perimeter",
                    f"{ref}'s credentials {verb} {dataset.name} through its access point from the Internet",
                    _through_ap(spec, _role(spec, ref), action, dataset, key=key, list_prefix=list_prefix).with_network(
                        origin="Internet", through_endpoint=False
                    ),
                    implicit(ACCESS_POINT),
                    why="the access point serves the compute VPC only (its VpcConfiguration, and its policy)",
                ),
            ]
    return cases


def endpoint_without_access_points(policies: PolicySet) -> PolicySet:
    """The endpoint policy with every access point ARN removed (the regression of the notes)."""
    document = json.loads(json.dumps(policies.documents["endpoint"]))
    for statement in document["Statement"]:
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        statement["Resource"] = [r for r in resources if ":accesspoint/" not in r] or ["arn:aws:s3:::none"]
    return policies.with_document("endpoint", document)


def platform_cases(spec: DeploymentSpec) -> list[Case]:
    """What the nodes need through the endpoint besides the datasets, and where that stops."""
    region, compute, org = spec.region, spec.accounts.compute, spec.organization_id
    node = Principal("cluster node (endpoint layer only)", spec.role_arn("cluster-node"), org)
    intruder = Principal("other organization's role", f"arn:aws:iam::{OTHER_ORG_ACCOUNT}:role/intruder", OTHER_ORG_ID)
    cluster_bucket = "parallelcluster-a1b2c3d4e5f6g7h8-v1-do-not-delete"
    squatted = "parallelcluster-squatted-v1-do-not-delete"
    # ParallelCluster's artifact directory of this cluster and of another one in the same bucket.
    cluster_config = f"parallelcluster/3.16.1/clusters/{spec.name}-0123456789abcdef/configs/cluster-config.yaml"
    other_config = "parallelcluster/3.16.1/clusters/other-0123456789abcdef/configs/cluster-config.yaml"
    assets_bucket = f"cdk-hnb659fds-assets-{compute}-{region}"

    def via_endpoint(who: Principal, action: str, bucket: str, account: str, key: str) -> S3Request:
        return S3Request(who, action, bucket, account, key=key, ours=False)

    return [
        Case(
            "node-reads-parallelcluster-bucket",
            "platform",
            "a node fetches ParallelCluster's cookbook from AWS's regional bucket",
            via_endpoint(
                node, "s3:GetObject", f"{region}-aws-parallelcluster", "000000000000", "archives/cookbook.tgz"
            ),
            {},
            why="the nodes boot without internet",
        ),
        Case(
            "node-writes-aws-owned-bucket",
            "platform",
            "a node writes into ParallelCluster's AWS-owned regional bucket",
            via_endpoint(node, "s3:PutObject", f"{region}-aws-parallelcluster", "000000000000", "loot.bin"),
            implicit(ENDPOINT),
            why="AWS-owned buckets are read-only from the VPC",
        ),
        Case(
            "head-node-signals-cloudformation",
            "platform",
            "the head node answers its CloudFormation wait condition",
            via_endpoint(node, "s3:PutObject", f"cloudformation-waitcondition-{region}", "000000000000", "signal/abc"),
            {},
            why="cfn-signal writes through a pre-signed URL",
        ),
        Case(
            "node-reads-cloudformation-bucket",
            "platform",
            "a node reads from CloudFormation's signal bucket",
            via_endpoint(node, "s3:GetObject", f"cloudformation-waitcondition-{region}", "000000000000", "signal/abc"),
            implicit(ENDPOINT),
            why="the signal buckets are write-only from the VPC",
        ),
        Case(
            "node-reads-cluster-bucket",
            "platform",
            "a node reads the cluster configuration from the cluster's ParallelCluster bucket",
            via_endpoint(node, "s3:GetObjectVersion", cluster_bucket, compute, cluster_config),
            {},
            why="the head node reads its config by version from this cluster's artifact directory",
        ),
        Case(
            "node-reads-other-cluster-artifacts",
            "platform",
            "a node reads another cluster's configuration from the shared ParallelCluster bucket",
            via_endpoint(node, "s3:GetObject", cluster_bucket, compute, other_config),
            implicit(ENDPOINT),
            why="only this cluster's artifact directory passes the endpoint",
        ),
        Case(
            "node-deletes-cluster-bucket",
            "platform",
            "a node deletes from the cluster's ParallelCluster bucket",
            via_endpoint(node, "s3:DeleteObject", cluster_bucket, compute, cluster_config),
            implicit(ENDPOINT),
            why="deployment buckets are cleaned up by the CLI, not from the nodes",
        ),
        Case(
            "node-writes-squatted-cluster-bucket",
            "platform",
            f"a node writes into a parallelcluster-* bucket owned by account {OUTSIDE_ACCOUNT}",
            via_endpoint(node, "s3:PutObject", squatted, OUTSIDE_ACCOUNT, "loot.bin"),
            implicit(ENDPOINT),
            why="nothing in the VPC writes to ParallelCluster's bucket, let alone to one named like it",
        ),
        Case(
            "node-reads-squatted-cluster-bucket",
            "platform",
            f"a node reads a planted config from a parallelcluster-* bucket owned by account {OUTSIDE_ACCOUNT}",
            via_endpoint(node, "s3:GetObject", squatted, OUTSIDE_ACCOUNT, cluster_config),
            implicit(ENDPOINT),
            why="a bucket name pattern is not an owner: aws:ResourceAccount pins it",
        ),
        Case(
            "node-reads-cdk-assets",
            "platform",
            "a node fetches its bootstrap script from the compute account's CDK asset bucket",
            via_endpoint(node, "s3:GetObject", assets_bucket, compute, "0123abcd.sh"),
            {},
            why="bootstrap scripts and the payload are CDK assets",
        ),
        Case(
            "node-writes-cdk-assets",
            "platform",
            "a node overwrites a bootstrap script in the CDK asset bucket",
            via_endpoint(node, "s3:PutObject", assets_bucket, compute, "0123abcd.sh"),
            implicit(ENDPOINT),
            why="assets are read-only from the VPC: a node cannot plant a script other nodes run",
        ),
        Case(
            "node-reads-squatted-cdk-assets",
            "platform",
            f"a node reads a bucket named like the asset bucket but owned by account {OUTSIDE_ACCOUNT}",
            via_endpoint(node, "s3:GetObject", assets_bucket, OUTSIDE_ACCOUNT, "0123abcd.sh"),
            implicit(ENDPOINT),
            why="a bucket name pattern is not an owner: aws:ResourceAccount pins it",
        ),
        Case(
            "outside-credentials-read-cdk-assets",
            "platform",
            "credentials of another organization read the asset bucket through the endpoint",
            via_endpoint(intruder, "s3:GetObject", assets_bucket, compute, "0123abcd.sh"),
            implicit(ENDPOINT) if spec.perimeter.organization_bound else {},
            why="the organization perimeter covers the deployment buckets too",
        ),
        Case(
            "outside-credentials-read-cluster-bucket",
            "platform",
            "credentials of another organization read the cluster's config through the endpoint",
            via_endpoint(intruder, "s3:GetObject", cluster_bucket, compute, cluster_config),
            implicit(ENDPOINT) if spec.perimeter.organization_bound else {},
            why="the organization perimeter covers the deployment buckets too",
        ),
    ]


# ---- side channels around the access point path (issue 14) -----------------------------------

SSE = "s3:x-amz-server-side-encryption"
SSE_KEY = "s3:x-amz-server-side-encryption-aws-kms-key-id"
SSE_C = "s3:x-amz-server-side-encryption-customer-algorithm"


def encryption_cases(spec: DeploymentSpec, context: MatrixContext) -> list[Case]:
    """Writers cannot choose their encryption: the dataset key, or nothing (the bucket default, the same key)."""
    dataset = next((d for d in spec.data.datasets if d.writers), None)
    if dataset is None:
        return []
    assert dataset.output_prefix is not None
    ref = dataset.writers[0]
    who = _role(spec, ref)
    key = f"{dataset.output_prefix}shard-00001.bin"
    write = _through_ap(spec, who, "s3:PutObject", dataset, key=key)
    other_key = f"arn:aws:kms:{spec.region}:{spec.accounts.data}:key/0a0a0a0a-1b1b-2c2c-3d3d-4e4e4e4e4e4e"
    tag = f"{dataset.name}/{ref}"

    def headers(**values: str) -> tuple[tuple[str, str], ...]:
        names = {"sse": SSE, "key": SSE_KEY, "customer": SSE_C}
        return tuple((names[k], v) for k, v in values.items())

    return [
        Case(
            f"write-with-dataset-key/{tag}",
            "grant",
            f"{ref} writes under {dataset.output_prefix} asking for SSE-KMS with the dataset key "
            "(as CreateMultipartUpload does)",
            replace(write, headers=headers(sse="aws:kms", key=context.key_arn)),
            {},
            why="naming the dataset key is what the bucket default does anyway",
        ),
        Case(
            f"write-multipart-part/{tag}",
            "grant",
            f"{ref} uploads a part of a multipart upload (UploadPart: s3:PutObject without encryption headers)",
            write,
            {},
            why="parts carry no encryption headers; the upload's key was fixed when it was created",
        ),
        Case(
            f"write-with-other-key/{tag}",
            "perimeter",
            f"{ref} writes asking for SSE-KMS with another key of the data account",
            replace(write, headers=headers(sse="aws:kms", key=other_key)),
            merge(explicit(BUCKET, "DenyWritesWithOtherKey"), implicit(KMS_IDENTITY)),
            why="objects another key encrypts would leave the dataset key's policy behind",
        ),
        Case(
            f"write-with-aws-managed-key/{tag}",
            "perimeter",
            f"{ref} writes asking for SSE-KMS without a key id (S3 then uses the AWS managed key aws/s3)",
            replace(write, headers=headers(sse="aws:kms")),
            merge(explicit(BUCKET, "DenyWritesWithOtherKey"), implicit(KMS_IDENTITY)),
            why="the AWS managed key has a policy nobody here wrote",
        ),
        Case(
            f"write-with-sse-s3/{tag}",
            "perimeter",
            f"{ref} writes asking for SSE-S3 (AES256) instead of the dataset key",
            replace(write, headers=headers(sse="AES256")),
            explicit(BUCKET, "DenyWritesWithOtherEncryption", "DenyWritesWithOtherKey"),
            why="SSE-S3 objects are readable by anyone S3 lets read them, with no key policy in the way",
        ),
        Case(
            f"write-with-customer-key/{tag}",
            "perimeter",
            f"{ref} writes with a key of its own (SSE-C)",
            replace(write, headers=headers(customer="AES256")),
            explicit(BUCKET, "DenyWritesWithCustomerKeys"),
            why="an SSE-C object is unreadable to everyone but the writer: ransom by encryption",
        ),
    ]


def access_point_pinning_cases(spec: DeploymentSpec) -> list[Case]:
    """The bucket delegates to the spec's access points by ARN; the access points to our gateway endpoint."""
    dataset = next(d for d in spec.data.datasets if d.readers)
    ref = dataset.readers[0]
    reader = _role(spec, ref)
    sample = f"{dataset.prefix}shard-00000.bin"
    rogue = AccessPointTarget(f"arn:aws:s3:{spec.region}:{spec.accounts.data}:accesspoint/rogue-public", owned=False)
    admin = Principal(
        "compute admin (s3:*, kms:* on *)", f"arn:aws:iam::{spec.accounts.compute}:role/ops-admin", spec.organization_id
    )
    internet = Network(through_endpoint=False, origin="Internet")
    cases = [
        Case(
            "new-data-account-access-point",
            "perimeter",
            f"{ref} reads through a new Internet-origin access point someone created in the data account",
            S3Request(
                reader, "s3:GetObject", spec.data.bucket_name, spec.accounts.data, key=sample, access_point=rogue
            ).with_network(through_endpoint=False, origin="Internet"),
            implicit(IDENTITY, BUCKET),
            why="the bucket delegates to the spec's access point ARNs, not to every access point of its account",
        ),
        Case(
            "new-data-account-access-point-by-admin",
            "perimeter",
            "a compute-account administrator reads through a new access point of the data account, from the Internet",
            S3Request(
                admin,
                "s3:GetObject",
                spec.data.bucket_name,
                spec.accounts.data,
                key=sample,
                access_point=rogue,
                network=internet,
            ),
            implicit(BUCKET, KEY),
            why="the bucket alone stops an access point it does not name",
        ),
    ]
    if spec.network.s3_gateway_endpoint_id is not None:
        cases.append(
            Case(
                "other-s3-endpoint-in-the-vpc",
                "perimeter",
                f"{ref} reads through its access point via a second S3 endpoint in the VPC (with the default policy)",
                _through_ap(spec, reader, "s3:GetObject", dataset, key=sample).with_network(
                    through_endpoint=False, other_endpoint="vpce-0ffffffffffffffff"
                ),
                implicit(ACCESS_POINT),
                why="aws:SourceVpce pins the access points to the gateway endpoint whose policy we wrote",
            )
        )
    return cases


@dataclass(frozen=True)
class _Call:
    """One call through an interface endpoint: what the nodes do (allowed) or a way out (denied)."""

    label: str
    action: str
    resource: str
    account: str | None
    resource_type: str | None
    allowed: bool
    context: tuple[tuple[str, str], ...] = ()
    caller: str = "node"  # node, operator


def _endpoint_calls(spec: DeploymentSpec) -> dict[str, list[_Call]]:
    """Per interface endpoint with a policy: the calls the platform needs, and the ways out that must fail."""
    region, compute, data, out = spec.region, spec.accounts.compute, spec.accounts.data, OUTSIDE_ACCOUNT
    log_stream = "log-group:/aws/parallelcluster/{name}:log-stream:head-node"
    cluster_stack = f"arn:aws:cloudformation:{region}:{{account}}:stack/{spec.name}-cluster/0a1b2c3d"
    notebook = f"arn:aws:sagemaker:{region}:{{account}}:notebook-instance/{spec.name}"
    calls: dict[str, list[_Call]] = {
        "logs": [
            _Call(
                "puts its log events",
                "logs:PutLogEvents",
                f"arn:aws:logs:{region}:{compute}:" + log_stream.format(name=spec.name),
                compute,
                "log-stream",
                True,
            ),
            _Call(
                f"writes log events into a log group of account {out}",
                "logs:PutLogEvents",
                f"arn:aws:logs:{region}:{out}:" + log_stream.format(name="drop"),
                out,
                "log-stream",
                False,
            ),
        ],
        "monitoring": [
            _Call("publishes metrics", "cloudwatch:PutMetricData", "*", compute, None, True),
            _Call(
                "reads the cluster's CloudWatch dashboard",
                "cloudwatch:GetDashboard",
                f"arn:aws:cloudwatch::{compute}:dashboard/{spec.name}-cluster-{region}",
                compute,
                "dashboard",
                True,
            ),
            _Call(
                f"reads a dashboard of account {out}",
                "cloudwatch:GetDashboard",
                f"arn:aws:cloudwatch::{out}:dashboard/drop",
                out,
                "dashboard",
                False,
            ),
        ],
        "sts": [
            _Call(
                "assumes a role of this deployment",
                "sts:AssumeRole",
                spec.role_arn("head-node"),
                compute,
                "role",
                True,
            ),
            _Call(
                f"assumes a role of account {out}",
                "sts:AssumeRole",
                f"arn:aws:iam::{out}:role/drop",
                out,
                "role",
                False,
            ),
            _Call(
                "assumes another role of the organization",
                "sts:AssumeRole",
                f"arn:aws:iam::{compute}:role/ops-admin",
                compute,
                "role",
                False,
            ),
        ],
        "kms": [
            _Call(
                "decrypts with a key of the data account",
                "kms:Decrypt",
                f"arn:aws:kms:{region}:{data}:key/0a0a0a0a-1b1b-2c2c-3d3d-4e4e4e4e4e4e",
                data,
                "key",
                True,
            ),
            _Call(
                f"encrypts with a key of account {out}",
                "kms:Encrypt",
                f"arn:aws:kms:{region}:{out}:key/5f5f5f5f-6a6a-7b7b-8c8c-9d9d9d9d9d9d",
                out,
                "key",
                False,
            ),
        ],
        "ecr.api": [
            _Call("gets an ECR authorization token", "ecr:GetAuthorizationToken", "*", compute, None, True),
            _Call(
                "reads the manifest of the compute account's NeMo image",
                "ecr:BatchGetImage",
                f"arn:aws:ecr:{region}:{compute}:repository/{spec.name}/nemo",
                compute,
                "repository",
                True,
            ),
            _Call(
                f"pulls an image manifest from a repository of account {out}",
                "ecr:BatchGetImage",
                f"arn:aws:ecr:{region}:{out}:repository/tools",
                out,
                "repository",
                False,
            ),
        ],
        "ecr.dkr": [
            _Call(
                "pulls a layer of the compute account's NeMo image",
                "ecr:GetDownloadUrlForLayer",
                f"arn:aws:ecr:{region}:{compute}:repository/{spec.name}/nemo",
                compute,
                "repository",
                True,
            ),
            _Call(
                f"pushes a layer to a repository of account {out}",
                "ecr:InitiateLayerUpload",
                f"arn:aws:ecr:{region}:{out}:repository/drop",
                out,
                "repository",
                False,
            ),
        ],
        "cloudformation": [
            _Call(
                "signals its cluster stack",
                "cloudformation:SignalResource",
                cluster_stack.format(account=compute),
                compute,
                "stack",
                True,
            ),
            _Call(
                f"creates a stack in account {out} (data in its parameters)",
                "cloudformation:CreateStack",
                cluster_stack.format(account=out),
                out,
                "stack",
                False,
            ),
        ],
        "ec2": [
            _Call(
                "terminates a compute node of the cluster",
                "ec2:TerminateInstances",
                f"arn:aws:ec2:{region}:{compute}:instance/i-0123456789abcdef0",
                compute,
                "instance",
                True,
            ),
            _Call(
                "launches an Amazon-owned ParallelCluster AMI",
                "ec2:RunInstances",
                f"arn:aws:ec2:{region}::image/ami-0123456789abcdef0",
                None,
                "image",
                True,
                (("ec2:Owner", "amazon"),),
            ),
            _Call(
                f"launches an AMI of account {out}",
                "ec2:RunInstances",
                f"arn:aws:ec2:{region}::image/ami-0fedcba9876543210",
                out,
                "image",
                False,
                (("ec2:Owner", out),),
            ),
        ],
        "ssm": [
            _Call(
                "opens a session on a node (operator)",
                "ssm:StartSession",
                f"arn:aws:ec2:{region}:{compute}:instance/i-0123456789abcdef0",
                compute,
                "instance",
                True,
                caller="operator",
            ),
            _Call(
                f"reads an SSM document of account {out}",
                "ssm:GetDocument",
                f"arn:aws:ssm:{region}:{out}:document/payload",
                out,
                "document",
                False,
            ),
        ],
    }
    if spec.notebook.enabled:
        calls["sagemaker.api"] = [
            _Call(
                "opens the notebook (presigned URL)",
                "sagemaker:CreatePresignedNotebookInstanceUrl",
                notebook.format(account=compute),
                compute,
                "notebook-instance",
                True,
                caller="operator",
            ),
            _Call(
                f"opens a notebook of account {out}",
                "sagemaker:CreatePresignedNotebookInstanceUrl",
                notebook.format(account=out),
                out,
                "notebook-instance",
                False,
            ),
        ]
    return calls


def _slug(text: str) -> str:
    return "-".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def interface_endpoint_cases(spec: DeploymentSpec, policies_present: frozenset[str]) -> list[Case]:
    """Through each interface endpoint with a policy: the platform's calls pass, the ways out do not, credentials
    of another organization do not, and AWS service principals acting for us do."""
    org = spec.organization_id
    node = Principal("cluster node (endpoint layer only)", spec.role_arn("cluster-node"), org)
    operator_arn = (
        spec.perimeter.operator_roles[0]
        if spec.perimeter.operator_roles
        else f"arn:aws:iam::{spec.accounts.compute}:role/{spec.name}-operator"
    )
    operator = Principal("operator role (endpoint layer only)", operator_arn, org)
    intruder = Principal("other organization's role", f"arn:aws:iam::{OTHER_ORG_ACCOUNT}:role/intruder", OTHER_ORG_ID)
    service_principal = Principal("an AWS service principal", "ec2.amazonaws.com", None, is_aws_service=True)
    cases: list[Case] = []
    for service, calls in _endpoint_calls(spec).items():
        if f"endpoint:{service}" not in policies_present:
            continue
        for index, call in enumerate(calls):
            who = operator if call.caller == "operator" else node

            def request(principal: Principal, call: _Call = call, service: str = service) -> ApiRequest:
                # An action without resource types acts in the caller's own account.
                account = principal.account if call.resource == "*" and principal.account else call.account
                return ApiRequest(
                    principal, call.action, call.resource, account, service, call.resource_type, call.context
                )

            slug = f"{service}/{_slug(call.label)}"
            cases.append(
                Case(
                    f"endpoint/{slug}",
                    "endpoints",
                    f"{who.label.split(' (')[0]} {call.label} through the {service} endpoint",
                    request(who),
                    {} if call.allowed else implicit(INTERFACE_ENDPOINT),
                    why="what the platform needs" if call.allowed else "a way out of the organization",
                )
            )
            if call.allowed:
                cases.append(
                    Case(
                        f"endpoint-outside-credentials/{slug}",
                        "endpoints",
                        f"credentials of another organization: {call.label} through the {service} endpoint",
                        request(intruder),
                        implicit(INTERFACE_ENDPOINT),
                        why="only the organization's principals use the VPC's endpoints",
                    )
                )
            if index == 0:
                cases.append(
                    Case(
                        f"endpoint-aws-service/{service}",
                        "endpoints",
                        f"an AWS service principal, acting for us: {call.label} through the {service} endpoint",
                        request(service_principal),
                        {},
                        why="services that act on the caller's behalf carry no organization id",
                    )
                )
    return cases


def guardrail_cases(spec: DeploymentSpec, policies_present: frozenset[str]) -> list[Case]:
    """The guardrail SCP (policies.guardrails), as the organization's principals meet it."""
    if GUARDRAIL_POLICY_ID not in policies_present:
        return []
    org, region, compute, data = spec.organization_id, spec.region, spec.accounts.compute, spec.accounts.data
    data_admin = Principal("data-account administrator", f"arn:aws:iam::{data}:role/storage-admin", org)
    access_point = f"arn:aws:s3:{region}:{data}:accesspoint/new-dataset"

    def create(origin: str) -> ApiRequest:
        return ApiRequest(
            data_admin,
            "s3:CreateAccessPoint",
            access_point,
            data,
            None,
            "accesspoint",
            (("s3:AccessPointNetworkOrigin", origin),),
        )

    cases = [
        Case(
            "guardrail-create-vpc-access-point",
            "guardrails",
            "the data account's administrator creates a VPC-origin access point",
            create("VPC"),
            {},
            why="new datasets stay possible, VPC-only",
        ),
        Case(
            "guardrail-create-internet-access-point",
            "guardrails",
            "the data account's administrator creates an Internet-origin access point",
            create("Internet"),
            explicit(SCP, "DenyAccessPointsOutsideVpc"),
            why="no access point that the Internet can reach, on any bucket of the organization",
        ),
    ]
    instance = f"arn:aws:ec2:{region}:{compute}:instance/i-0123456789abcdef0"
    if spec.perimeter.operator_roles:
        node = Principal("cluster node credentials", spec.role_arn("cluster-node"), org)
        cases.append(
            Case(
                "guardrail-session-by-non-operator",
                "guardrails",
                "a role that is not an operator (the nodes' own credentials) opens an SSM session on a node",
                ApiRequest(node, "ssm:StartSession", instance, compute, "ssm", "instance"),
                explicit(SCP, "DenySessionsOnInstancesExceptOperators"),
                why="a session is a shell inside the VPC with the node's credentials",
            )
        )
    if spec.notebook.enabled and spec.network.vpc_id is not None:
        operator = Principal(
            "an operator, outside the VPC",
            spec.perimeter.operator_roles[0] if spec.perimeter.operator_roles else f"arn:aws:iam::{compute}:role/ops",
            org,
        )
        notebook = f"arn:aws:sagemaker:{region}:{compute}:notebook-instance/{spec.name}"
        cases.append(
            Case(
                "guardrail-presigned-url-outside-vpc",
                "guardrails",
                "an operator asks for a presigned notebook URL from outside the VPC",
                ApiRequest(
                    operator,
                    "sagemaker:CreatePresignedNotebookInstanceUrl",
                    notebook,
                    compute,
                    None,
                    "notebook-instance",
                ),
                explicit(SCP, "DenyPresignedNotebookUrlsOutsideVpc"),
                why="the URL opens Jupyter (and the notebook role) from any browser that holds it",
            )
        )
    return cases


def _adjusted(case: Case, spec: DeploymentSpec) -> Case:
    """Expectations that depend on options of the spec rather than on the case itself."""
    denials = dict(case.denials)
    if case.request.principal.role is None:
        # Not our identity policies: not evaluated, so not expected to deny.
        denials.pop(IDENTITY, None)
        denials.pop(KMS_IDENTITY, None)
    if not spec.kms_key_is_managed:
        denials.pop(KEY, None)  # the spec's own key: its policy is the owner's, not in the templates
    request = case.request
    if spec.perimeter.require_vpc_origin_on_bucket and isinstance(request, S3Request) and request.ours:
        has_writers = any(d.writers for d in spec.data.datasets)
        object_actions = {*READ_OBJECT_ACTIONS, *(WRITE_OBJECT_ACTIONS if has_writers else ())}
        from_vpc_access_point = request.access_point is not None and request.network.origin == "VPC"
        if request.action in object_actions and not from_vpc_access_point:
            denials = merge(denials, explicit(BUCKET, "DenyObjectAccessNotFromVpcAccessPoints"))
    if case.denials and not denials:
        raise ValueError(f"case {case.case_id}: no layer of ours is left to deny it under this spec")
    return replace(case, denials=denials) if denials != case.denials else case


def wheelhouse_cases(spec: DeploymentSpec) -> list[Case]:
    """The offline wheelhouse (cluster.python_wheelhouse): its prefix is reachable, the rest of its bucket not."""
    location = wheelhouse_location(spec)
    if location is None:
        return []
    bucket, prefix = location
    node = Principal("head node (endpoint layer only)", spec.role_arn("head-node"), spec.organization_id)
    compute = spec.accounts.compute

    def read(key: str) -> S3Request:
        return S3Request(node, "s3:GetObject", bucket, compute, key=key, ours=False)

    return [
        Case(
            "head-node-reads-wheelhouse",
            "platform",
            f"the head node reads wheels under s3://{bucket}/{prefix}",
            read(f"{prefix}torch-2.13.0-cp311-linux_x86_64.whl"),
            {},
            why="an offline cluster builds its Python environment from the wheelhouse",
        ),
        Case(
            "head-node-reads-beside-wheelhouse",
            "platform",
            f"the head node reads s3://{bucket}/ outside the wheelhouse prefix",
            read("private/credentials.json"),
            implicit(ENDPOINT),
            why="the endpoint opens the wheelhouse prefix, not its bucket",
        ),
    ]


def build_cases(
    spec: DeploymentSpec, context: MatrixContext, policies_present: frozenset[str] | None = None
) -> list[Case]:
    """Every case of `spec`. `policies_present`: the policy ids of the policy set (which interface endpoints
    have a policy, whether the guardrail SCP is evaluated); by default those the spec implies."""
    if policies_present is None:
        policies_present = implied_policy_ids(spec)
    cases = [
        *dataset_cases(spec),
        *encryption_cases(spec, context),
        *key_cases(spec, context),
        *dataset_perimeter_cases(spec),
        *perimeter_cases(spec),
        *access_point_pinning_cases(spec),
        *platform_cases(spec),
        *wheelhouse_cases(spec),
        *interface_endpoint_cases(spec, policies_present),
        *guardrail_cases(spec, policies_present),
    ]
    cases = [_adjusted(case, spec) for case in cases]
    ids = [case.case_id for case in cases]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise ValueError(f"duplicate case ids: {sorted(duplicates)}")
    return cases


def implied_policy_ids(spec: DeploymentSpec) -> frozenset[str]:
    """The interface endpoint and guardrail policy ids a deployment of `spec` has."""
    from policies.interface_endpoints import interface_endpoint_policy, wanted_interface_endpoints

    ids = {f"endpoint:{s}" for s in wanted_interface_endpoints(spec) if interface_endpoint_policy(spec, s) is not None}
    if guardrail_scps(spec) is not None:
        ids.add(GUARDRAIL_POLICY_ID)
    return frozenset(ids)


# ---- evaluation -----------------------------------------------------------------------------


def plan(cases: Sequence[Case], policies: PolicySet, context: MatrixContext) -> list[list[Layer]]:
    planned = []
    for case in cases:
        effective = case.variant(policies) if case.variant else policies
        planned.append(layers_for(case.request, effective, context.key_arn, context.key_aliases, context.via_service))
    return planned


def _changed_documents(policies: PolicySet, baseline: PolicySet) -> set[str]:
    ids = set(policies.documents) | set(baseline.documents)
    return {pid for pid in ids if policies.documents.get(pid) is not baseline.documents.get(pid)}


def evaluate_many(
    cases: Sequence[Case], policy_sets: Sequence[PolicySet], context: MatrixContext, engine: Engine
) -> list[list[CaseResult]]:
    """Every case under every policy set, in one engine batch.

    The first set is the baseline; a case is planned again under a later set only if one of its
    layers reads a document that set replaced, so a mutant costs only the simulations it changes.
    """
    baseline = plan(cases, policy_sets[0], context)
    plans = [baseline]
    for policies in policy_sets[1:]:
        changed = _changed_documents(policies, policy_sets[0])
        if not changed:
            plans.append(baseline)
            continue
        planned = []
        for case, layers in zip(cases, baseline, strict=True):
            touched = any(pid in changed for layer in layers for pid in layer.policy_ids)
            planned.append(plan([case], policies, context)[0] if touched else layers)
        plans.append(planned)
    simulations = {layer.key: layer.simulation for planned in plans for layers in planned for layer in layers}
    results = engine.run_keyed(simulations)
    return [
        [
            CaseResult(case, tuple(outcome(layer, results[layer.key]) for layer in layers))
            for case, layers in zip(cases, planned, strict=True)
        ]
        for planned in plans
    ]


def evaluate(cases: Sequence[Case], policies: PolicySet, context: MatrixContext, engine: Engine) -> list[CaseResult]:
    return evaluate_many(cases, [policies], context, engine)[0]
