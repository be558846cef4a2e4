"""The conditions the engine cannot see, decided by the harness in the open.

Two gaps: the access point keys on bucket resources (below), and KMS's encryption context key
kms:EncryptionContext:aws:s3:arn on key resources (the engine recognizes variable keys only after a '/').

iam-simulate drops s3:DataAccessPointAccount, s3:DataAccessPointArn and s3:AccessPointNetworkOrigin
from a request on a bucket or bucket object (it reports them in `ignoredContextKeys`), so every
condition on them would fail and the bucket policy's delegation to the access points would look
like a denial. Before such a request goes to the engine, `decide_policy` evaluates exactly the
conditions on those keys against the request context and rewrites the policy:

- a statement whose decided condition is false can never apply: it is removed;
- a decided condition that holds is removed from its statement; the engine checks the rest.

A statement's condition block is an AND of its entries, so this partial evaluation is exact.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Lower-case: condition keys are case-insensitive.
ENGINE_BLIND_BUCKET_KEYS: frozenset[str] = frozenset(
    {"s3:dataaccesspointaccount", "s3:dataaccesspointarn", "s3:accesspointnetworkorigin"}
)

ContextValue = str | list[str]
NEVER_MATCHING_RESOURCE = "arn:aws:s3:::harness-decided-not-applicable/never"


def is_bucket_resource(resource: str) -> bool:
    """A bucket (arn:aws:s3:::name) or bucket object ARN, as opposed to an access point ARN."""
    return resource.startswith("arn:aws:s3:::")


# The engine matches variable condition keys only at a '/' (aws:PrincipalTag/x); KMS's encryption context
# keys vary after a ':' (kms:EncryptionContext:aws:s3:arn), so it drops them on every KMS request.
ENGINE_BLIND_KMS_KEYS: frozenset[str] = frozenset({"kms:encryptioncontext:aws:s3:arn"})


def blind_keys_for(resource: str) -> frozenset[str]:
    if resource.startswith("arn:aws:kms:"):
        return ENGINE_BLIND_KMS_KEYS
    return ENGINE_BLIND_BUCKET_KEYS if is_bucket_resource(resource) else frozenset()


def expected_ignored_keys(resource: str, context: Mapping[str, ContextValue]) -> frozenset[str]:
    """The context keys the engine is known to ignore for this request: exactly these, no others."""
    blind = blind_keys_for(resource)
    return frozenset(key for key in context if key.lower() in blind)


@functools.lru_cache(maxsize=4096)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)


def _string_like(value: str, pattern: str) -> bool:
    return _glob(pattern).fullmatch(value) is not None


def _arn_like(value: str, pattern: str) -> bool:
    # Each of the six colon-separated ARN parts matches on its own; wildcards do not cross colons
    # except in the last part (the resource), which may itself hold colons.
    value_parts = value.split(":", 5)
    pattern_parts = pattern.split(":", 5)
    if len(value_parts) != 6 or len(pattern_parts) != 6:
        return False
    return all(_string_like(v, p) for v, p in zip(value_parts, pattern_parts, strict=True))


_POSITIVE: dict[str, Any] = {
    "stringequals": lambda v, p: v == p,
    "stringequalsignorecase": lambda v, p: v.lower() == p.lower(),
    "stringlike": _string_like,
    "arnequals": _arn_like,  # ArnEquals and ArnLike behave the same in IAM
    "arnlike": _arn_like,
}
_NEGATED: dict[str, str] = {
    "stringnotequals": "stringequals",
    "stringnotequalsignorecase": "stringequalsignorecase",
    "stringnotlike": "stringlike",
    "arnnotequals": "arnequals",
    "arnnotlike": "arnlike",
}


class UndecidableCondition(ValueError):
    """A condition on an engine-blind key that the harness does not know how to decide."""


def condition_holds(operator: str, key: str, values: Sequence[str] | str, context: Mapping[str, ContextValue]) -> bool:
    """IAM semantics for one single-valued condition entry (`operator: {key: values}`)."""
    wanted = [values] if isinstance(values, str) else list(values)
    present = {k.lower(): v for k, v in context.items()}
    actual = present.get(key.lower())
    op = operator.lower()
    if ":" in op:
        raise UndecidableCondition(f"{operator} {key}: set operators are not used on single-valued keys")
    if any("${" in w for w in wanted):
        raise UndecidableCondition(f"{operator} {key}: policy variables in values are not decided by the harness")
    if op == "null":
        expect_missing = [w.lower() == "true" for w in wanted]
        return (actual is None) in expect_missing
    if_exists = op.endswith("ifexists")
    if if_exists:
        op = op.removesuffix("ifexists")
        if actual is None:
            return True
    if isinstance(actual, list):
        raise UndecidableCondition(f"{operator} {key}: the request holds several values for a single-valued key")
    if op in _NEGATED:
        if actual is None:
            return True  # negated operators match a missing key
        return not any(_POSITIVE[_NEGATED[op]](actual, w) for w in wanted)
    if op in _POSITIVE:
        return actual is not None and any(_POSITIVE[op](actual, w) for w in wanted)
    raise UndecidableCondition(f"{operator} {key}: operator not supported by the harness")


@dataclass(frozen=True)
class Decided:
    """One condition the harness decided: on which statement, and with what outcome."""

    sid: str
    effect: str
    operator: str
    key: str
    values: tuple[str, ...]
    actual: ContextValue | None
    holds: bool
    names_action: bool  # whether the statement names the request's action at all

    def describe(self) -> str:
        shown = self.values[0] if len(self.values) == 1 else list(self.values)
        outcome = "holds" if self.holds else "fails"
        actual = "key absent" if self.actual is None else self.actual
        return f"{self.sid}: {self.operator} {self.key} {shown} {outcome} (request: {actual})"


def _statements(policy: Mapping[str, Any]) -> list[dict[str, Any]]:
    statements = policy.get("Statement", [])
    return list(statements) if isinstance(statements, list) else [statements]


def statement_label(statement: Mapping[str, Any], index: int) -> str:
    """A statement's label: its Sid, else 'Statement<1-based index>' (what `named_statements` gives it)."""
    return str(statement.get("Sid") or f"Statement{index + 1}")


def named_statements(policy: Mapping[str, Any]) -> dict[str, Any]:
    """`policy` with a Sid on every statement, so that labels survive leaving statements out."""
    statements = _statements(policy)
    if all("Sid" in statement for statement in statements):
        return {**policy, "Statement": statements}
    named = [
        statement if "Sid" in statement else {"Sid": statement_label(statement, i), **statement}
        for i, statement in enumerate(statements)
    ]
    return {**policy, "Statement": named}


def names_action(statement: Mapping[str, Any], action: str) -> bool:
    """Whether `statement` (Action or NotAction, with wildcards) covers `action`."""
    if "NotAction" in statement:
        excluded = statement["NotAction"]
        return not any(
            _string_like(action.lower(), a.lower()) for a in ([excluded] if isinstance(excluded, str) else excluded)
        )
    actions = statement.get("Action", [])
    return any(_string_like(action.lower(), a.lower()) for a in ([actions] if isinstance(actions, str) else actions))


def may_name_resource(statement: Mapping[str, Any], resource: str) -> bool:
    """False only when `statement` certainly does not cover `resource`; anything unusual (NotResource,
    policy variables) counts as a possible match. Compared case-insensitively, to err on keeping."""
    if "Resource" not in statement:
        return True
    patterns = statement["Resource"]
    for pattern in [patterns] if isinstance(patterns, str) else patterns:
        if pattern == "*" or "${" in pattern or _arn_like(resource.lower(), pattern.lower()):
            return True
    return False


def decide_policy(
    policy: Mapping[str, Any], context: Mapping[str, ContextValue], keys: frozenset[str], action: str = "*"
) -> tuple[dict[str, Any], tuple[Decided, ...]]:
    """Partially evaluate `policy` over the condition keys in `keys` (lower-case); see the module doc.

    Removed statements leave a placeholder Deny that matches nothing, so the remaining statements
    keep the indexes (and so the '#n' labels) the engine would give them.
    """
    if not keys:
        return dict(policy), ()
    present = {k.lower(): v for k, v in context.items()}
    decided: list[Decided] = []
    rewritten: list[dict[str, Any]] = []
    for index, original in enumerate(_statements(policy)):
        statement = copy.deepcopy(original)
        label = statement_label(original, index)
        applies = True
        conditions: dict[str, dict[str, Any]] = statement.get("Condition", {})
        for operator in list(conditions):
            block = conditions[operator]
            for key in [k for k in block if k.lower() in keys]:
                values = block.pop(key)
                holds = condition_holds(operator, key, values, context)
                decided.append(
                    Decided(
                        label,
                        str(statement.get("Effect")),
                        operator,
                        key,
                        tuple([values] if isinstance(values, str) else values),
                        present.get(key.lower()),
                        holds,
                        names_action(original, action),
                    )
                )
                applies = applies and holds
            if not block:
                del conditions[operator]
        if "Condition" in statement and not conditions:
            del statement["Condition"]
        rewritten.append(statement if applies else _never_applies(statement))
    result = dict(policy)
    result["Statement"] = rewritten
    return result, tuple(decided)


def _never_applies(statement: Mapping[str, Any]) -> dict[str, Any]:
    """The statement with its Sid, effect, principal and actions, but a resource no request names."""
    placeholder = {
        k: copy.deepcopy(v) for k, v in statement.items() if k not in ("Resource", "NotResource", "Condition")
    }
    placeholder["Resource"] = NEVER_MATCHING_RESOURCE
    return placeholder
