"""The rehearsal: README's deploy and tear-down blocks, run by bash in order against moto's server, with the real CDK
CLI (`npx cdk`), the AWS CLI v1 (.awscli-venv) and phase two; then what the emulator holds, resource by resource.

The blocks run in a scratch copy of the repository root (symlinks to the repository's files; its own cdk.json,
my-deployment.yaml, cdk.out and network-outputs.json), HOME and AWS profiles `compute` and `data` of the spec's two
accounts. Bash runs each block without -e, as a reader types it line by line: a command the emulator cannot serve
fails, is named, and the next one runs. Nothing is sent beyond 127.0.0.1 (AWS_ENDPOINT_URL; npm offline).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from spec import DEFAULT_SPEC_PATH, DeploymentSpec, load_spec
from spec.phase_two import NETWORK_OUTPUTS
from tests.rehearsal import readme, user_spec
from tests.rehearsal.emulator import STOP_TIMEOUT_S, Server, moto_server, session, write_profiles
from tests.rehearsal.shim import DRY_OUTPUT
from tests.runbook.blocks import Block

REPO = Path(__file__).resolve().parents[2]
CREATED = "created"
NOT_MODELLED = "not modelled"
NOT_CREATED = "not created"  # modelled, but it needs a resource the emulator lacks, or the stack failed before it
CONDITION_FALSE = "not in this deployment"  # a Condition of the template is false (cdk bootstrap's options)
TOOLKIT = "CDKToolkit"
# The organization's management account of README's guardrail step (profile `management`): neither of the spec's two
# accounts; any id will do, the spec does not name it.
MANAGEMENT = ("management", "333333333333")
# A block is a few cdk commands, each synthesizing the app (about 30 s on 2 idle cores): a ceiling for a hung CLI.
BLOCK_TIMEOUT_S = 1800
CDK_OPTIONS_WITH_VALUE = {"-c", "--context", "--profile", "--outputs-file", "-o", "--output", "--region"}
SHIM = "#!{python}\nimport sys\nsys.path.insert(0, {repo!r})\nfrom tests.rehearsal.shim import main\nmain()\n"
# What moto says when it could not run a Lambda function (it runs them only in docker).
NO_DOCKER = "error running docker"
# What moto says for an action it does not implement.
NO_TERMINATION_PROTECTION = "The update_termination_protection action has not been implemented"
# Retained resources and how the emulator shows they are still there.
RETAINED_TYPES = ("AWS::S3::Bucket", "AWS::KMS::Key", "AWS::Logs::LogGroup")
# README's removal commands (by their aws service and operation): the retained type each removes, its placeholder.
# A row of README's table may empty a bucket first (cluster.empty_bucket); its placeholder is the row's.
REMOVES = {
    ("s3api", "delete-bucket"): ("AWS::S3::Bucket", "NAME"),
    ("kms", "schedule-key-deletion"): ("AWS::KMS::Key", "KEY_ID"),
    ("logs", "delete-log-group"): ("AWS::Logs::LogGroup", "NAME"),
}
NOT_IMPLEMENTED = re.compile(r"The (\w+) action has not been implemented")
ARTIFACTS = "artifacts"  # the live run's ARTIFACTS_DIR, under its root


@dataclass
class Call:
    block: str  # "deploy", "tear-down" or "continued" (the rehearsal's own, after a failed deploy)
    argv: list[str]
    rc: int
    seconds: float
    answered: list[str]
    tail: list[str]
    log: str


@dataclass
class ResourceRow:
    stack: str
    account: str
    type: str
    count: int
    result: str  # CREATED, NOT_MODELLED, NOT_CREATED or CONDITION_FALSE
    why: str = ""


@dataclass
class Removal:
    type: str
    account: str
    commands: list[str]  # README's row for the type and the account's profile, with its placeholder; [] if none
    rcs: list[int]  # each command's exit status with the resource's id, up to the first that fails
    gone: bool  # the emulator no longer holds it (a KMS key: scheduled for deletion)
    said: str = ""  # the last line the failing command printed


@dataclass
class Artifact:
    what: str  # cluster.artifacts' name of the upload
    uri: str  # the stand-in's key in the folder the cluster config hands the nodes
    present: bool  # the emulator's bucket holds it once the deploy ran


@dataclass
class HeldGroup:
    stack: str
    logical_id: str
    restricts_egress: bool  # the template lists its egress rules (SecurityGroupEgress): all else is denied
    open_egress: bool  # the emulator holds an egress rule to 0.0.0.0/0 on every protocol


@dataclass
class Protection:
    enforced: bool  # the emulator refuses to delete a stack with termination protection on
    destroy_refused: bool  # ... and the rehearsal saw it refuse one
    finding: str


class UnknownLiteral(Exception):
    """README's commands name something of the example spec that the rehearsal cannot substitute; one line each."""


@dataclass
class Rehearsal:
    workdir: Path
    spec_path: Path
    spec_created_by: str  # "README" or "rehearsal"
    edits: list[tuple[str, str, str]] = field(default_factory=list)  # (field, the example's value, the reader's)
    substitutions: list[tuple[user_spec.Substitution, int]] = field(default_factory=list)  # and times replaced
    calls: list[Call] = field(default_factory=list)
    expected_argv: list[list[str]] = field(default_factory=list)
    skipped_blocks: list[tuple[str, str]] = field(default_factory=list)  # (first line, why)
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)  # stack name -> template
    accounts: dict[str, str] = field(default_factory=dict)  # stack name -> account
    stacks_after_deploy: dict[str, dict[str, str]] = field(default_factory=dict)  # account -> stack -> status
    stacks_after_teardown: dict[str, dict[str, str]] = field(default_factory=dict)
    resources: list[ResourceRow] = field(default_factory=list)
    physical_ids: dict[str, set[str]] = field(default_factory=dict)  # resource type -> ids the emulator created
    network_outputs: dict[str, str] = field(default_factory=dict)
    retained: list[tuple[str, str, bool]] = field(default_factory=list)  # (type, id, still there)
    termination_protection: Protection = field(default_factory=lambda: Protection(False, False, ""))
    emulator_gaps: list[tuple[str, str]] = field(default_factory=list)  # (what, evidence)
    continued: list[Call] = field(default_factory=list)  # the rehearsal's own: the rest of a failed deploy command
    failures: dict[str, str] = field(default_factory=dict)  # stack -> the emulator's reason of its failure
    removals: list[Removal] = field(default_factory=list)  # README's removal of what the stacks retain
    artifacts: list[Artifact] = field(default_factory=list)  # the stand-ins `make upload-artifacts` uploaded
    inner_calls: list[Call] = field(default_factory=list)  # the calls the README's calls made (make's aws s3 sync)
    not_implemented: set[str] = field(default_factory=set)  # actions moto answered "has not been implemented"
    server_exit: int | None = None
    held_templates: dict[str, dict[str, Any]] = field(default_factory=dict)  # stack -> its template in the emulator
    security_groups: list[HeldGroup] = field(default_factory=list)  # each one the emulator created, as it holds it
    buckets: dict[str, set[str]] = field(default_factory=dict)  # account -> its buckets once the deploy ran


# -- the scratch repository and the shell ---------------------------------------------------------------------------


def scratch_repo(root: Path) -> Path:
    """A directory that looks like the repository root to the README's commands, writing only into itself."""
    repo = root / "repo"
    repo.mkdir()
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    names = {line.split("/")[0] for line in tracked.splitlines()} | {"node_modules", ".venv"}
    for name in sorted(names - {"cdk.json", ".git"}):
        if (REPO / name).exists():
            (repo / name).symlink_to(REPO / name)
    shutil.copy(REPO / "cdk.json", repo / "cdk.json")
    return repo


def shell_env(root: Path, server: Server | None) -> dict[str, str]:
    bin_dir = root / "bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        for tool in ("npx", "aws", "python", "make"):
            (bin_dir / tool).write_text(SHIM.format(python=sys.executable, repo=str(REPO)))
            (bin_dir / tool).chmod(0o755)
    npx, make = shutil.which("npx"), shutil.which("make")
    if make is None:
        raise AssertionError("make is not on PATH: the rehearsal runs the README's `make upload-artifacts`")
    if npx is None:
        raise AssertionError("npx (Node.js) is not on PATH: the rehearsal runs the README's `npx cdk` commands")
    if not (REPO / ".awscli-venv" / "bin" / "aws").exists():
        raise AssertionError("no .awscli-venv/bin/aws: `make awscli-venv` builds the AWS CLI the README's commands use")
    env = {
        "PATH": f"{bin_dir}:{Path(npx).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(root / "home"),
        "LANG": "C.UTF-8",
        "TERM": "xterm",
        "FORCE_COLOR": "0",
        "REHEARSAL_CALLS": str(root / "calls.jsonl"),
        "REHEARSAL_REAL_NPX": npx,
        "REHEARSAL_REAL_AWS": str(REPO / ".awscli-venv" / "bin" / "aws"),
        "REHEARSAL_REAL_PYTHON": sys.executable,
        "REHEARSAL_REAL_MAKE": make,
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "CDK_DISABLE_VERSION_CHECK": "1",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "CDK_NOTICES": "false",  # the CLI's --notices: no fetch of cli.cdk.dev-tools.aws.dev's notices
        "npm_config_offline": "true",
        "npm_config_update_notifier": "false",
        "npm_config_fund": "false",
        "AWS_CONFIG_FILE": str(root / "aws" / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(root / "aws" / "credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    if server is not None:
        # `make upload-artifacts` uploads stand-ins (stand_in_artifacts): the real ones need PyPI and several GB.
        env["NO_BUILD"] = "1"
        env["ARTIFACTS_DIR"] = str(root / ARTIFACTS)
        port = server.endpoint.rsplit(":", 1)[1]
        env["AWS_ENDPOINT_URL"] = server.endpoint
        # The template URL the CDK CLI hands CloudFormation: moto's CloudFormation reads it from moto's S3 when the
        # host is `localhost` (it takes the first label of any other host for the bucket's name).
        env["AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION"] = f"http://localhost:{port}"
    else:
        env["REHEARSAL_DRY"] = "1"
    (root / "home").mkdir(exist_ok=True)
    return env


def run_group(argv: list[str], cwd: Path, env: dict[str, str], what: str) -> int:
    """Run argv in a process group of its own and wait for it to exit; whatever still runs in the group when it
    exits, times out or this process is interrupted is terminated (the shims pass that on to the CDK CLI)."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, start_new_session=True)
    try:
        return process.wait(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"waited {BLOCK_TIMEOUT_S} s for {what} to finish") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_TIMEOUT_S)


def run_block(block: Block, cwd: Path, env: dict[str, str]) -> int:
    first = block.body.strip().splitlines()[0]
    return run_group(["bash", "-u", "-o", "pipefail", "-c", block.script()], cwd, env, f"the README block '{first}'")


def read_calls(path: Path, inner: bool = False) -> list[dict[str, Any]]:
    """The calls of the README's commands (inner: those they made in turn, such as make's `aws s3 sync`)."""
    records = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [record for record in records if ("inside" in record) == inner]


def stand_in_artifacts(spec: DeploymentSpec, build_dir: Path) -> list[tuple[str, Path, str]]:
    """One small file per upload of `make upload-artifacts` where its build would be (what it names, the file, the
    key it must land at): building the real wheels and binaries needs PyPI and several GB."""
    from cluster.artifacts import upload_plan

    made = []
    for upload in upload_plan(spec, build_dir):
        upload.source.mkdir(parents=True, exist_ok=True)
        name = upload.pattern.replace("*", "rehearsal-stand-in")
        (upload.source / name).write_text(f"a stand-in for the {upload.what} (tests/rehearsal)\n")
        made.append((upload.what, upload.source / name, upload.destination.uri + name))
    return made


def uploaded(accounts: Accounts, account: str, uri: str) -> bool:
    from botocore.exceptions import ClientError

    bucket, _, key = uri.removeprefix("s3://").partition("/")
    try:
        accounts.client(account, "s3").head_object(Bucket=bucket, Key=key)
    except ClientError:
        return False
    return True


def ran_as_written(calls: list[Call], expected: list[list[str]]) -> bool:
    """The calls are the dry run's, word for word, but where the dry run had a word made of a call's output (the
    policy id of `POLICY=$(aws organizations create-policy ...)`): that word is the live call's own."""

    def same(live: list[str], dry: list[str]) -> bool:
        return len(live) == len(dry) and all(a == b or DRY_OUTPUT in b for a, b in zip(live, dry, strict=True))

    return len(calls) == len(expected) and all(same(c.argv, e) for c, e in zip(calls, expected, strict=True))


def dry_run(blocks: list[Block], root: Path) -> list[list[str]]:
    """The argv of every npx, aws and python call the blocks make, without running any (the expected sequence)."""
    root.mkdir()
    cwd = scratch_repo(root)
    env = shell_env(root, None)
    for block in blocks:
        run_block(block, cwd, env)
    return [call["argv"] for call in read_calls(root / "calls.jsonl")]


# -- what the emulator holds ----------------------------------------------------------------------------------------


class Accounts:
    """boto3 sessions of the profiles' accounts in the emulator."""

    def __init__(self, endpoint: str, credentials: Path, spec: DeploymentSpec) -> None:
        import configparser

        parsed = configparser.ConfigParser()
        parsed.read(credentials)
        self.endpoint = endpoint
        self.region = spec.region
        self.by_account = {
            spec.accounts.compute: session(
                endpoint,
                (parsed["compute"]["aws_access_key_id"], parsed["compute"]["aws_secret_access_key"], None),
                spec.region,
            ),
            spec.accounts.data: session(
                endpoint,
                (parsed["data"]["aws_access_key_id"], parsed["data"]["aws_secret_access_key"], None),
                spec.region,
            ),
        }

    def client(self, account: str, service: str) -> Any:
        return self.by_account[account].client(service, endpoint_url=self.endpoint)

    def stacks(self) -> dict[str, dict[str, str]]:
        found: dict[str, dict[str, str]] = {}
        for account in self.by_account:
            stacks = self.client(account, "cloudformation").describe_stacks()["Stacks"]
            found[account] = {stack["StackName"]: stack["StackStatus"] for stack in stacks}
        return found


class _AnyTagLoader(yaml.SafeLoader):
    """CloudFormation YAML: the short forms (!Ref, !Sub, ...) read as plain values."""


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)  # type: ignore[arg-type]


_AnyTagLoader.add_multi_constructor("!", _any_tag)


def parse_template(body: Any) -> dict[str, Any]:
    if isinstance(body, dict):
        return body
    parsed: dict[str, Any] = yaml.load(body, Loader=_AnyTagLoader)
    return parsed


def app_templates(cdk_out: Path) -> tuple[dict[str, dict[str, Any]], dict[str, str], set[str]]:
    """The stacks of the cloud assembly the README's last deploy synthesized: templates and accounts by stack name,
    and the stacks with termination protection."""
    manifest = json.loads((cdk_out / "manifest.json").read_text())
    templates: dict[str, dict[str, Any]] = {}
    accounts: dict[str, str] = {}
    protected: set[str] = set()
    for name, artifact in manifest["artifacts"].items():
        if artifact["type"] == "aws:cloudformation:stack":
            templates[name] = json.loads((cdk_out / artifact["properties"]["templateFile"]).read_text())
            accounts[name] = artifact["environment"].split("/")[2]
            if artifact["properties"].get("terminationProtection"):
                protected.add(name)
    return templates, accounts, protected


def moto_models() -> set[str]:
    from moto.cloudformation.parsing import get_model_map

    return set(get_model_map())


def references(value: Any) -> set[str]:
    """Logical ids a template value names: Ref, Fn::GetAtt, DependsOn and the ${Id} of Fn::Sub."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "Fn::GetAtt":
                found.add(inner.split(".")[0] if isinstance(inner, str) else inner[0])
            elif key == "DependsOn":
                found |= {inner} if isinstance(inner, str) else set(inner)
            elif key == "Fn::Sub":
                text = inner if isinstance(inner, str) else inner[0]
                found |= {name.split(".")[0] for name in re.findall(r"\$\{([^}!]+)\}", text)}
                found |= references(inner)
            else:
                found |= references(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= references(inner)
    return found


def classify(
    stack: str,
    account: str,
    template: dict[str, Any],
    listed: dict[str, dict[str, Any]],
    server_log: str,
) -> list[ResourceRow]:
    """One row per resource type (and outcome) of the template: what the emulator made of its resources."""
    models = moto_models()
    resources: dict[str, Any] = template["Resources"]
    outcome: dict[str, tuple[str, str]] = {}

    def judge(logical_id: str, seen: frozenset[str] = frozenset()) -> tuple[str, str]:
        if logical_id in outcome:
            return outcome[logical_id]
        resource = resources[logical_id]
        kind = resource["Type"]
        entry = listed.get(logical_id)
        if kind == "Custom::PclusterCluster":
            verdict = (
                NOT_MODELLED,
                "ParallelCluster's cluster: its provider is the nested stack, which the emulator cannot create",
            )
        elif kind.startswith("Custom::"):
            verdict = (
                NOT_MODELLED,
                "a Lambda-backed custom resource: moto runs a provider's code only in docker (absent here: its server "
                f"logged '{NO_DOCKER}'), so the provider never answers"
                if NO_DOCKER in server_log
                else "a Lambda-backed custom resource whose provider never answered in the emulator",
            )
        elif entry is not None and entry.get("PhysicalResourceId"):
            verdict = (CREATED, "")
        elif entry is not None:
            verdict = (CREATED, "moto lists it without a physical id")
        elif kind not in models:
            verdict = (NOT_MODELLED, "moto's CloudFormation has no model for this type (it skips it)")
        elif kind == "AWS::CloudFormation::Stack":
            verdict = (NOT_MODELLED, nested_stack_why(resource))
        elif "Condition" in resource:
            verdict = (CONDITION_FALSE, f"its Condition {resource['Condition']} is false")
        else:
            blockers = []
            for name in sorted(references(resource) & set(resources) - seen - {logical_id}):
                result, _ = judge(name, seen | {logical_id})
                if result != CREATED:
                    blockers.append(f"{name} ({resources[name]['Type']}, {result})")
            verdict = (
                NOT_CREATED,
                f"it needs {', '.join(blockers)}" if blockers else "the stack failed before it (its reason below)",
            )
        outcome[logical_id] = verdict
        return verdict

    results: Counter[tuple[str, str, str]] = Counter()
    for logical_id, resource in resources.items():
        results[(resource["Type"], *judge(logical_id))] += 1
    return [
        ResourceRow(stack, account, kind, count, result, why) for (kind, result, why), count in sorted(results.items())
    ]


def nested_stack_why(resource: dict[str, Any]) -> str:
    url = json.dumps(resource.get("Properties", {}).get("TemplateURL", ""))
    if "aws-parallelcluster" in url:
        return (
            "ParallelCluster's provider: its template and Lambda code are in ParallelCluster's public S3 bucket, which "
            "the emulator does not hold (and nothing here reaches the internet)"
        )
    return "a nested stack whose template the emulator's S3 does not hold"


def stack_failure(accounts: Accounts, account: str, stack: str, status: str, protected: bool, server_log: str) -> str:
    """Why the stack is not complete in the emulator: its last *_FAILED event's reason, or why its change set never
    ran ('' when it is complete)."""
    events = accounts.client(account, "cloudformation").describe_stack_events(StackName=stack)["StackEvents"]
    for event in events:  # newest first
        if event["ResourceStatus"].endswith("_FAILED"):
            return str(event.get("ResourceStatusReason") or event["ResourceStatus"])
    if status == "REVIEW_IN_PROGRESS":
        if protected and NO_TERMINATION_PROTECTION in server_log:
            return (
                "its change set never ran: the stack has termination protection, which the CDK CLI sets "
                "(UpdateTerminationProtection) before it executes the change set, and moto lacks that action "
                f"(HTTP 500, '{NO_TERMINATION_PROTECTION}')"
            )
        return "its change set never ran"
    return ""


def security_groups(
    accounts: Accounts, account: str, stack: str, template: dict[str, Any], listed: dict[str, dict[str, Any]]
) -> list[HeldGroup]:
    """Each security group of the template the emulator created: whether the template restricts its egress and
    whether the emulator holds it open to everything."""
    ec2 = accounts.client(account, "ec2")
    held = []
    for logical_id, resource in template["Resources"].items():
        physical = (listed.get(logical_id) or {}).get("PhysicalResourceId")
        if resource["Type"] != "AWS::EC2::SecurityGroup" or not physical:
            continue
        group = ec2.describe_security_groups(GroupIds=[physical])["SecurityGroups"][0]
        everything = any(
            rule.get("IpProtocol") == "-1" and any(r.get("CidrIp") == "0.0.0.0/0" for r in rule.get("IpRanges", []))
            for rule in group.get("IpPermissionsEgress", [])
        )
        restricts = "SecurityGroupEgress" in (resource.get("Properties") or {})
        held.append(HeldGroup(stack, logical_id, restricts, everything))
    return held


def stack_resources(accounts: Accounts, account: str, stack: str) -> dict[str, dict[str, Any]]:
    cfn = accounts.client(account, "cloudformation")
    listed = cfn.describe_stack_resources(StackName=stack)["StackResources"]
    return {entry["LogicalResourceId"]: entry for entry in listed if entry.get("LogicalResourceId")}


def still_there(accounts: Accounts, account: str, kind: str, physical_id: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        if kind == "AWS::S3::Bucket":
            accounts.client(account, "s3").head_bucket(Bucket=physical_id)
            return True
        if kind == "AWS::KMS::Key":
            state = accounts.client(account, "kms").describe_key(KeyId=physical_id)["KeyMetadata"]["KeyState"]
            return bool(state == "Enabled")
        if kind == "AWS::Logs::LogGroup":
            groups = accounts.client(account, "logs").describe_log_groups(logGroupNamePrefix=physical_id)["logGroups"]
            return any(group["logGroupName"] == physical_id for group in groups)
    except ClientError:
        return False
    raise ValueError(kind)


def probe_termination_protection(accounts: Accounts, account: str) -> bool:
    """Whether the emulator refuses DeleteStack on a stack created with termination protection on."""
    from botocore.exceptions import ClientError

    cfn = accounts.client(account, "cloudformation")
    template = {"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}
    cfn.create_stack(
        StackName="rehearsal-protected", TemplateBody=json.dumps(template), EnableTerminationProtection=True
    )
    try:
        cfn.delete_stack(StackName="rehearsal-protected")
    except ClientError:
        cfn.update_termination_protection(StackName="rehearsal-protected", EnableTerminationProtection=False)
        cfn.delete_stack(StackName="rehearsal-protected")
        return True
    remaining = [s["StackName"] for s in cfn.describe_stacks()["Stacks"]]
    return "rehearsal-protected" in remaining


# -- the rehearsal --------------------------------------------------------------------------------------------------


def stacks_of(argv: list[str]) -> list[str]:
    """The stack names of an `npx cdk deploy|destroy ...` argv (its positional words after the subcommand)."""
    names = []
    for index in range(3, len(argv)):
        if not argv[index].startswith("-") and argv[index - 1] not in CDK_OPTIONS_WITH_VALUE:
            names.append(argv[index])
    return names


def continuations(calls: list[dict[str, Any]], failed: set[str]) -> list[list[str]]:
    """For each README `cdk deploy` that failed: the same command for each of its stacks that did not fail, alone
    (--exclusively: its dependencies are the ones that failed), so that the rehearsal goes on with the rest. Which of
    them the failed command reached first depends on the CDK CLI's order among independent stacks, which varies from
    run to run; one it reached is deployed again without changes, so the rehearsal ends the same either way."""
    commands = []
    for call in calls:
        argv = call["argv"]
        if argv[:3] == ["npx", "cdk", "deploy"] and call["rc"] != 0:
            stacks = stacks_of(argv)
            options = [word for word in argv[3:] if word not in stacks]
            commands += [[*argv[:3], *options, stack, "--exclusively"] for stack in stacks if stack not in failed]
    return commands


def readers_commands(text: str, subs: list[user_spec.Substitution]) -> tuple[list[Block], list[Block], list[list[str]]]:
    """README's deploy blocks, tear-down blocks and retained table's commands with the reader's substitutions made;
    UnknownLiteral names each literal of the example none of them covers."""
    deploy, teardown = readme.deploy_blocks(text), readme.teardown_blocks(text)
    rows = readme.removal_rows(text)
    problems = []
    for block in deploy + teardown:
        line = text.count("\n", 0, text.index(block.body)) + 1 if block.body in text else block.line
        problems += [f"README.md:{line}: {problem}" for problem in user_spec.unknown_literals(block.script(), subs)]
    for command in (command for row in rows for command in row):
        problems += [f"README.md, {readme.RETAINED_TABLE}: {p}" for p in user_spec.unknown_literals(command, subs)]
    if problems:
        raise UnknownLiteral("\n".join(problems))

    def substituted(block: Block) -> Block:
        return dataclasses.replace(block, body=user_spec.substitute(block.body, subs))

    rows = [[user_spec.substitute(command, subs) for command in row] for row in rows]
    return [substituted(b) for b in deploy], [substituted(b) for b in teardown], rows


def edit_readers_spec(path: Path, expected: DeploymentSpec) -> DeploymentSpec:
    """README's copy of the example, edited in place as the reader edits it (user_spec.EDITS)."""
    path.write_text(user_spec.edit(path.read_text(), path.name))
    spec = load_spec(path)
    if spec != expected:
        raise AssertionError(
            f"{path.name}: README's copy, edited, is not spec/default.yaml edited; the substitutions assume that copy"
        )
    return spec


def rehearse(workdir: Path, readme_text: str | None = None, echo: Callable[[str], None] | None = None) -> Rehearsal:
    """Run README's deploy and tear-down against a fresh moto server in `workdir`, on the reader's edited copy of
    the example spec; what happened, resource by resource. `echo` gets one line per step (the shims print each
    command on stderr meanwhile)."""
    say = echo or (lambda line: None)
    text = readme_text if readme_text is not None else (REPO / "README.md").read_text()
    example, edited = user_spec.example_spec(), user_spec.edited_spec()
    subs = user_spec.substitutions(example, edited)
    deploy, teardown, removal_rows = readers_commands(text, subs)
    creating = [block for block in deploy if readme.creates_spec([block])]
    root = workdir / "live"
    root.mkdir(parents=True)
    repo = scratch_repo(root)
    result = Rehearsal(workdir, repo / readme.SPEC_FILE, "README" if creating else "rehearsal")
    result.edits = [(name, str(user_spec.value_at(example, name)), value) for name, value in user_spec.EDITS]
    uses = Counter[str]()
    for body in readme.rehearsed_texts(text):
        uses.update(user_spec.uses(body, subs))
    result.substitutions = [(sub, uses[sub.example]) for sub in subs]
    for block in readme.bash_blocks(readme.section(text, readme.TEARDOWN_SECTION)):
        if "cdk destroy" not in block.body:
            first = block.body.strip().splitlines()[0]
            why = "cluster.accounting's database: the spec has none" if "rds " in block.body else "not a tear-down step"
            result.skipped_blocks.append((first, why))
    result.expected_argv = dry_run(deploy + teardown, workdir / "dry")
    (root / "aws").mkdir()
    calls_file = root / "calls.jsonl"
    with moto_server(root / "moto.log") as server:
        env = shell_env(root, server)
        for block in creating:
            run_block(block, repo, env)
        if not creating:
            shutil.copy(DEFAULT_SPEC_PATH, result.spec_path)
        spec = edit_readers_spec(result.spec_path, edited)
        say(f"rehearsal: edited {readme.SPEC_FILE}: " + ", ".join(f"{name}={value}" for name, value in user_spec.EDITS))
        keys = write_profiles(
            server.endpoint,
            {"compute": spec.accounts.compute, "data": spec.accounts.data, MANAGEMENT[0]: MANAGEMENT[1]},
            spec.region,
            root / "aws" / "config",
            root / "aws" / "credentials",
        )
        # The management account's organization exists before the reader starts (README's guardrail step).
        session(server.endpoint, (*keys[MANAGEMENT[0]], None), spec.region).client(
            "organizations", endpoint_url=server.endpoint
        ).create_organization(FeatureSet="ALL")
        say(
            f"rehearsal: moto at {server.endpoint}; profiles compute ({spec.accounts.compute}), data "
            f"({spec.accounts.data}), {MANAGEMENT[0]} ({MANAGEMENT[1]}, with an organization)"
        )
        stand_ins = stand_in_artifacts(spec, root / ARTIFACTS)
        accounts = Accounts(server.endpoint, root / "aws" / "credentials", spec)
        for block in deploy:
            if block not in creating:
                run_block(block, repo, env)
        result.artifacts = [
            Artifact(what, uri, uploaded(accounts, spec.accounts.compute, uri)) for what, _, uri in stand_ins
        ]
        readme_deploy_calls = read_calls(calls_file)
        failed = {
            name
            for stacks in accounts.stacks().values()
            for name, status in stacks.items()
            if "FAILED" in status or "ROLLBACK" in status
        }
        more = continuations(readme_deploy_calls, failed)
        extra_env = {**env, "REHEARSAL_CALLS": str(root / "continued.jsonl")}
        for argv in more:
            say(f"rehearsal: going on with a stack of a failed deploy that did not fail: {' '.join(argv)}")
            run_group([str(root / "bin" / "npx"), *argv[1:]], repo, extra_env, " ".join(argv))
        result.continued = [_call(c, "continued") for c in read_calls(root / "continued.jsonl")]
        # What the emulator holds once every deploy command ran.
        result.stacks_after_deploy = accounts.stacks()
        result.templates, result.accounts, protected = app_templates(repo / "cdk.out")
        for stack, account in result.accounts.items():
            if stack in result.stacks_after_deploy[account]:
                body = accounts.client(account, "cloudformation").get_template(StackName=stack)["TemplateBody"]
                result.held_templates[stack] = parse_template(body)
        result.buckets = {
            account: {bucket["Name"] for bucket in accounts.client(account, "s3").list_buckets()["Buckets"]}
            for account in accounts.by_account
        }
        toolkit = accounts.client(spec.accounts.compute, "cloudformation").get_template(StackName=TOOLKIT)
        result.templates = {TOOLKIT: parse_template(toolkit["TemplateBody"]), **result.templates}
        result.accounts[TOOLKIT] = spec.accounts.compute
        listed_by_stack: dict[str, dict[str, dict[str, Any]]] = {}
        for stack, template in result.templates.items():
            account = result.accounts[stack]
            status = result.stacks_after_deploy[account].get(stack)
            listed = stack_resources(accounts, account, stack) if status else {}
            listed_by_stack[stack] = listed
            failure = (
                stack_failure(accounts, account, stack, status, stack in protected, server.text())
                if status
                else "the stack was never created"
            )
            result.failures[stack] = failure
            result.resources += classify(stack, account, template, listed, server.text())
            result.security_groups += security_groups(accounts, account, stack, template, listed)
            for entry in listed.values():
                if entry.get("PhysicalResourceId"):
                    result.physical_ids.setdefault(entry["ResourceType"], set()).add(entry["PhysicalResourceId"])
        network = spec.stack_names["network"]
        outputs = accounts.client(spec.accounts.compute, "cloudformation").describe_stacks(StackName=network)
        result.network_outputs = {
            o["OutputKey"]: o["OutputValue"]
            for o in outputs["Stacks"][0].get("Outputs") or []
            if o["OutputKey"] in NETWORK_OUTPUTS
        }
        for block in teardown:
            run_block(block, repo, env)
        result.stacks_after_teardown = accounts.stacks()
        kept: list[tuple[str, str, str]] = []  # (type, id, account)
        for stack, template in result.templates.items():
            for logical_id, resource in template["Resources"].items():
                noted = listed_by_stack[stack].get(logical_id) or {}
                retain = resource.get("DeletionPolicy") == "Retain" and resource["Type"] in RETAINED_TYPES
                if stack != TOOLKIT and retain and noted.get("PhysicalResourceId"):
                    ident, account = noted["PhysicalResourceId"], result.accounts[stack]
                    present_now = still_there(accounts, account, resource["Type"], ident)
                    result.retained.append((resource["Type"], ident, present_now))
                    kept.append((resource["Type"], ident, account))
        profiles = {spec.accounts.compute: "compute", spec.accounts.data: "data"}
        removal_env = {**env, "REHEARSAL_CALLS": str(root / "removal.jsonl")}
        result.removals = remove_retained(removal_rows, kept, profiles, repo, removal_env, accounts)
        enforced = probe_termination_protection(accounts, spec.accounts.compute)
        server_log = server.text()
    result.server_exit = server.exit_status
    records = read_calls(calls_file)
    result.calls = [_call(c, "deploy" if i < len(readme_deploy_calls) else "tear-down") for i, c in enumerate(records)]
    result.inner_calls = [_call(c, " ".join(c["inside"])) for c in read_calls(calls_file, inner=True)]
    result.termination_protection = protection_finding(result, enforced, server_log)
    result.emulator_gaps = gaps(result, server_log)
    result.not_implemented = set(NOT_IMPLEMENTED.findall(server_log))
    return result


def removal_row(rows: list[list[str]], kind: str, profile: str) -> list[str]:
    """README's commands that remove a retained resource of `kind` in the account of `profile` ([] if none)."""
    for commands in rows:
        for command in commands:
            words = command.split()
            names_profile = any(a == "--profile" and b == profile for a, b in itertools.pairwise(words))
            if words[0] == "aws" and REMOVES.get((words[1], words[2]), ("",))[0] == kind and names_profile:
                return commands
    return []


def remove_retained(
    rows: list[list[str]],
    kept: list[tuple[str, str, str]],
    profiles: dict[str, str],
    repo: Path,
    env: dict[str, str],
    accounts: Accounts,
) -> list[Removal]:
    """For each retained resource, README's row for its type and its account's profile, with its id for the
    placeholder, run by bash command by command up to the first that fails."""
    removals = []
    for kind, ident, account in kept:
        commands = removal_row(rows, kind, profiles[account])
        placeholder = next(holder for (found, holder) in REMOVES.values() if found == kind)
        rcs: list[int] = []
        said = ""
        for command in commands:
            filled = re.sub(rf"\b{placeholder}\b", ident, command)
            rcs.append(run_group(["bash", "-u", "-c", filled], repo, env, filled))
            if rcs[-1] != 0:
                tail = read_calls(Path(env["REHEARSAL_CALLS"]))[-1]["tail"]
                said = next((line.strip() for line in reversed(tail) if line.strip()), "")
                break
        gone = not still_there(accounts, account, kind, ident)
        removals.append(Removal(kind, account, commands, rcs, gone, said))
    return removals


def _call(record: dict[str, Any], block: str) -> Call:
    return Call(
        block, record["argv"], record["rc"], record["seconds"], record["answered"], record["tail"], record["log"]
    )


def protection_finding(result: Rehearsal, enforced: bool, server_log: str) -> Protection:
    lift = next((c for c in result.calls if "update-termination-protection" in c.argv), None)
    lifted = lift is not None and lift.rc == 0
    if enforced:
        refused = any(c.argv[:3] == ["npx", "cdk", "destroy"] and c.rc != 0 for c in result.calls)
        return Protection(True, refused or not lifted, "enforced: DeleteStack refuses a protected stack")
    if lift is None:
        said = "README has no update-termination-protection command"
    elif lifted:
        said = "README's update-termination-protection succeeded"
    elif NO_TERMINATION_PROTECTION in server_log:
        said = f"README's update-termination-protection fails (exit {lift.rc}): moto answers HTTP 500, '{NO_TERMINATION_PROTECTION}'"
    else:
        said = f"README's update-termination-protection fails (exit {lift.rc})"
    return Protection(
        False,
        False,
        "not modelled: moto deletes a stack created with EnableTerminationProtection (a probe stack here), so no "
        f"destroy can show the protection refusing it; {said}",
    )


def gaps(result: Rehearsal, server_log: str) -> list[tuple[str, str]]:
    from tests.rehearsal.moto_server import FIXES

    found = [(f"{what} (fixed in the rehearsal's server)", why) for what, why in FIXES.items()]
    if NO_DOCKER in server_log:
        found.append(("Lambda invocation", "moto runs function code only in docker; this machine has no docker engine"))
    if not result.termination_protection.enforced:
        found.append(("termination protection", result.termination_protection.finding))
    failed = [
        c.argv[2]
        for c in result.calls
        if c.argv[:2] == ["aws", "organizations"] and c.argv[2:3] in (["attach-policy"], ["detach-policy"]) and c.rc
    ]
    if failed:
        counts = " and ".join(f"{failed.count(call)} {call}" for call in dict.fromkeys(failed))
        found.append(
            (
                "organization membership",
                "moto adds accounts to an organization only by CreateAccount, with ids it draws, and has no "
                "InviteAccountToOrganization, so the spec's two accounts cannot be members of the management "
                f"account's organization: README's {counts} calls fail (AccountNotFoundException) on the guardrail "
                "SCP its create-policy made",
            )
        )
    return found
