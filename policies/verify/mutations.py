"""Mutation testing of the access matrix: weaken one policy in one place, and require that at least
one case of the matrix no longer holds.

Operators (each applied wherever it can be, one place at a time):
  drop-condition     remove one condition key from one statement (the TLS and organization
                     conditions included)
  drop-statement     remove one statement (the TLS Deny and the organization Deny included)
  widen-prefix       a key prefix in a resource ARN, or an s3:prefix value, becomes '*'
  widen-resource     the resources of one identity or endpoint statement become '*'
  widen-action       the actions of one S3 Allow statement become 's3:*'
  widen-principal    the principal of one resource-policy statement becomes '*'
  endpoint-drop-access-points / endpoint-drop-buckets
                     the endpoint policy loses every access point ARN / every dataset bucket ARN
  add-public-statement
                     an access point policy gains an unconditioned Allow for Principal '*'

Mutants that cannot change any decision are not generated, each for a stated reason (see
`_EQUIVALENCE_RULES`): a principal that a condition on the caller's ARN or account restates, and
the actions of KMS statements that only S3 can reach. Everything generated must be killed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from policies.verify.harness.engine import Engine
from policies.verify.harness.model import PolicyDocument, PolicySet
from policies.verify.matrix import Case, CaseResult, MatrixContext, evaluate_many

# The stacks attach a role's dataset grants as the inline policy "datasets" (stacks/parts/dataset_role.py);
# other identity documents (a notebook's log permissions) are outside the data path.
DATASET_IDENTITY_POLICY = "datasets"
# Condition keys that restate who the principal is; with one of them on a statement, widening its
# Principal to '*' cannot change a decision.
PRINCIPAL_PINNING_KEYS = frozenset({"aws:principalarn", "aws:principalaccount", "kms:calleraccount"})

_EQUIVALENCE_RULES: tuple[str, ...] = (
    "widen-principal is not applied to a statement whose conditions restate the principal "
    "(aws:PrincipalArn, aws:PrincipalAccount, kms:CallerAccount): the mutant allows exactly the same callers",
    "drop-condition is not applied to kms:CallerAccount / aws:PrincipalAccount when the statement's Principal "
    "is exactly that account's root: the principal already says it",
    "widen-action is not applied to KMS statements: S3 calls only kms:Decrypt and kms:GenerateDataKey on the "
    "caller's behalf, and every KMS grant requires kms:ViaService = S3",
)


@dataclass(frozen=True)
class Mutation:
    mutation_id: str
    operator: str
    policy_id: str
    sid: str
    description: str
    policies: PolicySet = field(compare=False, repr=False)


@dataclass(frozen=True)
class MutationResult:
    mutation: Mutation
    killed_by: tuple[str, ...]  # case ids whose expectation no longer holds
    first_failure: str  # the first case's mismatch, for the report

    @property
    def killed(self) -> bool:
        return bool(self.killed_by)


@dataclass(frozen=True)
class MutationReport:
    results: tuple[MutationResult, ...]
    equivalence_rules: tuple[str, ...] = _EQUIVALENCE_RULES

    @property
    def killed(self) -> int:
        return sum(r.killed for r in self.results)

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def score(self) -> float:
        return 100.0 * self.killed / self.total if self.total else 100.0

    @property
    def survivors(self) -> list[MutationResult]:
        return [r for r in self.results if not r.killed]

    def summary(self) -> str:
        return f"mutation score {self.score:.1f} % ({self.killed} of {self.total} mutants killed)"


def _as_list(value: str | Iterable[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _sid(statement: dict, index: int) -> str:
    return str(statement.get("Sid") or f"#{index + 1}")


def mutable_policy_ids(policies: PolicySet) -> list[str]:
    ids = []
    for policy_id in sorted(policies.documents):
        kind = policy_id.split(":", 1)[0]
        if kind == "identity" and not policy_id.endswith(f"/{DATASET_IDENTITY_POLICY}"):
            continue
        ids.append(policy_id)
    return ids


def _statements(document: PolicyDocument) -> list[dict]:
    statements = document["Statement"]
    return statements if isinstance(statements, list) else [statements]


class _Mutator:
    """Yields (operator, sid, description, mutated document) for one policy."""

    def __init__(self, policy_id: str, document: PolicyDocument) -> None:
        self.policy_id = policy_id
        self.kind = policy_id.split(":", 1)[0]
        self.document = document

    def _copy(self) -> tuple[PolicyDocument, list[dict]]:
        mutated = copy.deepcopy(self.document)
        if not isinstance(mutated["Statement"], list):
            mutated["Statement"] = [mutated["Statement"]]
        return mutated, mutated["Statement"]

    def all(self) -> Iterator[tuple[str, str, str, PolicyDocument]]:
        yield from self.drop_condition()
        yield from self.drop_statement()
        yield from self.widen_prefix()
        yield from self.widen_resource()
        yield from self.widen_action()
        yield from self.widen_principal()
        if self.kind == "endpoint":
            yield from self.endpoint_drop("endpoint-drop-access-points", lambda r: ":accesspoint/" in r)
            yield from self.endpoint_drop("endpoint-drop-buckets", _is_dataset_bucket_arn(self.document))
        if self.kind == "access-point":
            yield from self.add_public_statement()

    def drop_condition(self) -> Iterator[tuple[str, str, str, PolicyDocument]]:
        for index, statement in enumerate(_statements(self.document)):
            for operator, block in statement.get("Condition", {}).items():
                for key in block:
                    if _restated_by_principal(statement, operator, key):
                        continue
                    mutated, statements = self._copy()
                    conditions = statements[index]["Condition"]
                    del conditions[operator][key]
                    if not conditions[operator]:
                        del conditions[operator]
                    if not conditions:
                        del statements[index]["Condition"]
                    sid = _sid(statement, index)
                    yield "drop-condition", sid, f"{sid}: drop {operator} {key}", mutated

    def drop_statement(self) -> Iterator[tuple[str, str, str, PolicyDocument]]:
        for index, statement in enumerate(_statements(self.document)):
            mutated, statements = self._copy()
            del statements[index]
            sid = _sid(statement, index)
            yield "drop-statement", sid, f"{sid}: drop the {statement['Effect']} statement", mutated

    def widen_prefix(self) -> Iterator[tuple[str, str, str, PolicyDocument]]:
        for index, statement in enumerate(_statements(self.document)):
            sid = _sid(statement, index)
            for position, resource in enumerate(_as_list(statement.get("Resource", []))):
                widened = _widen_key_prefix(resource)
                if widened is None:
                    continue
                mutated, statements = self._copy()
                resources = _as_list(statements[index]["Resource"])
                resources[position] = widened
                statements[index]["Resource"] = resources
                yield "widen-prefix", sid, f"{sid}: {resource} -> {widened}", mutated
            for operator, block in statement.get("Condition", {}).items():
                for key, values in block.items():
                    if key.lower() != "s3:prefix" or _as_list(values) == ["*"]:
                        continue
                    mutated, statements = self._copy()
                    statements[index]["Condition"][operator][key] = "*"
                    yield "widen-prefix", sid, f"{sid}: {operator} {key} {values} -> *", mutated

    def widen_resource(self) -> Iterator[tuple[str, str, str, PolicyDocument]]:
        # Resource policies name their own resource; only identity and endpoint policies range
        # over the world, where a resource widened to '*' is a real weakening. One mutant per
        # statement: any one entry widened to '*' already makes the statement cover everything.
        if self.kind not in ("identity", "endpoint"):
            return
        for index, statement in enumerate(_statements(self.document)):
            resources = _as_list(statement.get("Resource", []))
            if not resources or resources == ["*"]:
                continue
            mutated, statements = self._copy()
            statements[index]["Resource"] = "*"
            sid = _sid(statement, index)
            shown = resources[0] if len(resources) == 1 else f"{len(resources)} resources"
            yield "widen-resource", sid, f"{sid}: {shown} -> *", mutated

    def widen_action(self) -> Iterator[tuple[str, str, str, PolicyDocument]]:
        for index, statement in enumerate(_statements(self.document)):
            actions = _as_list(statement.get("Action", []))
            if (
                statement.get("Effect") != "Allow"
                or not all(a.startswith("s3:") for a in actions)
                or actions == ["s3:*"]
            ):
                continue
            mutated, statements = self._copy()
            statements[index]["Action"] = "s3:*"
            sid = _sid(statement, index)
            yield "widen-action", sid, f"{sid}: {actions} -> s3:*", mutated

    def widen_principal(self) -> Iterator[tuple[str, str, str, PolicyDocument]]:
        if self.kind not in ("access-point", "bucket", "key"):
            return
        for index, statement in enumerate(_statements(self.document)):
            principal = statement.get("Principal")
            if principal in (None, "*", {"AWS": "*"}):
                continue
            keys = {k.lower() for block in statement.get("Condition", {}).values() for k in block}
            if keys & PRINCIPAL_PINNING_KEYS:
                continue
            mutated, statements = self._copy()
            statements[index]["Principal"] = "*"
            sid = _sid(statement, index)
            yield "widen-principal", sid, f"{sid}: Principal {json.dumps(principal)} -> *", mutated

    def endpoint_drop(self, operator: str, matches: object) -> Iterator[tuple[str, str, str, PolicyDocument]]:
        mutated, statements = self._copy()
        changed = []
        for index, statement in enumerate(statements):
            resources = _as_list(statement.get("Resource", []))
            kept = [r for r in resources if not matches(r)]  # type: ignore[operator]
            if kept != resources:
                changed.append(_sid(statement, index))
                statement["Resource"] = kept or ["arn:aws:s3:::mutant-removed-everything"]
        if changed:
            yield operator, ",".join(changed), f"{', '.join(changed)}: {operator}", mutated

    def add_public_statement(self) -> Iterator[tuple[str, str, str, PolicyDocument]]:
        statements = _statements(self.document)
        resources = sorted({r for s in statements for r in _as_list(s.get("Resource", []))})
        actions = sorted({a for s in statements if s.get("Effect") == "Allow" for a in _as_list(s.get("Action", []))})
        if not resources or not actions:
            return
        mutated, mutated_statements = self._copy()
        mutated_statements.append(
            {"Sid": "MutantPublicAccess", "Effect": "Allow", "Principal": "*", "Action": actions, "Resource": resources}
        )
        yield "add-public-statement", "MutantPublicAccess", "add an unconditioned Allow for Principal *", mutated


def _restated_by_principal(statement: dict, operator: str, key: str) -> bool:
    """A caller-account condition whose value the statement's Principal (that account's root) already is."""
    if key.lower() not in ("kms:calleraccount", "aws:principalaccount") or not operator.lower().startswith(
        "stringequals"
    ):
        return False
    principal = statement.get("Principal")
    arns = _as_list(principal.get("AWS", [])) if isinstance(principal, dict) else []
    accounts = {arn.split(":")[4] for arn in arns if arn.startswith("arn:aws:iam::") and arn.endswith(":root")}
    values = set(_as_list(statement["Condition"][operator][key]))
    return bool(accounts) and len(arns) == len(accounts) and accounts == values


def _widen_key_prefix(resource: str) -> str | None:
    """'.../object/<prefix>*' or 'arn:aws:s3:::bucket/<prefix>*' with a non-empty prefix -> '.../*'."""
    if ":accesspoint/" in resource and "/object/" in resource:
        head, tail = resource.split("/object/", 1)
        return f"{head}/object/*" if tail not in ("*", "") else None
    if resource.startswith("arn:aws:s3:::") and "/" in resource:
        bucket, tail = resource.removeprefix("arn:aws:s3:::").split("/", 1)
        return f"arn:aws:s3:::{bucket}/*" if tail not in ("*", "") else None
    return None


def _is_dataset_bucket_arn(endpoint: PolicyDocument) -> object:
    """A predicate for the bucket ARNs listed next to access point ARNs (the dataset buckets)."""
    buckets: set[str] = set()
    for statement in _statements(endpoint):
        resources = _as_list(statement.get("Resource", []))
        if any(":accesspoint/" in r for r in resources):
            buckets |= {r.split("/", 1)[0] for r in resources if r.startswith("arn:aws:s3:::")}
    return lambda resource: resource.split("/", 1)[0] in buckets


def generate(policies: PolicySet) -> list[Mutation]:
    mutations: list[Mutation] = []
    for policy_id in mutable_policy_ids(policies):
        for number, (operator, sid, description, document) in enumerate(
            _Mutator(policy_id, policies.documents[policy_id]).all()
        ):
            mutations.append(
                Mutation(
                    mutation_id=f"{policy_id}#{number}",
                    operator=operator,
                    policy_id=policy_id,
                    sid=sid,
                    description=description,
                    policies=policies.with_document(policy_id, document),
                )
            )
    return mutations


def _kills(baseline: Sequence[CaseResult], mutated: Sequence[CaseResult]) -> tuple[tuple[str, ...], str]:
    killers = [r for r in mutated if not r.as_expected]
    first = f"{killers[0].case.case_id}: {'; '.join(killers[0].mismatches())}" if killers else ""
    return tuple(r.case.case_id for r in killers), first


def run(
    cases: Sequence[Case], policies: PolicySet, context: MatrixContext, engine: Engine
) -> tuple[MutationReport, list[CaseResult]]:
    """The baseline matrix and every mutant, in one engine batch (unchanged simulations are cached)."""
    mutations = generate(policies)
    evaluated = evaluate_many(cases, [policies, *(m.policies for m in mutations)], context, engine)
    baseline, per_mutant = evaluated[0], evaluated[1:]
    results = []
    for mutation, mutated in zip(mutations, per_mutant, strict=True):
        killed_by, first = _kills(baseline, mutated)
        results.append(MutationResult(mutation, killed_by, first))
    return MutationReport(tuple(results)), baseline
