"""stacks.jsii_node: `npx cdk synth` as README shows it, without the Makefile's variables, prints no Node.js
version banner (jsii's runtime prints one on an end-of-life Node.js unless told not to before it starts)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from stacks.jsii_node import END_OF_LIFE_VARIABLE, node_major_version, silence_node_version_banner

REPO = Path(__file__).resolve().parents[2]


def test_plain_npx_cdk_synth_prints_no_node_banner(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith("JSII_")}
    # Offline: the CLI's own version check and telemetry would reach the internet, nothing to do with the banner.
    env.update(CDK_DISABLE_VERSION_CHECK="1", CDK_DISABLE_CLI_TELEMETRY="true")
    done = subprocess.run(
        ["npx", "--no-install", "cdk", "synth", "--quiet", "--output", str(tmp_path / "out")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    banner = [line for line in done.stderr.splitlines() if "!!" in line or "node version" in line.lower()]
    assert not banner, "\n".join(banner)


def test_the_users_own_settings_are_kept_and_the_running_major_added() -> None:
    major = node_major_version("node")
    assert major is not None and major.isdigit()
    env = {END_OF_LIFE_VARIABLE: "18", "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "yes"}
    silence_node_version_banner(env)
    assert env[END_OF_LIFE_VARIABLE] == f"18,{major}"
    assert env["JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION"] == "yes"
    assert node_major_version(str(REPO / "no-such-node")) is None
