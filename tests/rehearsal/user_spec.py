"""The reader's own spec. README copies spec/default.yaml to my-deployment.yaml and lists what to change before a
real deploy; the rehearsal changes those values in the copied file as a reader would (each value's characters
only: comments, order and quoting stay), then makes in README's commands the substitutions a reader makes there:
the example's stack names, accounts and other names the spec decides become the edited spec's.

A literal of the example that no substitution covers (a README command naming `llm-demo-something` that the
rehearsal cannot derive from the spec) is reported by `unknown_literals`, never run as written: it would act on
the example's resources instead of the reader's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import yaml

from spec import DEFAULT_SPEC_PATH, DeploymentSpec, load_spec, parse_spec
from spec.artifacts import artifacts_bucket_name

# What README's "What to change" table names, changed: another name, organization, two other accounts (neither is
# the management account's 333333333333), a bucket and access points whose names do not follow from the name.
EDITS: tuple[tuple[str, str], ...] = (
    ("name", "acme-llm"),
    ("organization_id", "o-acme4llm42"),
    ("accounts.compute", "444444444444"),
    ("accounts.data", "555555555555"),
    ("data.bucket_name", "acme-corpora-555555555555"),
    ("data.datasets[0].access_point", "acme-pretrain"),
    ("data.datasets[1].access_point", "acme-finetune"),
    ("data.datasets[2].access_point", "acme-weights"),
    ("data.datasets[3].access_point", "acme-checkpoints"),
    ("perimeter.operator_roles[0]", "arn:aws:iam::444444444444:role/acme-llm-operator"),
)
# The table's fields the rehearsal leaves as the example has them, and why.
KEPT = {
    "region": "one region rehearses both accounts; its literal in README's commands is substituted all the same",
    "network.availability_zone": "the example's zone of that region",
    "network.vpc_id": "phase two writes it (README's step 2)",
    "network.s3_gateway_endpoint_id": "phase two writes it (README's step 2)",
    "network.sagemaker_api_endpoint_id": "phase two writes it (README's step 2)",
    "cluster.queues": "the emulator never creates the cluster (its provider is out of reach), whatever the queues",
    "cluster.containers.ecr_repository": "no command the rehearsal runs names it (`make nemo-image` is not a step)",
    "cluster.users": "the emulator never creates the cluster's nodes, where the accounts live",
    "cluster.groups": "the emulator never creates the cluster's nodes, where the accounts live",
}
_STEP = re.compile(r"([A-Za-z_]\w*)|\[(\d+)\]")
# A name ends where a character that could continue it does not follow (so `llm-demo` is not a part of
# `llm-demo-network`, and `111111111111` not a part of `llm-demo-artifacts-111111111111`).
_NAME_CHAR = "A-Za-z0-9-"


class EditError(ValueError):
    """A field the rehearsal edits is not a single value of the copied spec; one line naming the field."""


def steps(field: str) -> list[str | int]:
    """`data.datasets[0].access_point` -> ['data', 'datasets', 0, 'access_point']."""
    parts = [name or int(index) for name, index in _STEP.findall(field)]
    if "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in parts).lstrip(".") != field:
        raise EditError(f"field {field!r}: not a path of keys and [index]es such as data.datasets[0].access_point")
    return parts


def value_at(spec: DeploymentSpec, field: str) -> object:
    """The value of `field` in a loaded spec."""
    value: object = spec
    for step in steps(field):
        value = value[step] if isinstance(step, int) else getattr(value, step)  # type: ignore[index]
    return value


def _child(node: yaml.Node, step: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode) and isinstance(step, str):
        return next((value for key, value in node.value if key.value == step), None)
    if isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
        found: yaml.Node = node.value[step]
        return found
    return None


def _scalar_text(value: str, style: str | None) -> str:
    """`value` written in the style the old value had (double quotes, single quotes or plain)."""
    if style == "'":
        return "'" + value.replace("'", "''") + "'"
    if style == '"' or yaml.safe_load(value) != value:
        return json.dumps(value)  # a JSON string is a double-quoted YAML scalar
    return value


def set_value(text: str, field: str, value: str, source: str) -> str:
    """`text` with the scalar at `field` replaced by `value`, nothing else changed."""
    node: yaml.Node | None = yaml.compose(text)
    for step in steps(field):
        node = _child(node, step) if node is not None else None
    if not isinstance(node, yaml.ScalarNode):
        raise EditError(
            f"{source}: {field}: {'not a single value' if node else 'not in the file'}; cannot set {value!r}"
        )
    return text[: node.start_mark.index] + _scalar_text(value, node.style) + text[node.end_mark.index :]


def edit(text: str, source: str) -> str:
    """The copied spec with every one of EDITS made."""
    for field, value in EDITS:
        text = set_value(text, field, value, source)
    return text


def example_spec() -> DeploymentSpec:
    return load_spec(DEFAULT_SPEC_PATH)


def edited_spec() -> DeploymentSpec:
    """What my-deployment.yaml holds once the rehearsal has edited README's copy of the example."""
    text = edit(DEFAULT_SPEC_PATH.read_text(), "my-deployment.yaml")
    return parse_spec(yaml.safe_load(text), source="my-deployment.yaml")


@dataclass(frozen=True)
class Substitution:
    what: str  # the spec field, or the name the code derives from the spec
    example: str
    edited: str


def substitutions(example: DeploymentSpec, edited: DeploymentSpec) -> list[Substitution]:
    """What a reader replaces in README's commands: the values of the table's fields and the names the code makes of
    them (stacks, buckets), the example's against the edited spec's. Unchanged ones are listed too (region)."""
    pairs = [
        ("name", example.name, edited.name),
        ("region", example.region, edited.region),
        ("network.availability_zone", example.network.availability_zone, edited.network.availability_zone),
        ("accounts.compute", example.accounts.compute, edited.accounts.compute),
        ("accounts.data", example.accounts.data, edited.accounts.data),
        ("organization_id", example.organization_id or "", edited.organization_id or ""),
        ("data.bucket_name", example.data.bucket_name, edited.data.bucket_name),
        ("its log bucket (data.bucket_name + -logs)", example.data.log_bucket_name, edited.data.log_bucket_name),
        (
            "the artifacts bucket (<name>-artifacts-<compute>)",
            artifacts_bucket_name(example),
            artifacts_bucket_name(edited),
        ),
    ]
    pairs += [
        (f"data.datasets[{i}].access_point", old.access_point, new.access_point)
        for i, (old, new) in enumerate(zip(example.data.datasets, edited.data.datasets, strict=True))
    ]
    pairs += [
        (f"perimeter.operator_roles[{i}]", old, new)
        for i, (old, new) in enumerate(
            zip(example.perimeter.operator_roles, edited.perimeter.operator_roles, strict=True)
        )
    ]
    pairs += [
        (f"stack {key} (<name>-{key})", name, edited.stack_names[key]) for key, name in example.stack_names.items()
    ]
    # The guardrail SCP's name where README's commands give it one: a reader's follows their deployment's name.
    pairs.append(("the guardrail SCP (<name>-guardrails)", f"{example.name}-guardrails", f"{edited.name}-guardrails"))
    return [Substitution(what, old, new) for what, old, new in pairs if old]


def _pattern(subs: list[Substitution]) -> re.Pattern[str]:
    names = sorted(
        {s.example for s in subs}, key=len, reverse=True
    )  # the longest name first: a bucket before its account
    return re.compile(rf"(?<![{_NAME_CHAR}])({'|'.join(map(re.escape, names))})(?![{_NAME_CHAR}])")


def substitute(text: str, subs: list[Substitution]) -> str:
    """`text` with each whole name of the example replaced by the edited spec's."""
    edited = {s.example: s.edited for s in subs}
    return _pattern(subs).sub(lambda match: edited[match.group(1)], text)


def uses(text: str, subs: list[Substitution]) -> dict[str, int]:
    """How many times `substitute` replaces each example name in `text`."""
    found: dict[str, int] = {}
    for match in _pattern(subs).finditer(text):
        found[match.group(1)] = found.get(match.group(1), 0) + 1
    return found


def unknown_literals(text: str, subs: list[Substitution]) -> list[str]:
    """Words of `text` that hold a value the edit changes (the example's name, an account...) outside every name
    `substitute` knows: one line each, naming the word and the value."""
    known = [match.span() for match in _pattern(subs).finditer(text)]
    problems = []
    for sub in subs:
        if sub.example == sub.edited:
            continue
        for match in re.finditer(re.escape(sub.example), text):
            if any(start <= match.start() < end for start, end in known):
                continue
            word = re.search(r"[^\s\"'`=]*\Z", text[: match.start()]), re.match(r"[^\s\"'`]*", text[match.end() :])
            whole = f"{word[0].group(0) if word[0] else ''}{sub.example}{word[1].group(0) if word[1] else ''}"
            problems.append(
                f"{whole!r} holds the example's {sub.what} {sub.example!r}, and no substitution of the rehearsal "
                f"names it (tests/rehearsal/user_spec.py: substitutions)"
            )
    return list(dict.fromkeys(problems))
