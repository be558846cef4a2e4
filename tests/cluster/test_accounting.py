"""cluster.accounting: the slurm.conf settings and the sacctmgr script rendered from cluster.accounting.

The script itself runs against a real slurmdbd in tests/cluster/test_local_slurm_accounting.py; ParallelCluster's
deny-list check of the settings runs in tests/cluster/test_pcluster_schema.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cluster.accounting import sacctmgr_script, slurm_conf_settings
from spec.accounting import AccountingSpec, FairShareSpec
from tests.cluster.conftest import REPO_ROOT, spec_dict

SECTION = {
    "enabled": True,
    "qos": [{"name": "small", "max_nodes_per_user": 1, "max_gpus_per_user": 8, "priority": 10}],
    "teams": [{"name": "research", "members": ["alice"], "qos": ["small", "normal"], "fairshare": 3}],
}


def test_settings_turn_on_multifactor_priority_enforcement_and_job_comments() -> None:
    settings = dict(slurm_conf_settings(AccountingSpec.model_validate(SECTION)))
    assert settings["PriorityType"] == "priority/multifactor"
    assert settings["PriorityWeightFairshare"] == "10000"
    assert settings["PriorityDecayHalfLife"] == "7-0"
    assert settings["AccountingStorageEnforce"] == "associations,limits,qos,safe"
    assert settings["AccountingStoreFlags"] == "job_comment"
    assert settings["AccountingStorageTRES"] == "gres/gpu"


def test_settings_without_fair_share_or_enforcement() -> None:
    spec = AccountingSpec(enabled=True, enforce=False, fair_share=FairShareSpec(enabled=False))
    settings = dict(slurm_conf_settings(spec))
    assert settings["PriorityType"] == "priority/basic"
    assert "AccountingStorageEnforce" not in settings
    assert not any(key.startswith("PriorityWeight") for key in settings)
    assert slurm_conf_settings(AccountingSpec()) == []


def test_script_sets_every_limit_and_clears_the_missing_ones() -> None:
    script = sacctmgr_script(AccountingSpec.model_validate(SECTION))
    assert (
        "sacctmgr -i modify qos where name=small set Priority=10 MaxTRESPerUser=gres/gpu=8,node=1 "
        "GrpTRES=gres/gpu=-1,node=-1 MaxWall=-1" in script
    )
    assert "set fairshare=3 qos=small,normal defaultqos=small" in script
    assert "sacctmgr -i add user alice account=research" in script
    assert " remove " not in script and " delete " not in script


def test_script_is_valid_bash_and_needs_an_enabled_section() -> None:
    script = sacctmgr_script(AccountingSpec.model_validate(SECTION))
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
    with pytest.raises(ValueError, match=r"cluster.accounting.enabled: False"):
        sacctmgr_script(AccountingSpec())


def test_cli_prints_the_script_or_a_one_line_error(tmp_path: Path) -> None:
    data = spec_dict()
    data["cluster"].update(accounting=SECTION, users=[], groups=[])  # SECTION's member is no user of the default's
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    run = [sys.executable, "-m", "cluster.accounting"]
    ok = subprocess.run([*run, str(path)], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and ok.stdout.startswith("#!/bin/bash")
    settings = subprocess.run([*run, str(path), "--settings"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert "PriorityType=priority/multifactor" in settings.stdout.splitlines()
    off = subprocess.run(run, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert off.returncode == 2
    assert off.stderr == "error: cluster.accounting.enabled: the spec has no accounting database\n"
