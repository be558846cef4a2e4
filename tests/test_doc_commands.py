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
from tests.environments import ready
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


# ---- logging in as one's own account (issue 43) -----------------------------------------------------------------
CONNECT_DOCS = [REPO / "README.md", REPO / "docs" / "cluster.md"]
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing answers, so only the connection may fail


def start_session_commands() -> list[tuple[str, list[str]]]:
    """Every `aws ssm start-session` README and docs/cluster.md give for logging in (blocks and inline)."""
    return [
        (path.name, shlex.split(command))
        for path in CONNECT_DOCS
        for command in commands_in(path.read_text(encoding="utf-8"))
        if command.startswith("aws ssm start-session")
    ]


def operator_profile() -> str:
    """README's `[profile operator]` block: what each person puts in ~/.aws/config."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    (profile,) = re.findall(r"^```text\n(\[profile operator\]\n.*?)^```", text, flags=re.S | re.M)
    return str(profile)


def option(argv: list[str], name: str) -> str:
    assert name in argv, argv
    return argv[argv.index(name) + 1]


@pytest.mark.synth
def test_every_login_goes_through_the_run_as_document_the_stack_creates(default_assembly: Assembly) -> None:
    """README's connect step and docs/cluster.md's log in as the caller's own account: each start-session names the
    Session document the identity stack synthesizes (run-as on), with the operator profile, whose credentials carry
    the principal tag the document's run-as reads and the operator role's trust lets a caller pass."""
    (document,) = default_assembly.resources("identity", "AWS::SSM::Document").values()
    name = document["Properties"]["Name"]
    assert document["Properties"]["Content"]["inputs"]["runAsEnabled"] is True
    commands = start_session_commands()
    assert {where for where, _ in commands} == {"README.md", "cluster.md"}, commands
    assert [where for where, argv in commands if option(argv, "--document-name") != name] == []
    assert {option(argv, "--profile") for _, argv in commands} == {"operator"}
    trust = json.dumps(default_assembly.resources("identity", "AWS::IAM::Role"))
    tag = "SSMSessionRunAs"
    assert f"aws:RequestTag/{tag}" in trust and f"${{aws:PrincipalTag/{tag}}}" in trust
    (credentials,) = [line for line in operator_profile().splitlines() if line.startswith("credential_process")]
    assume = shlex.split(credentials.split("=", 1)[1])
    assert assume[:3] == ["aws", "sts", "assume-role"]
    spec = default_assembly.spec
    operator = spec.role_name("operator")
    assert operator in {
        role["Properties"]["RoleName"] for role in default_assembly.resources("identity", "AWS::IAM::Role").values()
    }
    assert option(assume, "--role-arn") == f"arn:aws:iam::{spec.accounts.compute}:role/{operator}"
    assert option(assume, "--tags") == f"Key={tag},Value={option(assume, '--role-session-name')}"


def test_the_operator_profile_and_the_login_parse_with_the_aws_cli(tmp_path: Path) -> None:
    """README's operator profile as a reader's ~/.aws/config and its login command, run by the real AWS CLI against
    an endpoint nothing listens on: the login's arguments parse, the CLI runs the profile's credential_process (the
    AWS CLI again, whose assume-role parses and gets as far as STS), and its query turns AssumeRole's answer into
    the credential_process format (Version 1 and the four fields)."""
    aws = ready("awscli-venv") / "bin" / "aws"
    config = tmp_path / "config"
    credentials = tmp_path / "credentials"
    config.write_text(operator_profile() + "\n[profile compute]\nregion = us-east-1\n")
    credentials.write_text("[compute]\naws_access_key_id = doc-test-key\naws_secret_access_key = doc-test-secret\n")
    env = {
        "PATH": f"{aws.parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "AWS_CONFIG_FILE": str(config),
        "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
        "AWS_ENDPOINT_URL": UNREACHABLE,
        "AWS_MAX_ATTEMPTS": "1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    (readme_login,) = [argv for where, argv in start_session_commands() if where == "README.md" and "$HEAD" in argv]
    argv = [str(aws), *[("i-0123456789abcdef0" if arg == "$HEAD" else arg) for arg in readme_login[1:]]]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert "custom-process" in result.stderr and "Could not connect to the endpoint URL" in result.stderr, result.stderr
    assert f"{UNREACHABLE}/" in result.stderr  # the inner call is STS's, to the same unreachable endpoint
    (line,) = [line for line in operator_profile().splitlines() if line.startswith("credential_process")]
    query = option(shlex.split(line.split("=", 1)[1]), "--query")
    answer = {"Credentials": {"AccessKeyId": "AKIA", "SecretAccessKey": "s", "SessionToken": "t",
                              "Expiration": "2026-11-30T03:00:00+00:00"}}  # fmt: skip
    script = "import jmespath, json, sys; print(json.dumps(jmespath.search(sys.argv[1], json.loads(sys.argv[2]))))"
    python = aws.parent / "python"
    shaped = subprocess.run([str(python), "-c", script, query, json.dumps(answer)], capture_output=True, text=True)
    assert json.loads(shaped.stdout) == {"Version": 1, **answer["Credentials"]}, shaped.stderr
