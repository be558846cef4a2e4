"""Roles with deterministic names and exactly the builder's identity policies; the notebook's flags."""

from __future__ import annotations

from policies import identity_policy
from tests.stacks.conftest import Assembly


def test_roles_have_deterministic_names_and_the_builders_policies(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    roles = {
        r["Properties"]["RoleName"]: r["Properties"]
        for r in default_assembly.resources("identity", "AWS::IAM::Role").values()
    }
    assert set(roles) == {spec.role_name(r) for r in ("cluster-node", "head-node", "notebook")}
    for role in ("cluster-node", "head-node", "notebook"):
        policies = roles[spec.role_name(role)].get("Policies", [])
        assert policies == [{"PolicyName": "datasets", "PolicyDocument": identity_policy(spec, role)}]
    profiles = {
        p["Properties"]["InstanceProfileName"]
        for p in default_assembly.resources("identity", "AWS::IAM::InstanceProfile").values()
    }
    assert profiles == {spec.role_name("cluster-node"), spec.role_name("head-node")}


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
