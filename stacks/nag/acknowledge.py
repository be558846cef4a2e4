"""Acknowledging cdk-nag findings: always per construct, per rule, with the reason it does not apply."""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

NAG_PACK = "AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str, applies_to: list[str] | None = None) -> None:
    """Acknowledge `AwsSolutions-<rule>` on `scope` (and its children).

    `applies_to` narrows a finding with granular data (IAM5's wildcard resources, IAM4's managed
    policies) to exactly the listed items, so a new wildcard still fails synth.
    """
    if len(reason) < 20:
        raise ValueError(f"acknowledgment of {rule}: give a specific reason, not {reason!r}")
    # cdk-nag v3 names its findings '<pack>::<pack>-<rule>[<granular item>]'.
    rule_id = f"{NAG_PACK}::{NAG_PACK}-{rule}"
    ids = [f"{rule_id}[{item}]" for item in applies_to] if applies_to else [rule_id]
    Validations.of(scope).acknowledge(*(Acknowledgment(id=finding, reason=reason) for finding in ids))


def wildcard_resources(document: dict[str, Any]) -> list[str]:
    """IAM5's granular findings for a policy document: every resource holding a wildcard."""
    found: list[str] = []
    for statement in document["Statement"]:
        resources = statement.get("Resource", [])
        for resource in [resources] if isinstance(resources, str) else resources:
            if isinstance(resource, str) and "*" in resource:
                found.append(f"Resource::{resource}")
    return sorted(set(found))
