"""Roles with deterministic names and exactly the builder's identity policies; the operator role only when the spec
names it; the notebook's flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from aws_cdk import App, Environment

from policies import identity_policy
from policies.operator import (
    OPERATOR_POLICY_NAME,
    operator_session_policy,
    operator_trust_policy,
    run_as_document_content,
    run_as_document_name,
)
from spec import DEFAULT_SPEC_PATH, parse_spec
from stacks.assemble import add_nag_packs
from stacks.identity_stack import IdentityStack
from tests.spec.test_users import GROUPS, USERS
from tests.stacks.conftest import Assembly

REPO = Path(__file__).resolve().parents[2]


def test_roles_have_deterministic_names_and_the_builders_policies(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    roles = {
        r["Properties"]["RoleName"]: r["Properties"]
        for r in default_assembly.resources("identity", "AWS::IAM::Role").values()
    }
    assert set(roles) == {spec.role_name(r) for r in ("cluster-node", "head-node", "notebook", "operator")}
    for role in ("cluster-node", "head-node", "notebook"):
        policies = roles[spec.role_name(role)].get("Policies", [])
        assert policies == [{"PolicyName": "datasets", "PolicyDocument": identity_policy(spec, role)}]
    profiles = {
        p["Properties"]["InstanceProfileName"]
        for p in default_assembly.resources("identity", "AWS::IAM::InstanceProfile").values()
    }
    assert profiles == {spec.role_name("cluster-node"), spec.role_name("head-node")}


def test_the_operator_role_the_spec_names_has_the_builders_trust_and_session_policy(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    assert spec.perimeter.operator_roles == [spec.operator_role_arn]  # spec/default.yaml names <name>-operator
    (operator,) = [
        r["Properties"]
        for r in default_assembly.resources("identity", "AWS::IAM::Role").values()
        if r["Properties"]["RoleName"] == spec.role_name("operator")
    ]
    assert operator["AssumeRolePolicyDocument"] == operator_trust_policy(spec)
    assert operator["Policies"] == [
        {"PolicyName": OPERATOR_POLICY_NAME, "PolicyDocument": operator_session_policy(spec)}
    ]
    assert "ManagedPolicyArns" not in operator


def _identity_template(doc: dict[str, Any], out: Path) -> dict[str, Any]:
    """The identity stack alone, synthesized in-process with cdk-nag (a finding fails synth)."""
    spec = parse_spec(doc)
    app = App(outdir=str(out), context=json.loads((REPO / "cdk.json").read_text())["context"])
    IdentityStack(
        app, spec.stack_names["identity"], spec, env=Environment(account=spec.accounts.compute, region=spec.region)
    )
    add_nag_packs(app, spec)
    app.synth()
    return dict(json.loads((out / f"{spec.stack_names['identity']}.template.json").read_text()))


def test_a_spec_naming_its_own_operator_roles_gets_no_operator_role(tmp_path: Path) -> None:
    doc = yaml.safe_load(DEFAULT_SPEC_PATH.read_text())
    doc["perimeter"]["operator_roles"] = ["arn:aws:iam::111111111111:role/platform-admins"]
    template = _identity_template(doc, tmp_path)
    names = {r["Properties"]["RoleName"] for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Role"}
    assert names == {"llm-demo-cluster-node", "llm-demo-head-node", "llm-demo-notebook"}


def test_no_s3_managed_policies_on_any_role(default_assembly: Assembly) -> None:
    for role in default_assembly.resources("identity", "AWS::IAM::Role").values():
        for arn in role["Properties"].get("ManagedPolicyArns", []):
            assert "S3" not in str(arn), arn


def test_notebook_is_vpc_only_without_root_encrypted_and_imdsv2(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    notebooks = default_assembly.resources("notebook", "AWS::SageMaker::NotebookInstance")
    assert len(notebooks) == 1
    props = next(iter(notebooks.values()))["Properties"]
    assert props["DirectInternetAccess"] == "Disabled"
    assert props["RootAccess"] == "Disabled"
    assert props["KmsKeyId"]
    assert props["SubnetId"] and props["SecurityGroupIds"]
    assert props["InstanceMetadataServiceConfiguration"] == {"MinimumInstanceMetadataServiceVersion": "2"}
    assert props["RoleArn"] == spec.role_arn("notebook")


def test_with_users_the_operator_role_runs_sessions_as_each_persons_account(tmp_path: Path) -> None:
    """Issue 43: with cluster.users, the identity stack (cdk-nag clean: a finding fails synth) creates the run-as
    Session document and the operator role's documents are the builders' (no default shell, own tag only)."""
    doc = yaml.safe_load(DEFAULT_SPEC_PATH.read_text())
    doc["cluster"].update(users=USERS, groups=GROUPS)
    spec = parse_spec(doc)
    template = _identity_template(doc, tmp_path)
    (document,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SSM::Document"]
    assert document["Name"] == run_as_document_name(spec) and document["DocumentType"] == "Session"
    assert document["DocumentFormat"] == "JSON"  # explicit: the deploy rehearsal's emulator requires it
    assert document["Content"] == run_as_document_content(spec)
    (operator,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Role" and r["Properties"]["RoleName"] == spec.role_name("operator")
    ]
    assert operator["AssumeRolePolicyDocument"] == operator_trust_policy(spec)
    assert operator["Policies"] == [
        {"PolicyName": OPERATOR_POLICY_NAME, "PolicyDocument": operator_session_policy(spec)}
    ]
    assert "SSM-SessionManagerRunShell" not in json.dumps(operator)
