"""`python -m cluster.update_plan` run by hand (outside make, whose environment silences jsii's Node banners)
prints the plan and nothing else: no Node banner, and none as Python byte strings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_plan_run_by_hand_prints_no_node_banner(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("JSII_")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cluster.update_plan",
            str(REPO / "spec" / "default.yaml"),
            str(REPO / "spec" / "examples" / "p4d-odcr.yaml"),
        ],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "Update class: replace" in result.stdout
    noise = [line for line in result.stderr.splitlines() if line.startswith("b'") or "!!" in line]
    assert noise == [], result.stderr


def test_a_replace_plan_destroys_the_old_deployments_cluster_stack(tmp_path: Path) -> None:
    """A new deployment name replaces the cluster: the old stack to delete is the one OLD.yaml deployed."""
    import yaml

    from cluster.update_plan import plan_update
    from cluster.update_policy import Action
    from spec import DEFAULT_SPEC_PATH, load_spec, parse_spec

    doc = yaml.safe_load(DEFAULT_SPEC_PATH.read_text())
    doc["name"] = "llm-next"
    plan = plan_update(load_spec(), parse_spec(doc), build_dir=tmp_path)
    assert plan.action == Action.REPLACE
    (destroy,) = [step for step in plan.steps if "cdk destroy" in step]
    assert destroy == "npx cdk destroy -c spec=OLD.yaml llm-demo-cluster --profile compute"
    (lift,) = [step for step in plan.steps if "update-termination-protection" in step]
    assert lift.endswith("--stack-name llm-demo-cluster --region us-east-1 --profile compute")
    assert plan.steps.index(lift) < plan.steps.index(destroy)
