"""A spec example synthesized by the real CDK CLI (cdk-nag clean) with its runtime contract evaluated: what
ParallelCluster 3.16.1's builders grant its nodes, each call judged against our roles and endpoint policies. Shared by
the tests that hold an example to the oracles the default deployment meets (test_runtime_contract.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cluster.verify.pcluster.runner import node_policies
from cluster.verify.runtime_contract import (
    Deployment,
    Verdict,
    calls,
    evaluate,
    granted_from,
    node_policies_request,
    read_deployment,
)
from policies.verify.harness.engine import Engine
from spec import DeploymentSpec, load_spec
from tests.stacks.conftest import cdk_synth, read_assembly


@dataclasses.dataclass
class Synthesized:
    spec: DeploymentSpec
    out: Path
    deployment: Deployment
    verdicts: list[Verdict]


def synthesize_with_contract(example: Path, out: Path) -> Synthesized:
    result = cdk_synth(out, example)
    assert result.returncode == 0, f"cdk synth failed:\n{result.stdout}\n{result.stderr}"
    spec = load_spec(example)
    assembly = read_assembly(out, spec)
    nag = {r["pluginName"]: r for r in assembly.validation_report["pluginReports"]}["AwsSolutions"]
    assert nag["violations"] == []
    deployment = read_deployment(out, spec)
    granted = granted_from(node_policies(node_policies_request(spec, deployment.config)))
    verdicts = evaluate(calls(spec, granted), spec, deployment.identity, deployment.endpoints, Engine())
    return Synthesized(spec, out, deployment, verdicts)
