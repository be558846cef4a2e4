"""Updates that don't roll back: the head node's OnNodeConfigured (update policy UNSUPPORTED) never changes
with the code; new payloads arrive through OnNodeUpdated (SUPPORTED), and cluster.update_plan builds both
configs from the references the stack really passes."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import cluster.update_plan as update_plan
from cluster.config_builder import build_cluster_config
from cluster.payload import PACKAGES, TOP_LEVEL_FILES, build_payload
from cluster.update_policy import Action, diff_configs, pattern_of
from cluster.verify.pcluster.runner import run_script, update_policies
from cluster.verify.runtime_contract import concrete_config
from spec import load_spec
from tests.cluster.conftest import spec_dict

REPO = Path(__file__).resolve().parents[2]
CONFIGURED = "HeadNode.CustomActions.OnNodeConfigured"
UPDATED = "HeadNode.CustomActions.OnNodeUpdated"


def checkout_copy(tmp_path: Path) -> Path:
    """The files the payload is built from, in a scratch checkout whose training code a test may change."""
    root = tmp_path / "checkout"
    for package in PACKAGES:
        shutil.copytree(REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in TOP_LEVEL_FILES:
        if (REPO / name).is_file():
            shutil.copy2(REPO / name, root / name)
    return root


def change_training_code(root: Path) -> None:
    path = root / "training" / "__init__.py"
    path.write_text(path.read_text() + "\n# a code-only change\n")


def test_on_node_configured_names_the_stable_key_and_on_node_updated_the_payload(tmp_path: Path) -> None:
    spec = load_spec()
    refs = update_plan.deployment_refs(spec, tmp_path)
    actions = build_cluster_config(spec, refs)["HeadNode"]["CustomActions"]
    (configured,) = actions["OnNodeConfigured"]["Sequence"]
    (updated,) = actions["OnNodeUpdated"]["Sequence"]
    assert (
        configured["Args"][configured["Args"].index("--payload-parameter") + 1] == "/llm-demo/cluster/head-node-payload"
    )
    assert "--payload" not in configured["Args"] and refs.head_payload_uri not in json.dumps(configured)
    assert updated["Args"][updated["Args"].index("--payload") + 1] == refs.head_payload_uri
    assert configured["Script"] == updated["Script"] == refs.head_bootstrap_uri
    # The references are CDK's own: the same fingerprint gives the same asset key as in the template.
    assert refs.head_bootstrap_uri.startswith("s3://cdk-hnb659fds-assets-111111111111-us-east-1/")
    assert refs.head_payload_uri and refs.head_payload_uri.endswith(".gz")


def test_a_code_only_change_is_a_live_update(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = checkout_copy(tmp_path)
    monkeypatch.setattr(update_plan, "build_payload", functools.partial(build_payload, root=root))
    spec = load_spec()
    old = build_cluster_config(spec, update_plan.deployment_refs(spec, tmp_path / "old"))
    change_training_code(root)
    new = build_cluster_config(spec, update_plan.deployment_refs(spec, tmp_path / "new"))
    plan = update_plan.plan_update(spec, spec, configs=(old, new))
    assert [(c.change.path, c.action) for c in plan.changes] == [(f"{UPDATED}.Sequence", Action.LIVE)]
    assert plan.action == Action.LIVE
    assert any("OnNodeUpdated" in step for step in plan.steps)


def test_a_head_node_script_change_needs_a_new_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_spec()
    old = build_cluster_config(spec, update_plan.deployment_refs(spec, tmp_path / "old"))
    bootstrap = tmp_path / "bootstrap"
    shutil.copytree(update_plan.BOOTSTRAP, bootstrap)
    (bootstrap / "head_node.sh").write_text((bootstrap / "head_node.sh").read_text() + "\n# changed\n")
    monkeypatch.setattr(update_plan, "BOOTSTRAP", bootstrap)
    new = build_cluster_config(spec, update_plan.deployment_refs(spec, tmp_path / "new"))
    plan = update_plan.plan_update(spec, spec, configs=(old, new))
    actions = {c.change.path: c.action for c in plan.changes}
    assert actions[f"{CONFIGURED}.Sequence"] == Action.REPLACE  # OnNodeConfigured runs once, at creation
    assert actions[f"{UPDATED}.Sequence"] == Action.LIVE
    assert plan.action == Action.REPLACE


def _schema_policy(path: str, policies: dict[str, str]) -> str:
    """ParallelCluster's policy for a change: the deepest schema path that holds it."""
    parts = pattern_of(path).split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in policies:
            return policies[candidate]
    return "UNKNOWN"


def _cluster_config(templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (cluster,) = [r for r in templates["cluster"]["Resources"].values() if r["Type"] == "Custom::PclusterCluster"]
    config: dict[str, Any] = cluster["Properties"]["ClusterConfiguration"]
    return config


@pytest.mark.synth
@pytest.mark.pcluster
def test_synthesize_change_training_code_synthesize_no_unsupported_field_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pcluster_venv: Path
) -> None:
    import stacks.cluster_stack
    import stacks.parts.cluster_assets
    from tests.stacks.test_variants import synth

    root = checkout_copy(tmp_path)
    monkeypatch.setattr(stacks.parts.cluster_assets, "build_payload", functools.partial(build_payload, root=root))
    monkeypatch.setattr(stacks.cluster_stack, "BUILD_DIR", tmp_path / "build-old")
    before, _ = synth(spec_dict(), tmp_path / "old")
    change_training_code(root)
    monkeypatch.setattr(stacks.cluster_stack, "BUILD_DIR", tmp_path / "build-new")
    after, _ = synth(spec_dict(), tmp_path / "new")

    old, new = _cluster_config(before), _cluster_config(after)
    changes = diff_configs(old, new)
    assert changes, "the new payload must reach the cluster config (OnNodeUpdated), or the head node never sees it"
    policies = update_policies()  # read from ParallelCluster's own schema
    by_policy = {change.path: _schema_policy(change.path, policies) for change in changes}
    assert "UNSUPPORTED" not in by_policy.values(), by_policy
    assert set(by_policy) == {f"{UPDATED}.Sequence"}
    # ParallelCluster's own ConfigPatch, for a running cluster, lets the update through.
    (patch,) = run_script(
        "config_patch.py", [{"name": "code-only", "old": concrete_config(old), "new": concrete_config(new)}]
    )
    assert patch["changes"] and all(result == "SUCCEEDED" for *_, result in patch["changes"]), patch
