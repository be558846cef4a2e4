"""The commands the docs give (README.md, docs/*.md, the shipped specs' comments) and the update plan prints are
runnable as written: the CDK CLI only through `npx cdk` (this repo pins it in node_modules) and with the user's spec,
and every pcluster command line accepted by ParallelCluster's own CLI parser."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from cluster.update_plan import runbook
from cluster.update_policy import Action
from spec import load_spec
from tests.cluster.conftest import pcluster_venv  # noqa: F401  (the isolated ParallelCluster venv)
from tests.stacks.conftest import Assembly
from training.prepare import data_prefix_of
from training.sft.prepare import tokens_prefix as sft_data_prefix_of

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SPECS = [REPO / "spec" / "default.yaml", *sorted((REPO / "spec" / "examples").glob("*.yaml"))]
CDK_COMMAND = re.compile(
    r"(?<![\w/.-])(?P<npx>npx (?:--?[\w-]+ )*)?cdk (?P<sub>synth|deploy|diff|ls|list|destroy|bootstrap|watch)\b"
)


def commands_in(text: str) -> list[str]:
    """The command text of a markdown file: ```bash blocks, tagged or not (continuation lines joined) and inline code
    spans (one that wraps is one command)."""
    found = []
    for block in re.findall(r"^ *```bash[^\n]*\n(.*?)^ *```", text, flags=re.S | re.M):
        found += [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    # An inline span may wrap onto the next line of its paragraph (never across a blank line).
    spans = re.findall(r"(?<!`)`((?:[^`\n]|\n(?![ \t]*\n))+)`(?!`)", text)
    found += [" ".join(span.split()) for span in spans]
    return found


def plan_steps() -> list[str]:
    spec = load_spec()
    return [step for action in Action for step in runbook(action, spec, any_change=True)]


def shipped_commands() -> list[tuple[str, str]]:
    """(where, command text) for every doc command, the specs' comments and the update plan's steps."""
    out = [(path.name, command) for path in DOCS for command in commands_in(path.read_text(encoding="utf-8"))]
    for path in SPECS:
        out += [(path.name, line) for line in path.read_text().splitlines() if line.lstrip().startswith("#")]
    out += [("cluster.update_plan", step) for step in plan_steps()]
    return out


def test_the_cdk_cli_is_always_npx_cdk() -> None:
    bare = [(where, text) for where, text in shipped_commands() for m in CDK_COMMAND.finditer(text) if not m["npx"]]
    assert bare == []


def test_every_cdk_command_that_runs_the_app_names_a_spec() -> None:
    """A cdk command with arguments (not a bare mention such as `npx cdk deploy`) that synthesizes the app gets
    `-c spec=...`: without it CDK silently uses the embedded example spec."""
    missing = []
    for where, text in shipped_commands():
        for match in CDK_COMMAND.finditer(text):
            rest = text[match.end() :].split(";")[0].split("   (")[0].split("#")[0].split()
            if match["sub"] != "bootstrap" and rest and not re.search(r"(-c|--context) spec=", " ".join(rest)):
                missing.append((where, text))
    assert missing == []


def test_the_update_plan_recipe_synthesizes_each_checkout_with_its_spec() -> None:
    text = (REPO / "docs" / "cluster.md").read_text()
    (block,) = [b for b in re.findall(r"^```bash[^\n]*\n(.*?)^```", text, flags=re.S | re.M) if "--old-cdk-out" in b]
    synths = re.findall(r"npx cdk synth ([^;\n]*)", block)
    assert len(synths) == 2, block
    plan = next(line for line in block.splitlines() if "cluster.update_plan" in line).split()
    old_spec, new_spec = plan[3], plan[4]
    old_out, new_out = plan[plan.index("--old-cdk-out") + 1], plan[plan.index("--new-cdk-out") + 1]
    assert f"-c spec={old_spec}" in synths[0] and f"-o {old_out}" in synths[0], synths[0]
    assert f"-c spec={new_spec}" in synths[1] and f"-o {new_out}" in synths[1], synths[1]


def pcluster_commands() -> list[tuple[str, list[str]]]:
    """Every pcluster command line with arguments in the docs and the update plan (not bare mentions)."""
    found = []
    for where, text in shipped_commands():
        text = text.split("   (")[0]  # the update plan's steps end with a note in parentheses
        for command in re.findall(r"(?:^|[;&|] *)(?:[A-Z_]+=\S+ +)*(pcluster [^;&|`]*)", text):
            argv = shlex.split(command, comments=True)
            if len(argv) > 2:
                found.append((where, argv[1:]))
    return found


@pytest.mark.pcluster
def test_every_pcluster_command_parses_with_parallelclusters_own_cli(pcluster_venv: Path) -> None:  # noqa: F811
    commands = pcluster_commands()
    assert any(argv[0] == "update-compute-fleet" for _, argv in commands)
    result = subprocess.run(
        [str(pcluster_venv / "bin" / "python"), str(REPO / "cluster" / "verify" / "pcluster" / "parse_commands.py")],
        input=json.dumps({"commands": [argv for _, argv in commands]}),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    problems = [
        (where, " ".join(argv), problem)
        for (where, argv), problem in zip(commands, json.loads(result.stdout), strict=True)
        if problem is not None
    ]
    assert problems == []


# `aws` calls that make what a stack already makes from the spec: run beside a deploy they make a second one (or
# fail on its name), which no stack update or destroy then knows about.
STACK_MADE = {
    ("amp", "create-workspace"): "AWS::APS::Workspace",
    ("amp", "create-rule-groups-namespace"): "AWS::APS::RuleGroupsNamespace",
    ("sns", "create-topic"): "AWS::SNS::Topic",
    ("kms", "create-key"): "AWS::KMS::Key",
    ("ssm", "put-parameter"): "AWS::SSM::Parameter",
    ("logs", "create-log-group"): "AWS::Logs::LogGroup",
    ("iam", "create-role"): "AWS::IAM::Role",
    ("ec2", "create-vpc"): "AWS::EC2::VPC",
    ("ec2", "create-vpc-endpoint"): "AWS::EC2::VPCEndpoint",
    ("ec2", "create-security-group"): "AWS::EC2::SecurityGroup",
    ("s3api", "create-bucket"): "AWS::S3::Bucket",
    ("s3control", "create-access-point"): "AWS::S3::AccessPoint",
}
AWS_CALL = re.compile(r"(?<![\w-])aws +(?P<service>[a-z0-9-]+) +(?P<operation>[a-z0-9-]+)")


def test_no_doc_command_creates_what_a_stack_creates() -> None:
    made = [
        (where, f"aws {m['service']} {m['operation']}", STACK_MADE[m["service"], m["operation"]])
        for where, text in shipped_commands()
        for m in AWS_CALL.finditer(text)
        if (m["service"], m["operation"]) in STACK_MADE
    ]
    assert made == []


def test_a_doc_command_creating_a_rule_groups_namespace_is_found() -> None:
    text = "the namespace (`aws amp create-rule-groups-namespace --workspace-id WS --name\nx --data fileb://a.yaml`)\n"
    calls = [(m["service"], m["operation"]) for command in commands_in(text) for m in AWS_CALL.finditer(command)]
    assert calls == [("amp", "create-rule-groups-namespace")] and calls[0] in STACK_MADE


@pytest.mark.synth
def test_what_the_docs_may_not_create_is_what_the_default_deployment_creates(default_assembly: Assembly) -> None:
    types = {resource["Type"] for t in default_assembly.templates.values() for resource in t["Resources"].values()}
    assert sorted(set(STACK_MADE.values()) - types) == []


DATA_PREFIX = re.compile(r"--data-prefix[ =]+(?P<value>[^\s;|&)]+)")


def test_every_data_prefix_is_a_dataset_llm_prepare_writes() -> None:
    """A job reads `<output prefix>_text_document.{bin,idx}` (or, fine-tuning, `llm-prepare --sft`'s
    `<output prefix>_sft_tokens.{bin,idx}`): a --data-prefix without one of those endings names no file."""
    suffixes = tuple(prefix("x").name.removeprefix("x") for prefix in (data_prefix_of, sft_data_prefix_of))
    wrong = [
        (where, value)
        for where, text in shipped_commands()
        for value in (m["value"].strip("'\"") for m in DATA_PREFIX.finditer(text))
        if not value.endswith(suffixes)
    ]
    assert wrong == []
    assert [m["value"] for m in DATA_PREFIX.finditer("llm-submit --data-prefix /fsx/data/pretraining")] == [
        "/fsx/data/pretraining"
    ]
