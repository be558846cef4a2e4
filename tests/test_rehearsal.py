"""The README's deploy and tear-down, rehearsed against moto's server (tests/rehearsal): its own commands, in order,
with the real CDK CLI and AWS CLI, two accounts, phase two on the emulator's outputs; the table of what the
emulator created is docs/rehearsal.md's. One rehearsal per session (a few minutes: every cdk command synthesizes)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spec import load_spec
from spec.phase_two import NETWORK_OUTPUTS
from tests.environments import ready
from tests.rehearsal import readme, user_spec
from tests.rehearsal.moto_server import (
    EC2_PROBE,
    FAILURE_PROBE,
    IMPORT_PROBE,
    KMS_POLICY_PROBE,
    KMS_PROBE,
    OUTPUTS_PROBE,
    fixed,
    probe,
)
from tests.rehearsal.run import (
    CONDITION_FALSE,
    CREATED,
    NOT_CREATED,
    NOT_MODELLED,
    Rehearsal,
    ran_as_written,
    read_calls,
    rehearse,
    run_group,
    scratch_repo,
    shell_env,
)
from tests.rehearsal.table import DOC, render, steady

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = user_spec.example_spec()
SPEC = user_spec.edited_spec()  # the reader's: README's copy of the example, edited as its table says
NAMES = SPEC.stack_names
DEPLOYED = ("network", "identity", "data", "observability")  # the stacks that must come up in the emulator
# The rehearsal (the module fixture, in its first test) runs 3 minutes on 2 idle cores, 8 on busy ones; the timeout
# below is a ceiling for a hung one, not an estimate.
pytestmark = pytest.mark.timeout(3600)


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rehearsal]:
    ready("awscli-venv")  # the README's aws commands; built beside the suite by `make test`
    yield rehearse(tmp_path_factory.mktemp("rehearsal"))


# -- without the emulator -------------------------------------------------------------------------------------------


def test_a_readme_make_in_the_scratch_repository_never_rebuilds_the_shared_venv_or_node_modules(
    tmp_path: Path,
) -> None:
    """The scratch repository links the checkout's .venv and node_modules; README's `make synth` there must not
    reinstall them (npm ci deletes node_modules first) when a prerequisite looks newer than their stamp, as a fresh
    worktree's package.json does. `make -n` through the shim prints what make would run."""
    root = tmp_path / "live"
    root.mkdir()
    repo = scratch_repo(root)
    for name in ("package.json", "package-lock.json", "requirements.txt", "constraints.txt"):
        target = (repo / name).resolve()
        (repo / name).unlink()
        shutil.copy(target, repo / name)  # newer than any stamp
    env = {**shell_env(root, None), "REHEARSAL_CALLS": str(root / "calls.jsonl")}
    env.pop("REHEARSAL_DRY")
    rc = run_group(["bash", "-c", "make -n synth SPEC=my-deployment.yaml"], repo, env, "make -n synth")
    call = read_calls(root / "calls.jsonl")[0]
    printed = Path(call["log"]).read_text()
    assert rc == 0 and "cdk synth" in printed, printed
    assert "npm ci" not in printed and "pip install" not in printed, printed
    assert call["argv"] == ["make", "-n", "synth", "SPEC=my-deployment.yaml"]  # logged as the README wrote it


def test_blocks_are_picked_by_section_whatever_their_tag_words() -> None:
    markdown = (
        "## Deploying for real\n\n```bash aws\nnpx cdk bootstrap aws://1/r --profile compute\n```\n\n"
        '```bash\nSPEC=my-deployment.yaml\nnpx cdk deploy -c spec="$SPEC" x\n```\n\n'
        '```bash head-node\naws s3 ls "$AP/"\n```\n\n```python\nprint()\n```\n\n## Next\n'
    )
    blocks = readme.deploy_blocks(markdown)
    assert [block.tag for block in blocks] == ["aws", ""]
    assert "cdk bootstrap" in blocks[0].body and "cdk deploy" in blocks[1].body


def test_the_readme_has_the_blocks_the_rehearsal_runs() -> None:
    text = (REPO / "README.md").read_text()
    deploy = "\n".join(block.body for block in readme.deploy_blocks(text))
    teardown = "\n".join(block.body for block in readme.teardown_blocks(text))
    assert "cdk bootstrap" in deploy and "cdk deploy" in deploy and "phase_two" in deploy
    assert "cdk destroy" in teardown and "update-termination-protection" in teardown


def _both(*templates: dict[str, Any], delete: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """The probe on the pinned moto as it is, and with the rehearsal server's fixes."""
    stock = probe(*templates, delete=delete)
    with fixed():
        patched = probe(*templates, delete=delete)
    return stock, patched


# Each fix of tests/rehearsal/moto_server.py is still needed (the pinned moto misbehaves) and does its job. When one
# of these fails on the stock side, moto has its own fix: drop the rehearsal's.


def test_ids_the_emulator_draws_are_masked_in_the_table() -> None:
    """The Organizations root id (README's enable-policy-type) and policy id differ on every run."""
    argv = "aws organizations enable-policy-type --root-id r-1elm --policy-type SERVICE_CONTROL_POLICY"
    assert steady(argv) == "aws organizations enable-policy-type --root-id r-… --policy-type SERVICE_CONTROL_POLICY"
    assert steady("--policy-id p-0a1b2c3d4e --profile management") == "--policy-id p-… --profile management"
    assert steady("llm-demo-cluster-node for-each") == "llm-demo-cluster-node for-each"


def test_moto_still_gives_change_set_stacks_no_outputs_or_imports() -> None:
    stock, patched = _both(OUTPUTS_PROBE)
    assert stock["Outputs"] == []
    assert patched["Outputs"] == [{"OutputKey": "Name", "OutputValue": "/probe", "ExportName": "probe-name"}]
    stock, patched = _both(OUTPUTS_PROBE, IMPORT_PROBE)
    assert "No export named probe-name" in stock["Error"]
    assert (patched["Error"], patched["Status"], patched["Created"]) == ("", "CREATE_COMPLETE", ["Copy"])


def test_moto_still_reports_a_failed_change_set_complete_on_retry() -> None:
    stock, patched = _both(FAILURE_PROBE)
    assert "references undefined resource Workspace" in stock["Error"]
    assert stock["Status"] == "CREATE_COMPLETE" and stock["Created"] is None
    assert (patched["Error"], patched["Status"], patched["Created"]) == ("", "CREATE_FAILED", [])


def test_moto_still_fails_on_kms_keys_from_templates() -> None:
    stock, patched = _both(KMS_PROBE)
    assert "TagKey" in stock["Error"]
    assert (patched["Status"], patched["Created"], patched["Described"]) == ("CREATE_COMPLETE", ["Key"], True)
    stock, patched = _both(KMS_POLICY_PROBE)
    assert stock["Created"] == ["Key"] and stock["Described"] is False
    assert patched["Described"] is True


def test_moto_still_cannot_delete_a_stack_with_vpc_endpoints_and_route_tables() -> None:
    stock, patched = _both(EC2_PROBE, delete=True)
    assert "DependencyViolation" in stock["Deleted"]
    assert patched["Deleted"] == ""


# -- the rehearsal --------------------------------------------------------------------------------------------------


@pytest.mark.synth
@pytest.mark.emulator
def test_the_stacks_carry_the_readers_name_in_the_readers_accounts(rehearsal: Rehearsal) -> None:
    assert set(rehearsal.stacks_after_deploy) == {SPEC.accounts.compute, SPEC.accounts.data}
    app = {name for stacks in rehearsal.stacks_after_deploy.values() for name in stacks if name != "CDKToolkit"}
    assert app == set(NAMES.values()), app
    assert {rehearsal.accounts[NAMES["data"]], rehearsal.accounts[NAMES["network"]]} == {
        SPEC.accounts.data,
        SPEC.accounts.compute,
    }
    commands = " ".join(word for call in rehearsal.calls for word in call.argv)
    assert EXAMPLE.name not in commands and EXAMPLE.accounts.compute not in commands, commands


@pytest.mark.synth
@pytest.mark.emulator
def test_the_access_points_grant_the_readers_accounts_on_the_readers_bucket(rehearsal: Rehearsal) -> None:
    """The data stack as the emulator holds it (moto skips access points and bucket policies, but keeps the template
    it was given): the edited access point names, their policies name the edited accounts and none of the example's;
    the bucket the emulator created has the edited name."""
    held = rehearsal.held_templates[NAMES["data"]]["Resources"]
    points = [r["Properties"] for r in held.values() if r["Type"] == "AWS::S3::AccessPoint"]
    assert sorted(p["Name"] for p in points) == sorted(d.access_point for d in SPEC.data.datasets)
    for point in points:
        policy = json.dumps(point["Policy"])
        assert SPEC.accounts.compute in policy and SPEC.accounts.data in policy, policy
        for example in (EXAMPLE.accounts.compute, EXAMPLE.accounts.data, EXAMPLE.name):
            assert example not in policy, (example, policy)
    assert SPEC.data.bucket_name in rehearsal.buckets[SPEC.accounts.data]
    assert not [name for names in rehearsal.buckets.values() for name in names if EXAMPLE.name in name]


@pytest.mark.synth
@pytest.mark.emulator
def test_every_readme_command_ran_in_order(rehearsal: Rehearsal) -> None:
    """The argv of every npx, aws and python call, as bash ran the README's blocks against the emulator, equals a
    dry run of the same blocks: nothing skipped, nothing added, same order."""
    assert ran_as_written(rehearsal.calls, rehearsal.expected_argv), (
        [call.argv for call in rehearsal.calls],
        rehearsal.expected_argv,
    )
    words = [" ".join(call.argv[:3]) for call in rehearsal.calls]
    assert words.count("npx cdk bootstrap") == 2
    first = {word: words.index(word) for word in ("npx cdk bootstrap", "npx cdk deploy", "npx cdk destroy")}
    assert first["npx cdk bootstrap"] < first["npx cdk deploy"] < first["npx cdk destroy"]
    # The scratch spec came from spec/default.yaml (by a README step or, without one, by the rehearsal).
    assert rehearsal.spec_path.name == "my-deployment.yaml"


@pytest.mark.synth
@pytest.mark.emulator
def test_both_accounts_are_bootstrapped(rehearsal: Rehearsal) -> None:
    for account in (SPEC.accounts.compute, SPEC.accounts.data):
        assert rehearsal.stacks_after_deploy[account]["CDKToolkit"] == "CREATE_COMPLETE"
    bootstraps = [call for call in rehearsal.calls if call.argv[:3] == ["npx", "cdk", "bootstrap"]]
    assert [call.rc for call in bootstraps] == [0, 0], [call.tail for call in bootstraps]


@pytest.mark.synth
@pytest.mark.emulator
def test_the_stacks_come_up_or_name_what_the_emulator_lacks(rehearsal: Rehearsal) -> None:
    statuses = {name: status for stacks in rehearsal.stacks_after_deploy.values() for name, status in stacks.items()}
    for key in DEPLOYED:
        name = NAMES[key]
        rows = [row for row in rehearsal.resources if row.stack == name]
        assert rows, name
        if statuses.get(name) == "CREATE_COMPLETE":
            continue
        # A stack that did not come up: each resource it lacks is a type the emulator lacks, or needs one.
        assert rehearsal.failures[name], name
        lacking = {row.type for row in rows if row.result == NOT_MODELLED}
        for row in rows:
            if row.result == NOT_CREATED:
                assert row.why.startswith("it needs") and any(
                    f"({kind}, {NOT_MODELLED})" in row.why for kind in lacking
                ), row
            else:
                assert row.result in (CREATED, NOT_MODELLED) and (row.result == CREATED or row.why), row
    # What the rest of the deploy rests on comes up in full.
    assert [statuses.get(NAMES[key]) for key in ("network", "identity", "data")] == ["CREATE_COMPLETE"] * 3
    created = {row.type for row in rehearsal.resources if row.result == CREATED}
    assert {"AWS::EC2::VPC", "AWS::EC2::VPCEndpoint", "AWS::IAM::Role", "AWS::KMS::Key", "AWS::S3::Bucket"} <= created


@pytest.mark.synth
@pytest.mark.emulator
def test_the_rehearsal_goes_on_past_a_failed_deploy_with_each_stack_that_did_not_fail(rehearsal: Rehearsal) -> None:
    """The same continuations whichever order the CDK CLI took among independent stacks (it varies): each stack of
    a failed README deploy but the failed ones, alone."""
    failed = [call for call in rehearsal.calls if call.argv[:3] == ["npx", "cdk", "deploy"] and call.rc != 0]
    named = {stack for call in failed for stack in call.argv[3:] if stack.startswith(f"{SPEC.name}-")}
    statuses = {name: status for stacks in rehearsal.stacks_after_deploy.values() for name, status in stacks.items()}
    went_on = {call.argv[-2] for call in rehearsal.continued}
    assert went_on == {stack for stack in named if statuses.get(stack) != "CREATE_FAILED"}, went_on
    for call in rehearsal.continued:
        assert call.argv[:3] == ["npx", "cdk", "deploy"] and call.argv[-1] == "--exclusively", call.argv
    # The cluster stack's change set never runs: the CDK CLI sets its termination protection first, which moto lacks.
    assert "UpdateTerminationProtection" in rehearsal.failures[NAMES["cluster"]]


@pytest.mark.synth
@pytest.mark.emulator
def test_phase_two_wrote_the_emulators_network_outputs_into_the_spec(rehearsal: Rehearsal) -> None:
    outputs = rehearsal.network_outputs
    assert set(outputs) == set(NETWORK_OUTPUTS)
    spec = load_spec(rehearsal.spec_path)
    for output, field in NETWORK_OUTPUTS.items():
        assert getattr(spec.network, field) == outputs[output], field
    # They are the ids of resources the emulator created, not the spec's examples.
    assert outputs["VpcId"] in rehearsal.physical_ids["AWS::EC2::VPC"]
    assert outputs["S3GatewayEndpointId"] in rehearsal.physical_ids["AWS::EC2::VPCEndpoint"]
    assert outputs["VpcId"] != EXAMPLE.network.vpc_id
    phase_two = next(call for call in rehearsal.calls if call.argv[:3] == ["python", "-m", "spec.phase_two"])
    assert phase_two.rc == 0, phase_two.tail


@pytest.mark.synth
@pytest.mark.emulator
def test_the_tear_down_deletes_every_stack_after_lifting_termination_protection(rehearsal: Rehearsal) -> None:
    for account, stacks in rehearsal.stacks_after_teardown.items():
        assert set(stacks) <= {"CDKToolkit"}, (account, stacks)
    calls = [call.argv for call in rehearsal.calls]
    lift = next(i for i, argv in enumerate(calls) if "update-termination-protection" in argv)
    assert lift < next(i for i, argv in enumerate(calls) if argv[:3] == ["npx", "cdk", "destroy"])
    # Either the emulator enforces the protection (a destroy with it on fails) or the rehearsal says it does not.
    protection = rehearsal.termination_protection
    if protection.enforced:
        assert protection.destroy_refused
    else:
        assert "not modelled" in protection.finding
    destroys = [call for call in rehearsal.calls if call.argv[:3] == ["npx", "cdk", "destroy"]]
    assert all(call.rc == 0 for call in destroys), [call.tail for call in destroys]


@pytest.mark.synth
@pytest.mark.emulator
def test_what_the_templates_retain_stays_behind_and_readmes_commands_remove_it(rehearsal: Rehearsal) -> None:
    """The Retain resources (buckets, KMS keys, log groups) outlive their stacks, as README's tear-down says, and
    its table's row for each, with the profile of the resource's account, removes it (a bucket holding the uploaded
    artifacts is emptied first)."""
    assert {kind for kind, _, _ in rehearsal.retained} >= {"AWS::S3::Bucket", "AWS::KMS::Key", "AWS::Logs::LogGroup"}
    assert [(kind, ident) for kind, ident, present in rehearsal.retained if not present] == []
    assert len(rehearsal.removals) == len(rehearsal.retained)
    for removal in rehearsal.removals:
        assert removal.commands, f"README names no removal of {removal.type} with the profile of {removal.account}"
        assert removal.rcs == [0] * len(removal.commands), removal
        assert removal.gone, removal
    artifacts_bucket = f"{SPEC.name}-artifacts-{SPEC.accounts.compute}"
    emptied = [r for r in rehearsal.removals if r.type == "AWS::S3::Bucket" and r.account == SPEC.accounts.compute]
    assert emptied and all("cluster.empty_bucket" in r.commands[0] for r in emptied)
    assert artifacts_bucket in {ident for kind, ident, _ in rehearsal.retained if kind == "AWS::S3::Bucket"}


def test_readmes_removal_rows_name_a_profile_and_a_region() -> None:
    rows = readme.removal_rows((REPO / "README.md").read_text())
    assert len(rows) >= 5
    for command in (command for row in rows for command in row):
        words = command.split()
        assert "--profile" in words and "--region" in words, command


@pytest.mark.synth
@pytest.mark.emulator
def test_make_upload_artifacts_fills_the_folders_the_cluster_config_names(rehearsal: Rehearsal) -> None:
    from cluster.artifacts import upload_plan
    from spec.artifacts import artifact_locations

    locations = artifact_locations(SPEC)
    assert locations.python_wheelhouse is not None
    assert [artifact.uri.rsplit("/", 1)[0] + "/" for artifact in rehearsal.artifacts] == [
        upload.destination.uri for upload in upload_plan(SPEC, Path("build"))
    ]
    assert rehearsal.artifacts and all(artifact.present for artifact in rehearsal.artifacts), rehearsal.artifacts
    assert rehearsal.artifacts[0].uri.startswith(locations.python_wheelhouse.uri)
    upload = next(call for call in rehearsal.calls if call.argv[:2] == ["make", "upload-artifacts"])
    assert upload.rc == 0, upload.tail
    syncs = [call for call in rehearsal.inner_calls if call.argv[:3] == ["aws", "s3", "sync"]]
    assert len(syncs) == len(rehearsal.artifacts) and all(call.rc == 0 for call in syncs)
    assert all(call.block.startswith("make upload-artifacts") for call in syncs)


@pytest.mark.synth
@pytest.mark.emulator
def test_the_table_lists_every_resource_type_of_the_templates(rehearsal: Rehearsal) -> None:
    expected = {
        (name, resource["Type"])
        for name, template in rehearsal.templates.items()
        for resource in template["Resources"].values()
    }
    rows = {(row.stack, row.type) for row in rehearsal.resources}
    assert rows == expected
    assert {row.result for row in rehearsal.resources} <= {CREATED, NOT_MODELLED, NOT_CREATED, CONDITION_FALSE}
    assert {row.stack for row in rehearsal.resources if row.result == CONDITION_FALSE} <= {"CDKToolkit"}
    # The ParallelCluster provider (a nested stack from ParallelCluster's public bucket) and its custom resource.
    cluster = {row.type: row for row in rehearsal.resources if row.stack == NAMES["cluster"]}
    assert cluster["Custom::PclusterCluster"].result == NOT_MODELLED
    assert cluster["AWS::CloudFormation::Stack"].result == NOT_MODELLED


@pytest.mark.synth
@pytest.mark.emulator
def test_each_security_group_the_emulator_made_is_read_back(rehearsal: Rehearsal) -> None:
    """The groups of docs/rehearsal.md's egress finding: every AWS::EC2::SecurityGroup the emulator created, with
    whether its template lists its egress rules (the cluster's and the endpoints' do)."""
    network = rehearsal.templates[NAMES["network"]]["Resources"]
    created = {row.type: row for row in rehearsal.resources if row.stack == NAMES["network"]}
    groups = [group for group in rehearsal.security_groups if group.stack == NAMES["network"]]
    assert created["AWS::EC2::SecurityGroup"].result == CREATED
    assert sorted(g.logical_id for g in groups) == sorted(
        k for k, r in network.items() if r["Type"] == "AWS::EC2::SecurityGroup"
    )
    restricted = {g.logical_id for g in groups if g.restricts_egress}
    assert restricted and all("SecurityGroupEgress" in network[k]["Properties"] for k in restricted)


@pytest.mark.synth
@pytest.mark.emulator
def test_docs_rehearsal_md_holds_this_runs_table(rehearsal: Rehearsal) -> None:
    committed = (REPO / DOC).read_text()
    fresh = render(rehearsal)
    assert committed == fresh, f"regenerate it: make rehearse (writes {DOC})"
    readme_text = (REPO / "README.md").read_text()
    assert re.search(r"\]\(docs/rehearsal\.md\)", readme.section(readme_text, "Deploying for real"))


@pytest.mark.synth
@pytest.mark.emulator
def test_no_process_of_the_rehearsal_outlives_it(rehearsal: Rehearsal) -> None:
    assert rehearsal.server_exit is not None  # the moto server was stopped and waited for
    left = []
    for proc in Path("/proc").iterdir():
        try:
            cwd = os.readlink(proc / "cwd") if proc.name.isdigit() else ""
        except OSError:
            continue
        if cwd.startswith(str(rehearsal.workdir)):
            left.append((proc.name, (proc / "cmdline").read_bytes().replace(b"\0", b" ")[:200]))
    assert left == []
