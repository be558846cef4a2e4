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
