"""The oracle: ParallelCluster 3.16.1's own builders say what its nodes call at run time; our roles and the
VPC endpoint policies each call passes through must allow every call, except the omissions listed with
their reasons (cluster/verify/runtime_contract.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from cluster.verify.pcluster.runner import node_policies
from cluster.verify.runtime_contract import (
    Call,
    Deployment,
    Granted,
    Omission,
    Verdict,
    bootstrap_calls,
    calls,
    evaluate,
    granted_from,
    node_policies_request,
    observability_calls,
    omissions,
    omitted,
    read_deployment,
)
from policies.verify.harness.engine import Engine
from tests.stacks.conftest import Assembly

pytestmark = [pytest.mark.pcluster, pytest.mark.synth]


@dataclass
class Contract:
    deployment: Deployment
    granted: Granted
    calls: list[Call]
    omissions: tuple[Omission, ...]
    verdicts: list[Verdict]


@pytest.fixture(scope="module")
def contract(default_assembly: Assembly, pcluster_venv: Path) -> Contract:
    spec = default_assembly.spec
    deployment = read_deployment(default_assembly.out, spec)
    granted = granted_from(node_policies(node_policies_request(spec, deployment.config)))
    found = calls(spec, granted)
    verdicts = evaluate(found, spec, deployment.identity, deployment.endpoints, Engine())
    return Contract(deployment, granted, found, omissions(spec, deployment.config), verdicts)


def test_the_oracle_is_the_parallelcluster_version_the_spec_deploys(
    contract: Contract, default_assembly: Assembly
) -> None:
    assert default_assembly.spec.cluster is not None
    assert contract.granted.version == default_assembly.spec.cluster.parallelcluster_version
    # Head node, the one compute queue, and the Slurm policies on both.
    assert set(contract.granted.roles) == {"head", "compute:gpu"}
    policies = {s["Policy"] for role in contract.granted.roles.values() for s in role["statements"]}
    assert {"parallelcluster", "parallelcluster-slurm-head-node", "parallelcluster-slurm-compute"} <= policies


def test_every_runtime_call_is_allowed_by_our_role_and_its_endpoint(contract: Contract) -> None:
    denied = [v.describe() for v in contract.verdicts if not v.allowed and omitted(v.call, contract.omissions) is None]
    assert denied == [], "ParallelCluster's nodes would be refused:\n" + "\n".join(denied)


def test_the_calls_that_stop_a_cluster_are_in_the_contract(contract: Contract) -> None:
    """The calls whose denial stopped creation or node join (issue 13) are among those checked."""
    checked = {(v.call.role, v.call.action, v.call.resource.rsplit(":", 1)[-1]): v for v in contract.verdicts}
    table = f"table/parallelcluster-slurm-{contract.granted.stack_id.split('/')[1]}"
    for key in (
        ("compute", "dynamodb:Query", f"{table}/index/InstanceId"),
        ("head", "s3:GetObjectVersion", None),
        ("head", "ec2:GetConsoleOutput", None),
        ("compute", "cloudwatch:PutMetricData", "*"),
    ):
        matching = [v for k, v in checked.items() if k[:2] == key[:2] and (key[2] is None or k[2] == key[2])]
        assert matching and all(v.allowed for v in matching), key
    via = {v.endpoint_name for v in contract.verdicts if v.endpoint is not None}
    assert {"s3", "dynamodb"} <= via  # both gateway endpoint policies were evaluated


def test_omissions_are_really_withheld_and_each_names_its_reason(contract: Contract) -> None:
    for omission in contract.omissions:
        hit = [v for v in contract.verdicts if omitted(v.call, [omission]) is omission]
        assert hit, f"omission {omission.action} on {omission.resource} matches no call: remove it"
        assert not any(v.allowed for v in hit), f"{omission.action}: listed as withheld, but our roles allow it"
        assert len(omission.reason) > 30


def test_the_contract_fails_when_a_grant_is_missing(contract: Contract, default_assembly: Assembly) -> None:
    """Without the index lookup statement, compute nodes could not find their Slurm names: the oracle says so."""
    spec = default_assembly.spec
    weakened = {
        role: [
            (name, {**doc, "Statement": [s for s in doc["Statement"] if s.get("Sid") != "FindSlurmNodeName"]})
            for name, doc in documents
        ]
        for role, documents in contract.deployment.identity.items()
    }
    verdicts = evaluate(contract.calls, spec, weakened, contract.deployment.endpoints, Engine())
    denied = {(v.call.action, v.call.resource.rsplit("/", 1)[-1]) for v in verdicts if not v.allowed}
    assert ("dynamodb:Query", "InstanceId") in denied


def test_the_endpoint_policy_is_part_of_every_verdict(contract: Contract, default_assembly: Assembly) -> None:
    """The S3 gateway endpoint must let the config read by version through as well: without the cluster
    bucket's statement the head node's reads are refused there even though its role allows them."""
    s3 = contract.deployment.endpoints["s3"]
    assert s3 is not None
    narrowed = {**s3, "Statement": [s for s in s3["Statement"] if s.get("Sid") != "ParallelClusterBuckets"]}
    endpoints = {**contract.deployment.endpoints, "s3": narrowed}
    verdicts = evaluate(contract.calls, default_assembly.spec, contract.deployment.identity, endpoints, Engine())
    refused = [v for v in verdicts if v.call.action == "s3:GetObjectVersion" and not v.allowed]
    assert refused and all(v.identity == "Allowed" and v.endpoint == "ImplicitlyDenied" for v in refused)


def test_with_internet_egress_the_head_node_may_register_nodes_in_parallelclusters_zone(
    tmp_path: Path, pcluster_venv: Path
) -> None:
    """With NAT egress ParallelCluster keeps managed DNS: its builders add the Route 53 policy, ours must match."""
    from spec import parse_spec
    from tests.cluster.conftest import spec_dict
    from tests.stacks.test_variants import synth

    data = spec_dict()
    data["network"]["internet_egress"] = "nat"
    data["cluster"].pop("python_wheelhouse", None)  # PyPI, as the NAT egress allows
    synth(data, tmp_path)
    spec = parse_spec(data)
    deployment = read_deployment(tmp_path, spec)
    granted = granted_from(node_policies(node_policies_request(spec, deployment.config)))
    found = calls(spec, granted)
    assert any(c.action == "route53:ChangeResourceRecordSets" for c in found)
    verdicts = evaluate(found, spec, deployment.identity, deployment.endpoints, Engine())
    found_omissions = omissions(spec, deployment.config)
    denied = [v.describe() for v in verdicts if not v.allowed and omitted(v.call, found_omissions) is None]
    assert denied == []


def test_our_own_bootstrap_calls_pass_the_role_and_the_endpoints(
    contract: Contract, default_assembly: Assembly
) -> None:
    """Beyond ParallelCluster's needs: the nodes fetch their bootstrap scripts and the head node resolves and
    fetches its payload (the CDK asset bucket through the S3 endpoint, the SSM key through the ssm endpoint)."""
    spec = default_assembly.spec
    found = bootstrap_calls(spec, contract.deployment.config)
    actions = {(c.role, c.action) for c in found}
    assert actions == {("head", "s3:GetObject"), ("head", "ssm:GetParameter"), ("compute", "s3:GetObject")}
    assert len([c for c in found if c.role == "head" and c.action == "s3:GetObject"]) == 2  # script and payload
    verdicts = evaluate(found, spec, contract.deployment.identity, contract.deployment.endpoints, Engine())
    assert [v.describe() for v in verdicts if not v.allowed] == []


def test_the_head_nodes_metrics_calls_pass_the_role_and_the_endpoints(
    contract: Contract, default_assembly: Assembly
) -> None:
    """Issue 17: the agent reads the remote-write URL (SSM, through the ssm endpoint) and remote-writes to the
    workspace (through the aps-workspaces endpoint, whose policy is part of the verdict)."""
    spec = default_assembly.spec
    workspace = contract.deployment.metrics_workspace_arn
    assert workspace is not None and workspace.startswith("arn:aws:aps:us-east-1:111111111111:workspace/")
    found = observability_calls(spec, workspace)
    assert {(c.role, c.action) for c in found} == {("head", "ssm:GetParameter"), ("head", "aps:RemoteWrite")}
    verdicts = evaluate(found, spec, contract.deployment.identity, contract.deployment.endpoints, Engine())
    assert [v.describe() for v in verdicts if not v.allowed] == []
    assert {v.endpoint_name for v in verdicts} == {"ssm", "aps-workspaces"}


def test_nothing_else_reaches_the_metrics(contract: Contract, default_assembly: Assembly) -> None:
    """Queries, another workspace, the compute role: each refused, by the role and again by the endpoint. (The URL
    itself is no secret: AmazonSSMManagedInstanceCore, which both node roles carry for Session Manager, reads any
    parameter; what matters is who may write and read the metrics.)"""
    spec = default_assembly.spec
    workspace = contract.deployment.metrics_workspace_arn
    assert workspace is not None
    other_workspace = workspace.rsplit("/", 1)[0] + "/ws-0123456789abcdef"
    cases = [
        Call("head", None, "query", "probe", "aps:QueryMetrics", workspace),
        Call("head", None, "series", "probe", "aps:GetSeries", workspace),
        Call("head", None, "another workspace", "probe", "aps:RemoteWrite", other_workspace),
        Call("compute", "gpu", "compute writes", "probe", "aps:RemoteWrite", workspace),
    ]
    verdicts = evaluate(cases, spec, contract.deployment.identity, contract.deployment.endpoints, Engine())
    assert [v.describe() for v in verdicts if v.allowed] == []
    # The endpoint refuses on its own what a broader role would allow: every aps call but the head's write.
    everything = {
        role: [
            (
                "all-aps",
                {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "aps:*", "Resource": "*"}]},
            )
        ]
        for role in ("head", "compute")
    }
    aps_cases = [c for c in cases if c.action.startswith("aps:")]
    broad = evaluate(aps_cases, spec, everything, contract.deployment.endpoints, Engine())
    assert {(v.call.sid, v.identity, v.endpoint) for v in broad} == {
        (c.sid, "Allowed", "ImplicitlyDenied") for c in aps_cases
    }
