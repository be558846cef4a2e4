"""The resource types of the deployment that moto's CloudFormation accepts without a model: it skips such a resource
and still completes the stack, so CREATE_COMPLETE in the emulator does not mean the resource (an access point, a
bucket policy, an egress rule) exists. Computed from the templates and moto's own type lookup, never typed."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# The template `npx cdk bootstrap` deploys (the stack CDKToolkit), in the pinned CDK CLI.
BOOTSTRAP_TEMPLATE = REPO / "node_modules" / "aws-cdk" / "lib" / "api" / "bootstrap" / "bootstrap-template.yaml"
HEADING = "## Accepted without a model"
# What each such type carries in this deployment: the reader's measure of what the emulator's CREATE_COMPLETE leaves
# out. A type the templates gain needs a line here (tests/test_rehearsal.py).
CARRIES = {
    "AWS::S3::AccessPoint": "the VPC-only access points, one per dataset, and their grants to the compute roles",
    "AWS::S3::BucketPolicy": "TLS only, delegation to the access points, the organization bound; access-log delivery",
    "AWS::EC2::SecurityGroupEgress": "the cluster's and notebook's egress to the endpoints, S3's and DynamoDB's prefix lists, the cluster itself",
    "AWS::SNS::TopicPolicy": "who may publish to the alerts topic",
    "AWS::APS::Workspace": "the Prometheus workspace the head node's agent writes to",
    "AWS::APS::RuleGroupsNamespace": "the alert rules",
    "AWS::CDK::Metadata": "nothing deployed: the CDK's version report",
}


@dataclass
class Unmodelled:
    type: str
    stacks: list[str] = field(default_factory=list)
    count: int = 0
    properties: set[str] = field(default_factory=set)  # what the templates set on it, which the emulator never holds


def moto_models_type(kind: str) -> bool:
    """Whether moto's CloudFormation builds a resource of `kind` (moto's own lookup: its models, its custom-resource
    model for Custom::*, none for the types it ignores)."""
    from moto.cloudformation.parsing import resource_class_from_type

    moto_log = logging.getLogger("moto")
    level = moto_log.level
    moto_log.setLevel(logging.ERROR)  # it warns for every type it lacks
    try:
        return resource_class_from_type(kind) is not None
    finally:
        moto_log.setLevel(level)


def unmodelled(templates: Iterable[tuple[str, dict[str, Any]]]) -> list[Unmodelled]:
    """The types of (stack name, template) pairs moto has no model for, by type."""
    found: dict[str, Unmodelled] = {}
    for stack, template in templates:
        for resource in template["Resources"].values():
            kind = resource["Type"]
            if moto_models_type(kind):
                continue
            row = found.setdefault(kind, Unmodelled(kind))
            if stack not in row.stacks:
                row.stacks.append(stack)
            row.count += 1
            row.properties |= set(resource.get("Properties") or {})
    return sorted(found.values(), key=lambda row: row.type)


def bootstrap_template() -> dict[str, Any]:
    from tests.rehearsal.run import parse_template

    return parse_template(BOOTSTRAP_TEMPLATE.read_text())


def section(rows: list[Unmodelled], moto_version: str, no_auth_count: float) -> list[str]:
    out = [
        HEADING,
        "",
        f"moto {moto_version}'s CloudFormation has no model for these types of the templates (its "
        "`moto.cloudformation.parsing.resource_class_from_type` returns none): it skips each such resource and still "
        "reports the stack CREATE_COMPLETE. A complete stack above therefore does not mean these exist:",
        "",
        "| resource type | stacks | count | what it carries | its properties, which the emulator never holds |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        stacks = ", ".join(f"`{stack}`" for stack in row.stacks)
        properties = ", ".join(sorted(row.properties)) or "(none)"
        out.append(f"| `{row.type}` | {stacks} | {row.count} | {CARRIES.get(row.type, '')} | {properties} |")
    if no_auth_count == float("inf"):
        checks = "checks no credentials or policies (moto's INITIAL_NO_AUTH_ACTION_COUNT is inf, its default)"
    else:
        checks = f"checks credentials and policies only after {no_auth_count:g} requests (INITIAL_NO_AUTH_ACTION_COUNT)"
    out += [
        "",
        f"Nor does the emulator enforce the policies it holds: its server {checks}, so the roles', keys' and VPC "
        "endpoints' policies are stored, never evaluated. The policy tests evaluate them ([security.md](security.md)).",
    ]
    return out


def opened_groups(groups: list[tuple[str, bool, bool]]) -> list[str]:
    """What the emulator made of the security groups whose egress the templates restrict ((stack, restricts, open)
    for each group it created): one paragraph, or none when it has no such group."""
    restricted = [(stack, opened) for stack, restricts, opened in groups if restricts]
    if not restricted:
        return []
    opened = [stack for stack, is_open in restricted if is_open]
    stacks = ", ".join(f"`{stack}`" for stack in dict.fromkeys(opened))
    held = (
        f"{len(opened)} ({stacks}) open to 0.0.0.0/0 on every protocol: moto's security group takes no egress rules "
        "from a template and keeps EC2's default rule"
        if opened
        else "none open to 0.0.0.0/0"
    )
    return [
        "",
        f"Modelled, but not as written: of the {len(restricted)} security groups whose egress the templates restrict "
        f"(their `SecurityGroupEgress` rules, all else denied), the emulator holds {held}.",
    ]


def documented(doc: str) -> set[str]:
    """The types the section of docs/rehearsal.md lists."""
    start = doc.find(f"{HEADING}\n")
    if start < 0:
        return set()
    body = re.split(r"^## ", doc[start + len(HEADING) :], maxsplit=1, flags=re.M)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", body, flags=re.M))
