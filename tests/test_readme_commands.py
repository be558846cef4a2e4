"""README's deploy and tear-down blocks, run by bash itself with `npx` and `aws` replaced by argv recorders on PATH
(and the real phase-two command): every cdk invocation gets the user's spec, names stacks the app really creates,
and the stacks come and go in an order that works; the tear-down names what the templates retain."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spec import DEFAULT_SPEC_PATH, load_spec
from spec.phase_two import NETWORK_OUTPUTS
from tests.stacks.conftest import Assembly

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SPEC_FILE = "my-deployment.yaml"
# cdk subcommands that run the app, so without `-c spec=...` they silently use the embedded example spec.
RUNS_THE_APP = {"synth", "deploy", "diff", "ls", "list", "destroy", "watch", "import", "drift"}
CDK_OPTIONS_WITH_VALUE = {"-c", "--context", "--profile", "--outputs-file", "-o", "--output", "--region"}

RECORDER = """#!{python}
import json, os, sys
argv = [os.path.basename(sys.argv[0]), *sys.argv[1:]]
with open(os.environ["ARGV_LOG"], "a") as log:
    log.write(json.dumps(argv) + "\\n")
# `npx cdk deploy ... --outputs-file F` writes what CDK writes: every deployed stack's outputs.
if argv[:3] == ["npx", "cdk", "deploy"] and "--outputs-file" in argv:
    stacks = [a for i, a in enumerate(argv[3:], 3) if not a.startswith("-") and argv[i - 1] not in {options}]
    fake = {{name: "vpce-0" + str(i) * 16 if name != "VpcId" else "vpc-0" + "a" * 16 for i, name in enumerate({names})}}
    outputs = {{s: (fake if s.endswith("-network") else {{}}) for s in stacks}}
    with open(argv[argv.index("--outputs-file") + 1], "w") as out:
        json.dump(outputs, out)
"""
PYTHON = """#!/bin/sh
exec {python} "$@"
"""


def bash_blocks(markdown: str) -> list[str]:
    """Every bash block, tagged with where it runs (```bash aws, ```bash here, ...) or not."""
    return re.findall(r"^```bash[^\n]*\n(.*?)^```", markdown, flags=re.S | re.M)


def section(markdown: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## )", markdown, flags=re.S | re.M)
    assert match, f"README has no section '## {heading}'"
    return match.group(1)


def run_block(block: str, workdir: Path) -> list[list[str]]:
    """Run `block` with bash -eu in `workdir`; returns the argv of every npx and aws call, in order."""
    bin_dir = workdir / "bin"
    bin_dir.mkdir(exist_ok=True)
    recorder = RECORDER.format(
        python=sys.executable, options=sorted(CDK_OPTIONS_WITH_VALUE), names=list(NETWORK_OUTPUTS)
    )
    for name in ("npx", "aws", "make"):
        (bin_dir / name).write_text(recorder)
        (bin_dir / name).chmod(0o755)
    (bin_dir / "python").write_text(PYTHON.format(python=sys.executable))
    (bin_dir / "python").chmod(0o755)
    log = workdir / "argv.log"
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "ARGV_LOG": str(log),
        "PYTHONPATH": str(REPO),
        "HOME": str(workdir),
    }
    result = subprocess.run(
        ["bash", "-eu", "-c", block], cwd=workdir, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{block}\n---\n{result.stdout}\n{result.stderr}"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def cdk_calls(calls: list[list[str]]) -> list[list[str]]:
    return [call[2:] for call in calls if call[:2] == ["npx", "cdk"]]


def stacks_of(cdk_args: list[str]) -> list[str]:
    """The positional stack names of a cdk call (its first word is the subcommand)."""
    names = []
    for index, arg in enumerate(cdk_args[1:], 1):
        if not arg.startswith("-") and cdk_args[index - 1] not in CDK_OPTIONS_WITH_VALUE:
            names.append(arg)
    return names


def option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def real_stack_names(assembly: Assembly) -> set[str]:
    """The stacks the app creates for the default spec, from the synthesized cloud assembly's manifest."""
    manifest = json.loads((assembly.out / "manifest.json").read_text())
    return {name for name, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"}


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    shutil.copy(DEFAULT_SPEC_PATH, tmp_path / SPEC_FILE)
    yield tmp_path


def _assert_spec_on_every_app_run(calls: list[list[str]]) -> None:
    for args in cdk_calls(calls):
        if args[0] in RUNS_THE_APP:
            pairs = list(itertools.pairwise(args))
            assert ("-c", f"spec={SPEC_FILE}") in pairs or ("--context", f"spec={SPEC_FILE}") in pairs, args


def test_the_deploy_block_gives_every_cdk_call_the_spec_and_runs_phase_two(workdir: Path) -> None:
    (block,) = [b for b in bash_blocks(section(README.read_text(), "Deploying for real")) if "cdk deploy" in b]
    calls = run_block(block, workdir)
    _assert_spec_on_every_app_run(calls)
    deploys = [args for args in cdk_calls(calls) if args[0] == "deploy"]
    assert deploys, block
    order = [stack for args in deploys for stack in stacks_of(args)]
    names = load_spec().stack_names
    assert sorted(order) == sorted(names.values())
    assert order.index(names["network"]) < order.index(names["data"])
    # Phase two ran between the network stack and the data stack: the spec now holds the deployed ids.
    network = load_spec(workdir / SPEC_FILE).network
    assert network.vpc_id == "vpc-0" + "a" * 16
    assert network.s3_gateway_endpoint_id is not None and network.s3_gateway_endpoint_id.startswith("vpce-0")
    data_deploy = next(args for args in deploys if names["data"] in stacks_of(args))
    assert option(data_deploy, "--profile") == "data"
    # The nodes' artifacts are uploaded once the artifacts stack made their bucket, before the cluster boots from them.
    (upload,) = [call for call in calls if call[:2] == ["make", "upload-artifacts"]]
    assert f"SPEC={SPEC_FILE}" in upload and "PROFILE=compute" in upload
    deployed_at = {
        stack: index
        for index, call in enumerate(calls)
        if call[:3] == ["npx", "cdk", "deploy"]
        for stack in stacks_of(call[2:])
    }
    assert deployed_at[names["artifacts"]] < calls.index(upload) < deployed_at[names["cluster"]]


# -- the guardrail SCP (AWS Organizations, the management account) --------------------------------------------------

MANAGEMENT = "management"


def organizations_calls(calls: list[list[str]], operation: str) -> list[list[str]]:
    return [call for call in calls if call[:3] == ["aws", "organizations", operation]]


def scp_name() -> str:
    """The name README's create-policy gives the guardrail SCP (later blocks find its id by this name)."""
    (block,) = [b for b in bash_blocks(section(README.read_text(), "Deploying for real")) if "create-policy" in b]
    (name,) = re.findall(r"create-policy --name (\S+)", block)
    return name


def _finds_the_scp_by_name(calls: list[list[str]]) -> None:
    (lookup,) = organizations_calls(calls, "list-policies")
    assert option(lookup, "--filter") == "SERVICE_CONTROL_POLICY" and option(lookup, "--profile") == MANAGEMENT
    assert f"Policies[?Name=='{scp_name()}'].Id" == option(lookup, "--query"), lookup


def test_the_guardrail_scp_is_built_after_phase_two_and_attached_before_the_data_and_notebook(workdir: Path) -> None:
    """Built before phase two, the SCP would name the spec's example sagemaker.api endpoint: attached, it denies
    presigned notebook URLs everywhere. Attached before the data and notebook stacks, it is in force before the
    access points and the notebook exist."""
    (block,) = [b for b in bash_blocks(section(README.read_text(), "Deploying for real")) if "cdk deploy" in b]
    calls = run_block(block, workdir)
    # Phase two wrote the deployed ids into the spec (python runs for real), and the SCP names them.
    deployed = load_spec(workdir / SPEC_FILE).network
    scp = json.loads((workdir / "guardrails.json").read_text())
    notebook_urls = next(s for s in scp["Statement"] if s["Sid"] == "DenyPresignedNotebookUrlsOutsideVpc")
    assert notebook_urls["Condition"] == {"StringNotEquals": {"aws:SourceVpce": deployed.sagemaker_api_endpoint_id}}
    (create,) = organizations_calls(calls, "create-policy")
    assert option(create, "--content") == "file://guardrails.json" and option(create, "--profile") == MANAGEMENT
    attached = organizations_calls(calls, "attach-policy")
    spec = load_spec(workdir / SPEC_FILE)
    assert sorted(option(call, "--target-id") or "" for call in attached) == sorted(
        [spec.accounts.compute, spec.accounts.data]
    )
    assert {option(call, "--profile") for call in attached} == {MANAGEMENT}
    names = spec.stack_names
    deployed_at = {
        stack: index
        for index, call in enumerate(calls)
        if call[:3] == ["npx", "cdk", "deploy"]
        for stack in stacks_of(call[2:])
    }
    last_attach = max(calls.index(call) for call in attached)
    assert deployed_at[names["network"]] < calls.index(create) < last_attach
    assert last_attach < min(deployed_at[names["data"]], deployed_at[names["notebook"]]), calls


def test_scps_are_enabled_on_the_organizations_root_once_before_the_first_attach(workdir: Path) -> None:
    blocks = bash_blocks(section(README.read_text(), "Deploying for real"))
    enabling = [index for index, block in enumerate(blocks) if "enable-policy-type" in block]
    attaching = [index for index, block in enumerate(blocks) if "attach-policy" in block]
    assert enabling and attaching and enabling[0] < attaching[0]
    calls = run_block(blocks[enabling[0]], workdir)
    roots = organizations_calls(calls, "list-roots")
    assert {option(call, "--profile") for call in roots} == {MANAGEMENT}
    # Enabling twice is an error: the block reads the root's policy types first.
    assert any("PolicyTypes[?Type=='SERVICE_CONTROL_POLICY']" in (option(call, "--query") or "") for call in roots)
    (enable,) = organizations_calls(calls, "enable-policy-type")
    assert option(enable, "--policy-type") == "SERVICE_CONTROL_POLICY" and option(enable, "--profile") == MANAGEMENT
    assert "--root-id" in enable


def test_a_later_change_of_the_network_ids_updates_the_attached_scp(workdir: Path) -> None:
    (block,) = [b for b in bash_blocks(section(README.read_text(), "Deploying for real")) if "update-policy" in b]
    calls = run_block(block, workdir)
    assert (workdir / "guardrails.json").exists()
    _finds_the_scp_by_name(calls)
    (update,) = organizations_calls(calls, "update-policy")
    assert option(update, "--content") == "file://guardrails.json" and option(update, "--profile") == MANAGEMENT
    assert "--policy-id" in update


# -- after the deploy: who connects, what there is to read --------------------------------------------------------


def test_people_connect_with_the_operator_role_the_identity_stack_creates() -> None:
    """Attached, the guardrail SCP lets only perimeter.operator_roles open sessions: not the administrator profile."""
    text = README.read_text()
    spec = load_spec()
    profile = re.search(r"^\[profile operator\]\n((?:\w+ = .*\n)+)", text, flags=re.M)
    assert profile, "README shows the `operator` profile of ~/.aws/config"
    settings = dict(line.split(" = ", 1) for line in profile.group(1).splitlines())
    # A role_arn profile cannot pass session tags (aws-cli#6692): the profile assumes the role itself, tagged with
    # the person's account, from the compute account's credentials.
    assume = shlex.split(settings["credential_process"])
    assert assume[:3] == ["aws", "sts", "assume-role"], assume
    assert option(assume, "--role-arn") == spec.operator_role_arn and option(assume, "--profile") == "compute"
    assert option(assume, "--tags").startswith("Key=SSMSessionRunAs,Value="), assume
    assert spec.creates_operator_role
    sessions = re.findall(r"aws ssm start-session [^`\n]*", section(text, "Deploying for real"))
    assert sessions and all("--profile operator" in command for command in sessions), sessions
    assert "perimeter.operator_roles" in section(text, "Deploying for real")


def test_the_object_the_access_check_reads_is_uploaded_first(workdir: Path) -> None:
    """By the data account's administrator, straight to the bucket: the nodes' roles cannot write there (readers,
    and the head node only under the output prefix), and the access points admit only those roles."""
    deploy = section(README.read_text(), "Deploying for real")
    (check,) = re.findall(r"^```bash head-node\n(.*?)^```", deploy, flags=re.S | re.M)
    (key,) = set(re.findall(r"--key (corpora/pretraining/\S+)", check))
    spec = load_spec()
    uploads = [b for b in bash_blocks(deploy) if "aws s3 cp" in b]
    assert uploads and deploy.index(uploads[0]) < deploy.index(check)
    calls = run_block(uploads[0], workdir)
    (copy,) = [call for call in calls if call[:3] == ["aws", "s3", "cp"]]
    assert copy[4] == f"s3://{spec.data.bucket_name}/{key}"
    assert option(copy, "--profile") == "data" and option(copy, "--region") == spec.region
    # No encryption asked: the bucket's default, the dataset key (asking for another is denied by the bucket).
    assert not [arg for arg in copy if arg.startswith("--sse")]
    assert (workdir / copy[3]).exists(), "the block makes the file it uploads"


def test_every_cdk_call_in_readme_that_runs_the_app_names_the_spec(workdir: Path) -> None:
    """All `bash aws` blocks with a cdk call (the `here` ones run in tests/test_runbook.py), and the inline
    `npx cdk ...` commands of the prose."""
    text = README.read_text()
    for block in re.findall(r"^```bash aws\n(.*?)^```", text, flags=re.S | re.M):
        if re.search(r"\bcdk (synth|deploy|diff|ls|list|destroy)\b", block):
            _assert_spec_on_every_app_run(run_block(block, workdir))
    for inline in re.findall(r"`(npx cdk [^`]*)`", text):
        if inline.split()[2] in RUNS_THE_APP:
            assert re.search(r"(-c|--context) spec=", inline), inline


# -- tear-down ------------------------------------------------------------------------------------------------------

RETAINED_WORDS = {
    "AWS::KMS::Key": ("KMS key", "schedule-key-deletion"),
    "AWS::S3::Bucket": ("bucket", "delete-bucket"),
    "AWS::Logs::LogGroup": ("log group", "delete-log-group"),
    "AWS::RDS::DBCluster": ("deletion protection", "--no-deletion-protection", "snapshot"),
    "AWS::RDS::DBInstance": ("deletion protection", "--no-deletion-protection", "snapshot"),
}


def retained(templates: dict[str, dict[str, Any]]) -> set[tuple[str, str]]:
    """(stack key, resource type) of every resource a stack deletion leaves behind or refuses to delete."""
    kept = set()
    for key, template in templates.items():
        for resource in template["Resources"].values():
            protected = resource.get("Properties", {}).get("DeletionProtection") is True
            if resource.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate", "Snapshot") or protected:
                kept.add((key, resource["Type"]))
    return kept


@pytest.fixture(scope="module")
def accounting_assembly(tmp_path_factory: pytest.TempPathFactory) -> Assembly:
    """An example with Slurm accounting (its database), synthesized by the real CDK CLI."""
    from tests.stacks.conftest import cdk_synth, read_assembly

    path = REPO / "spec" / "examples" / "p5-on-demand.yaml"
    out = tmp_path_factory.mktemp("cdk-out-accounting")
    result = cdk_synth(out, path)
    assert result.returncode == 0, result.stderr
    return read_assembly(out, load_spec(path))


@pytest.mark.synth
def test_the_tear_down_destroys_every_real_stack_cluster_first(default_assembly: Assembly, workdir: Path) -> None:
    teardown = section(README.read_text(), "Tearing down")
    (block,) = [b for b in bash_blocks(teardown) if "cdk destroy" in b]
    calls = run_block(block, workdir)
    _assert_spec_on_every_app_run(calls)
    names = default_assembly.spec.stack_names
    real = real_stack_names(default_assembly)
    # Every stack named anywhere (cdk arguments, --stack-name) is one the app creates.
    named = {stack for args in cdk_calls(calls) for stack in stacks_of(args)}
    named |= {value for call in calls if (value := option(call, "--stack-name")) is not None}
    assert named <= real, named - real
    destroyed = [stack for args in cdk_calls(calls) if args[0] == "destroy" for stack in stacks_of(args)]
    assert sorted(destroyed) == sorted(real)
    # Termination protection is lifted explicitly, on the cluster stack, before the first destroy.
    aws = [call for call in calls if call[0] == "aws"]
    lift = ["aws", "cloudformation", "update-termination-protection", "--no-enable-termination-protection"]
    (unprotect,) = [call for call in aws if call[:4] == lift]
    assert option(unprotect, "--stack-name") == names["cluster"]
    assert calls.index(unprotect) < min(i for i, c in enumerate(calls) if c[:3] == ["npx", "cdk", "destroy"])
    # The cluster goes first (it depends on observability, identity and network), network and identity last.
    assert destroyed[0] == names["cluster"]
    assert set(destroyed[-2:]) == {names["network"], names["identity"]}
    assert destroyed.index(names["artifacts"]) < destroyed.index(names["identity"])  # it attaches to the roles
    for args in cdk_calls(calls):
        if args[0] == "destroy":
            expected = "data" if names["data"] in stacks_of(args) else "compute"
            assert option(args, "--profile") == expected, args


@pytest.mark.synth
def test_the_tear_down_says_what_the_templates_retain_and_how_to_remove_it(
    default_assembly: Assembly, accounting_assembly: Assembly
) -> None:
    teardown = section(README.read_text(), "Tearing down")
    kept = retained(default_assembly.templates) | retained(accounting_assembly.templates)
    assert {kind for _, kind in kept} >= {"AWS::KMS::Key", "AWS::S3::Bucket", "AWS::RDS::DBCluster"}
    for stack, kind in sorted(kept):
        for words in RETAINED_WORDS[kind]:
            assert words in teardown, (stack, kind, words)
        assert default_assembly.spec.stack_names[stack] in teardown, (stack, kind)
    # Outside CloudFormation's deletions: the FSx file system ParallelCluster keeps (fsx.deletion_policy) and the
    # ECR repository `make nemo-image` creates.
    spec = default_assembly.spec
    assert spec.cluster is not None and spec.cluster.containers.ecr_repository
    assert f"aws ecr delete-repository --repository-name {spec.cluster.containers.ecr_repository}" in teardown
    assert "fsx.deletion_policy" in teardown and "aws fsx delete-file-system" in teardown


def test_the_tear_down_detaches_and_deletes_the_guardrail_scp_after_the_last_stack(workdir: Path) -> None:
    """Left attached, the SCP keeps denying SSM sessions and notebook URLs in both accounts. Each block runs on its
    own, so the tear-down finds the policy id by name instead of reusing the deploy's $POLICY."""
    (block,) = [b for b in bash_blocks(section(README.read_text(), "Tearing down")) if "cdk destroy" in b]
    calls = run_block(block, workdir)
    _finds_the_scp_by_name(calls)
    detached = organizations_calls(calls, "detach-policy")
    spec = load_spec(workdir / SPEC_FILE)
    assert sorted(option(call, "--target-id") or "" for call in detached) == sorted(
        [spec.accounts.compute, spec.accounts.data]
    )
    (delete,) = organizations_calls(calls, "delete-policy")
    assert {option(call, "--profile") for call in [*detached, delete]} == {MANAGEMENT}
    last_destroy = max(i for i, call in enumerate(calls) if call[:3] == ["npx", "cdk", "destroy"])
    assert last_destroy < min(calls.index(call) for call in detached) < calls.index(delete)


def test_readme_blocks_parse_as_bash() -> None:
    for block in bash_blocks(README.read_text()):
        result = subprocess.run(["bash", "-n", "-c", block], capture_output=True, text=True, env={**os.environ})
        assert result.returncode == 0, f"{block}\n{result.stderr}"
