"""The README's own deploy and tear-down blocks, picked by section heading: the rehearsal never retypes a command.

Blocks are the runbook test's (tests/runbook/blocks.py): a ```bash fence with its tag (```bash aws, ```bash
head-node); blocks tagged head-node run on the cluster and are never part of a deploy.
"""

from __future__ import annotations

import re

from tests.runbook.blocks import REPO, Block, blocks_in

SPEC_SECTION = "The deployment spec"
DEPLOY_SECTION = "Deploying for real"
TEARDOWN_SECTION = "Tearing down"
SPEC_FILE = "my-deployment.yaml"
# What a block of the deploy section must call to be part of the deploy (the access checks are not).
DEPLOY_WORDS = re.compile(r"\bcdk (bootstrap|deploy)\b|\bspec\.phase_two\b|\bllm-phase-two\b|\bmy-deployment\.yaml\b")
NOT_DEPLOY_TAG = "head-node"
# A README step that creates the user's spec from the example (`cp spec/default.yaml my-deployment.yaml`).
CREATES_SPEC = re.compile(rf"^\s*cp\s+\S+\s+{re.escape(SPEC_FILE)}\s*$", re.M)


def section(markdown: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}[ \t]*\n(.*?)(?=^## |\Z)", markdown, flags=re.S | re.M)
    if not match:
        raise ValueError(f"README has no section '## {heading}'")
    return match.group(1)


def bash_blocks(markdown: str) -> list[Block]:
    return [block for block in blocks_in(REPO / "README.md", markdown) if block.language == "bash"]


def deploy_blocks(markdown: str) -> list[Block]:
    """The spec section's block that creates the user's spec, then the deploy section's blocks that bootstrap,
    deploy or run phase two, in README order."""
    try:
        spec_section = section(markdown, SPEC_SECTION)
    except ValueError:  # then the rehearsal says README has no step that creates the spec
        spec_section = ""
    creating = [block for block in bash_blocks(spec_section) if CREATES_SPEC.search(block.body)]
    return creating + [
        block
        for block in bash_blocks(section(markdown, DEPLOY_SECTION))
        if DEPLOY_WORDS.search(block.body) and block.tag != NOT_DEPLOY_TAG
    ]


def teardown_blocks(markdown: str) -> list[Block]:
    """The tear-down section's blocks that destroy stacks (the accounting database's block is not one)."""
    return [block for block in bash_blocks(section(markdown, TEARDOWN_SECTION)) if "cdk destroy" in block.body]


def creates_spec(blocks: list[Block]) -> bool:
    return any(CREATES_SPEC.search(block.body) for block in blocks)


RETAINED_TABLE = "Retained on purpose"


def rehearsed_texts(markdown: str) -> list[str]:
    """Every command text of README the rehearsal runs: its deploy and tear-down blocks, its retained table's commands."""
    blocks = deploy_blocks(markdown) + teardown_blocks(markdown)
    return [block.body for block in blocks] + [command for row in removal_rows(markdown) for command in row]


# A command written inline, outside a block: the AWS CLI's and the repository's own (`python -m cluster.empty_bucket`).
INLINE_COMMAND = re.compile(r"`((?:aws|python -m) [^`]+)`")


def removal_rows(markdown: str) -> list[list[str]]:
    """The commands of each row of the tear-down section's table of what the stacks retain (its `remove` column), in
    the row's order."""
    teardown = section(markdown, TEARDOWN_SECTION)
    start = teardown.find(RETAINED_TABLE)
    if start < 0:
        raise ValueError(f"README's tear-down has no '{RETAINED_TABLE}' table")
    rows = []
    for line in teardown[start:].splitlines()[1:]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    remove_column = [row.rsplit("|", 2)[1] for row in rows[2:]]  # after the header and its rule
    return [found for cell in remove_column if (found := INLINE_COMMAND.findall(cell))]


WHAT_TO_CHANGE = "What to change in"
FIELD = re.compile(r"`([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*|\[\*\])*)`")


def fields_to_change(markdown: str) -> list[str]:
    """The spec fields README's spec section tells the reader to change (its table's first column), in order."""
    spec_section = section(markdown, SPEC_SECTION)
    start = spec_section.find(WHAT_TO_CHANGE)
    if start < 0:
        raise ValueError(f"README's spec section has no '{WHAT_TO_CHANGE}' table")
    rows = []
    for line in spec_section[start:].splitlines()[1:]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    return [field for row in rows[2:] for field in FIELD.findall(row.split("|")[1])]
