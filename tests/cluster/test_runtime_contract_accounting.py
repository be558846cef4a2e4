"""cluster.accounting against the oracles: ParallelCluster 3.16.1's builders grant the head node
secretsmanager:GetSecretValue on the database password; our head-node role and the Secrets Manager endpoint's
policy allow exactly that call, and nothing else new passes that endpoint. The deployment is the p5 example
(accounting on), synthesized by the real CDK CLI with cdk-nag; cfn-lint checks its templates."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cluster.verify.runtime_contract import (
    EXAMPLE_SECRET_SUFFIX,
    Call,
    evaluate,
    omissions,
    omitted,
)
from policies.accounting import accounting_secret_arn
from policies.verify.harness.engine import Engine
from spec import DeploymentSpec
from tests.cluster.contract_example import Synthesized, synthesize_with_contract
from tests.stacks.conftest import REPO, cfn_lint_errors

pytestmark = [pytest.mark.pcluster, pytest.mark.synth]

EXAMPLE = REPO / "spec" / "examples" / "p5-on-demand.yaml"


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory, pcluster_venv: Path) -> Synthesized:
    return synthesize_with_contract(EXAMPLE, tmp_path_factory.mktemp("cdk-out-accounting"))


def secret(spec: DeploymentSpec) -> str:
    return accounting_secret_arn(spec, EXAMPLE_SECRET_SUFFIX)


def test_parallelcluster_asks_for_the_password_and_gets_exactly_that(synthesized: Synthesized) -> None:
    spec = synthesized.spec
    via_secrets = [v for v in synthesized.verdicts if v.call.service == "secretsmanager"]
    assert [(v.call.role, v.call.action, v.call.resource) for v in via_secrets] == [
        ("head", "secretsmanager:GetSecretValue", secret(spec))
    ]
    assert via_secrets[0].allowed and via_secrets[0].endpoint_name == "secretsmanager"
    found = omissions(spec, synthesized.deployment.config)
    denied = [v.describe() for v in synthesized.verdicts if not v.allowed and omitted(v.call, found) is None]
    assert denied == []


def test_the_endpoint_and_the_roles_refuse_everything_else_on_secrets(synthesized: Synthesized) -> None:
    spec = synthesized.spec
    base = Call("head", None, "probe", "probe", "secretsmanager:GetSecretValue", secret(spec))
    other_secret = accounting_secret_arn(spec, "AbCdEf").replace("slurm-accounting-db", "other")
    probes = {
        "compute node reads the password": dataclasses.replace(base, role="compute"),
        "head node reads another secret": dataclasses.replace(base, resource=other_secret),
        "head node overwrites the password": dataclasses.replace(base, action="secretsmanager:PutSecretValue"),
        "head node lists secrets": dataclasses.replace(base, action="secretsmanager:ListSecrets", resource="*"),
    }
    verdicts = evaluate(
        list(probes.values()), spec, synthesized.deployment.identity, synthesized.deployment.endpoints, Engine()
    )
    for (what, _), verdict in zip(probes.items(), verdicts, strict=True):
        assert verdict.identity != "Allowed" and verdict.endpoint != "Allowed", what
    # And the endpoint alone (a role granted everything) still admits only the head node's one read.
    endpoint_only = {role: [("all", {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*",
                     "Resource": "*"}]})] for role in ("head", "compute")}  # fmt: skip
    verdicts = evaluate([base, *probes.values()], spec, endpoint_only, synthesized.deployment.endpoints, Engine())
    assert [v.allowed for v in verdicts] == [True, False, False, False, False]


def test_the_database_admits_mysql_from_the_head_node_group_only(synthesized: Synthesized) -> None:
    import json

    network = json.loads((synthesized.out / f"{synthesized.spec.stack_names['network']}.template.json").read_text())
    resources = network["Resources"]
    groups = {k: v for k, v in resources.items() if v["Type"] == "AWS::EC2::SecurityGroup"}
    (database,) = [k for k in groups if k.startswith("SecurityGroupsAccountingDatabase")]
    (head,) = [k for k in groups if k.startswith("SecurityGroupsHeadNode")]
    ingress = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::EC2::SecurityGroupIngress"]
    into_database = [r for r in ingress if r["GroupId"] == {"Fn::GetAtt": [database, "GroupId"]}]
    assert into_database == [
        {
            "Description": "MySQL from the head node's slurmdbd only",
            "FromPort": 3306,
            "GroupId": {"Fn::GetAtt": [database, "GroupId"]},
            "IpProtocol": "tcp",
            "SourceSecurityGroupId": {"Fn::GetAtt": [head, "GroupId"]},
            "ToPort": 3306,
        }
    ]
    subnets = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::EC2::Subnet"]
    zones = {s["AvailabilityZone"] for s in subnets if "accounting" in json.dumps(s.get("Tags", []))}
    assert zones == {"us-east-1a", "us-east-1b"}
    cluster = json.loads((synthesized.out / f"{synthesized.spec.stack_names['cluster']}.template.json").read_text())
    (db,) = [v["Properties"] for v in cluster["Resources"].values() if v["Type"] == "AWS::RDS::DBCluster"]
    assert db["StorageEncrypted"] is True and db["DeletionProtection"] is True and db["BackupRetentionPeriod"] == 14
    assert db["ServerlessV2ScalingConfiguration"] == {"MinCapacity": 0.5, "MaxCapacity": 4}
    assert db["MasterUserPassword"]["Fn::Join"][1][0] == "{{resolve:secretsmanager:"  # never in the template


def test_cfn_lint_reports_no_errors_on_the_accounting_deployment(synthesized: Synthesized) -> None:
    templates = sorted(str(p) for p in synthesized.out.glob("*.template.json"))
    errors = cfn_lint_errors(templates)
    assert not errors, "\n".join(errors)
