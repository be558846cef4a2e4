"""docs/rehearsal.md from a rehearsal: the commands in order, how far the emulator got resource by resource, the
tear-down, and what the emulator lacks. Only what a rerun reproduces goes in (no ids, no timings)."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

from moto import settings as moto_settings

from tests.rehearsal import unmodelled
from tests.rehearsal.run import (
    ARTIFACTS,
    CONDITION_FALSE,
    CREATED,
    MANAGEMENT,
    NOT_CREATED,
    NOT_MODELLED,
    REPO,
    Call,
    Rehearsal,
)
from tests.rehearsal.user_spec import KEPT

DOC = Path("docs/rehearsal.md")
NO_AUTH = moto_settings.INITIAL_NO_AUTH_ACTION_COUNT  # the server's: it runs in this environment
ORDER = {CREATED: 0, NOT_MODELLED: 1, NOT_CREATED: 2, CONDITION_FALSE: 3}
# Words that vary from run to run in a command's output: ids, ARNs, times, request ids.
VARYING = [
    (re.compile(r"\b(vpc|vpce|subnet|sg|rtb|fl|key|i)-[0-9a-f]{8,}\b"), r"\1-…"),
    (re.compile(r"\bp-[0-9a-z]{8,128}\b"), "p-…"),  # an Organizations policy id
    (re.compile(r"\br-[0-9a-z]{4,32}\b"), "r-…"),  # an Organizations root id
    (re.compile(r"arn:aws:[^\s\"']+"), "arn:…"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}( [AP]M)?\b"), "…"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "…"),
]


def steady(text: str) -> str:
    for pattern, replacement in VARYING:
        text = pattern.sub(replacement, text)
    return text.replace("|", "\\|").strip()


def question(asked: str) -> str:
    """A (y/n) question of the CDK CLI without its prompt, the stacks it names sorted: how many times the CLI asks,
    and in which order it names independent stacks, varies from run to run."""
    text = re.sub(r"\s*\(y/n\).*", "", asked)
    head, colon, names = text.partition(": ")
    return f"{head}{colon}{', '.join(sorted(names.split(', ')))}" if colon else text


def note(call: Call, rehearsal: Rehearsal, questions: bool = True) -> str:
    parts = []
    if call.answered and questions:
        parts.append("answered y: " + "; ".join(f"“{q}”" for q in sorted({question(q) for q in call.answered})))
    if call.rc != 0:
        parts.append(failure_note(call, rehearsal))
    return "; ".join(parts)


def failure_note(call: Call, rehearsal: Rehearsal) -> str:
    if call.argv[:3] == ["npx", "cdk", "deploy"]:
        failed = [stack for stack in call.argv if rehearsal.failures.get(stack)]
        if failed:
            return f"`{failed[0]}` failed (its reason under How far it got)"
    if call.argv[0] == "aws" and len(call.argv) > 2:
        action = call.argv[2].replace("-", "_")
        if action in rehearsal.not_implemented:
            return f"moto answers HTTP 500: 'The {action} action has not been implemented'"
    lines = [line.strip(" ‣⠙⠹⠸⠼⠴⠦⠧⠇⠏❌") for line in call.tail if line.strip()]
    errors = [line for line in lines if re.search(r"error|fail|denied|credentials", line, re.I)]
    return steady((errors or lines or [f"exit {call.rc}"])[-1])


def command(call: Call, rehearsal: Rehearsal) -> str:
    """The argv as a code span; the live run's ARTIFACTS_DIR (a path of this run) by its name."""
    live = rehearsal.workdir / "live"
    text = " ".join(call.argv).replace(str(live / ARTIFACTS), "$ARTIFACTS_DIR").replace(str(live / "repo"), ".")
    return "`" + steady(text).replace("\\|", "|").replace("|", "\\|") + "`"


def readers_spec(rehearsal: Rehearsal) -> list[str]:
    """The edits of the copied spec and the substitutions in README's commands, as the rehearsal made them."""
    out = [
        "## The reader's spec",
        "",
        "After README's `cp`, the rehearsal changes in `my-deployment.yaml` what README's table "
        "[What to change](../README.md#the-deployment-spec) names (each value only: comments and layout stay):",
        "",
        "| field | `spec/default.yaml` | `my-deployment.yaml` |",
        "|---|---|---|",
    ]
    out += [f"| `{name}` | `{example}` | `{edited}` |" for name, example, edited in rehearsal.edits]
    out += ["", "It keeps the table's other fields:", ""]
    out += [f"- `{name}`: {why}" for name, why in KEPT.items()]
    out += [
        "",
        "README's commands name the example's stacks and accounts; the rehearsal makes a reader's substitutions in "
        "the commands it runs, whole names only, the longest first (a README literal of the example outside these "
        "names stops the rehearsal before it starts):",
        "",
        "| stands for | README's literal | the rehearsal's | times |",
        "|---|---|---|---|",
    ]
    out += [
        f"| {sub.what} | `{sub.example}` | `{sub.edited}` | {times} |"
        for sub, times in rehearsal.substitutions
        if times
    ]
    return [*out, ""]


def render(rehearsal: Rehearsal) -> str:
    cdk = json.loads((REPO / "node_modules" / "aws-cdk" / "package.json").read_text())["version"]
    awscli = next(
        line.split("==")[1]
        for line in (REPO / "tests" / "aws_cli" / "requirements.txt").read_text().splitlines()
        if line.startswith("awscli==")
    )
    out = [
        "# The deploy, rehearsed against an AWS API emulator",
        "",
        "<!-- Generated by `make rehearse` (tests/rehearsal/); tests/test_rehearsal.py keeps it equal to a fresh run. -->",
        "",
        "README's own blocks of [The deployment spec](../README.md#the-deployment-spec) (the one that creates "
        "`my-deployment.yaml` from `spec/default.yaml`, which the rehearsal then edits as a reader would: below), "
        "[Deploying for real](../README.md#deploying-for-real) and "
        "[Tearing down](../README.md#tearing-down) with its table of what is retained, taken from README.md and run "
        f"by bash in order against moto {version('moto')}'s server on 127.0.0.1: the CDK CLI {cdk} (`npx cdk`), the "
        f"AWS CLI {awscli}, `make` and our commands, with the profiles `compute` and `data` in the spec's two "
        f"accounts and `{MANAGEMENT[0]}` in a third ({MANAGEMENT[1]}) that holds an organization (moto puts a request "
        "in the account whose IAM holds its access key). Nothing leaves "
        "127.0.0.1. Each `(y/n)` question of the CDK CLI is answered `y`, as the reader would. A command the "
        "emulator cannot serve fails and the next one runs; an `npx cdk deploy` that stops early is followed by the "
        "rehearsal's own `--exclusively` deploy of each of its stacks that did not fail (the CDK CLI's order among "
        "independent stacks varies, so one it reached may come again, unchanged).",
        "",
        *readers_spec(rehearsal),
        "## Commands, in order",
        "",
        "| # | block | command | exit | note |",
        "|---|---|---|---|---|",
    ]
    deploys = sum(1 for call in rehearsal.calls if call.block == "deploy")
    for number, call in enumerate(rehearsal.calls, 1):
        out.append(f"| {number} | {call.block} | {command(call, rehearsal)} | {call.rc} | {note(call, rehearsal)} |")
        if number == deploys:
            for extra in rehearsal.continued:
                block = "(rehearsal: the stacks of a failed deploy that did not fail)"
                shown = note(extra, rehearsal, questions=False)  # asks only where the failed deploy had not reached
                out.append(f"| + | {block} | {command(extra, rehearsal)} | {extra.rc} | {shown} |")
    if rehearsal.inner_calls:
        out += [
            "",
            "Made by those commands in turn (each under the same emulator):",
            "",
            "| inside | command | exit |",
            "|---|---|---|",
        ]
        out += [f"| `{call.block}` | {command(call, rehearsal)} | {call.rc} |" for call in rehearsal.inner_calls]
    if rehearsal.artifacts:
        out += [
            "",
            "`make upload-artifacts` ran with `NO_BUILD=1` and `ARTIFACTS_DIR` holding one small stand-in per upload "
            "(building the real wheels and binaries needs PyPI and several GB); where the cluster config tells the "
            "nodes to read them, the emulator's artifacts bucket then held:",
            "",
        ]
        out += [
            f"- {artifact.what}: `{artifact.uri}`" + ("" if artifact.present else " (missing!)")
            for artifact in rehearsal.artifacts
        ]
    if rehearsal.spec_created_by == "rehearsal":
        out += ["", "README has no step that creates `my-deployment.yaml`: the rehearsal copies `spec/default.yaml`."]
    for first, why in rehearsal.skipped_blocks:
        out += ["", f"Not run: the tear-down block that starts `{first}` ({why})."]
    out += [
        "",
        "## How far it got",
        "",
        "Every resource of the synthesized templates (and of the bootstrap stack `CDKToolkit`, the same in both "
        f"accounts), as the emulator holds it once the deploy commands ran: **{CREATED}** (DescribeStackResources "
        f"lists it with a physical id), **{NOT_MODELLED}** (the emulator lacks the type, or cannot run it), "
        f"**{NOT_CREATED}** (moto models it, but it needs a resource the emulator lacks) or **{CONDITION_FALSE}**.",
        "",
        "| stack | status | resource type | count | result | why |",
        "|---|---|---|---|---|---|",
    ]
    statuses = {name: status for stacks in rehearsal.stacks_after_deploy.values() for name, status in stacks.items()}
    for stack in rehearsal.templates:
        rows = sorted((r for r in rehearsal.resources if r.stack == stack), key=lambda r: (ORDER[r.result], r.type))
        for index, row in enumerate(rows):
            shown = f"`{stack}`" if index == 0 else ""
            status = statuses.get(stack, "absent") if index == 0 else ""
            out.append(f"| {shown} | {status} | `{row.type}` | {row.count} | {row.result} | {steady(row.why)} |")
    failed = {stack: why for stack, why in rehearsal.failures.items() if why}
    if failed:
        out += ["", "The emulator's reasons for the stacks that failed:", ""]
        out += [f"- `{stack}`: {steady(why)}" for stack, why in failed.items()]
    out += ["", *unmodelled.section(unmodelled.unmodelled(rehearsal.templates.items()), version("moto"), NO_AUTH)]
    groups = [(group.stack, group.restricts_egress, group.open_egress) for group in rehearsal.security_groups]
    out += unmodelled.opened_groups(groups)
    left = {account: sorted(stacks) for account, stacks in rehearsal.stacks_after_teardown.items()}
    kept: dict[tuple[str, bool], int] = {}
    for kind, _, present in rehearsal.retained:
        kept[(kind, present)] = kept.get((kind, present), 0) + 1
    out += [
        "",
        "## Tear-down",
        "",
        "Stacks left after the tear-down block: "
        + "; ".join(f"{account}: {', '.join(stacks) or 'none'}" for account, stacks in left.items())
        + " (`CDKToolkit` stays, as README says).",
        "",
        f"Termination protection: {steady(rehearsal.termination_protection.finding)}.",
        "",
        "Retained (DeletionPolicy `Retain`) and still in the emulator after the destroys, as README's table says: "
        + ", ".join(
            f"{count} x `{kind}`" + ("" if present else " (gone!)") for (kind, present), count in sorted(kept.items())
        )
        + ".",
        "",
        "README's removal of what is retained (its table's `remove` column): for each of those resources, the row "
        "for its type whose commands name the profile of its account, run with its id:",
        "",
        "| resource type | README's commands | account | exit | removed |",
        "|---|---|---|---|---|",
    ]
    removals: dict[tuple[str, str, str, str, bool], int] = {}
    for removal in rehearsal.removals:
        text = ", then ".join(f"`{command}`" for command in removal.commands) or "(none names this account's profile)"
        exit_status = ", ".join(str(rc) for rc in removal.rcs) + (f": {steady(removal.said)}" if removal.said else "")
        key = (removal.type, text, removal.account, exit_status, removal.gone)
        removals[key] = removals.get(key, 0) + 1
    for (kind, text, account, exit_status, gone), count in sorted(removals.items()):
        shown = f"`{kind}`" + (f" ({count})" if count > 1 else "")
        done = ("yes (scheduled for deletion)" if kind == "AWS::KMS::Key" else "yes") if gone else "no"
        out.append(f"| {shown} | {text} | {account} | {exit_status} | {done} |")
    out += [
        "",
        "## What the emulator lacks",
        "",
    ]
    out += [f"- {what}: {steady(why)}" for what, why in rehearsal.emulator_gaps]
    out += [
        "",
        "The fixes are in `tests/rehearsal/moto_server.py`, each with a probe of the pinned moto that a test keeps "
        "failing without it. Run it: `make rehearse` (a few minutes on 2 cores, most of it the app's synthesis, "
        "which every cdk command repeats; it prints each command and writes this file).",
        "",
    ]
    return "\n".join(out)
