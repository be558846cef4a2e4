"""synth_seconds: synthesizing every stack of the default spec, against an app with one empty stack.

The baseline pays the same fixed costs (Python start, the jsii runtime, aws-cdk-lib's import, the
CDK CLI), so the ratio shows what our constructs, policies and cdk-nag add.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench.result import BenchResult

REPO = Path(__file__).resolve().parents[1]
CDK_ENV = {
    "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    "CDK_DISABLE_VERSION_CHECK": "1",
    "CDK_DISABLE_CLI_TELEMETRY": "true",
}
EMPTY_APP = """
import aws_cdk as cdk
app = cdk.App()
cdk.Stack(app, "empty", env=cdk.Environment(account="111111111111", region="us-east-1"))
app.synth()
"""


def _synth_seconds(app_command: str | None) -> float:
    with tempfile.TemporaryDirectory() as out:
        command = ["npx", "--no-install", "cdk", "synth", "--quiet", "--output", out]
        if app_command:
            command += ["--app", app_command]
        start = time.perf_counter()
        subprocess.run(command, cwd=REPO, env={**os.environ, **CDK_ENV}, check=True, capture_output=True)
        return time.perf_counter() - start


def run(repeats: int = 2) -> BenchResult:
    with tempfile.TemporaryDirectory() as scratch:
        empty_app = Path(scratch) / "empty_app.py"
        empty_app.write_text(EMPTY_APP)
        python = REPO / ".venv" / "bin" / "python"
        baseline = min(_synth_seconds(f"{python} {empty_app}") for _ in range(repeats))
    ours = min(_synth_seconds(None) for _ in range(repeats))
    return BenchResult(
        name="synth_seconds",
        value=round(ours, 2),
        unit="s",
        baseline_name="empty_app_synth_seconds",
        baseline_value=round(baseline, 2),
        ratio=round(ours / baseline, 3),
        target="informational (lower is better)",
        note="cdk synth of the default spec (4 stacks, cdk-nag on) vs. one empty stack, same CLI",
    )
