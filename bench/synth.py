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

from bench.result import BenchResult, best_times, ratio

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


def _synth(app_command: str | None) -> tuple[float, int]:
    """(seconds, templates written) of one `cdk synth` into a fresh output directory."""
    with tempfile.TemporaryDirectory() as out:
        command = ["npx", "--no-install", "cdk", "synth", "--quiet", "--output", out]
        if app_command:
            command += ["--app", app_command]
        start = time.perf_counter()
        completed = subprocess.run(command, cwd=REPO, env={**os.environ, **CDK_ENV}, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if completed.returncode != 0:
            tail = (completed.stderr or completed.stdout).strip().splitlines()[-1:]
            raise RuntimeError(f"cdk synth ({app_command or 'app.py'}) failed: {' '.join(tail)}")
        return seconds, template_count(Path(out))


def template_count(assembly: Path) -> int:
    """CloudFormation templates in a cloud assembly directory: every stack, nested stacks included."""
    return len(list(assembly.glob("*.template.json")))


def run(repeats: int = 2) -> BenchResult:
    with tempfile.TemporaryDirectory() as scratch:
        empty_app = Path(scratch) / "empty_app.py"
        empty_app.write_text(EMPTY_APP)
        python = REPO / ".venv" / "bin" / "python"
        ours: list[tuple[float, int]] = []
        baseline: list[tuple[float, int]] = []

        def ours_run() -> float:
            ours.append(_synth(None))
            return ours[-1][0]

        def baseline_run() -> float:
            baseline.append(_synth(f"{python} {empty_app}"))
            return baseline[-1][0]

        best = best_times({"ours": ours_run, "baseline": baseline_run}, repeats)
    stacks = ours[-1][1]
    return BenchResult(
        name="synth_seconds",
        value=round(best["ours"], 2),
        unit="s",
        baseline_name="empty_app_synth_seconds",
        baseline_value=round(best["baseline"], 2),
        ratio=ratio(best["ours"], best["baseline"]),
        note=(
            f"`npx cdk synth` of the default spec ({stacks} CloudFormation templates, nested stacks included, cdk-nag on) against an app with one "
            f"empty stack through the same CLI; ratio = ours / empty, lower is better; best of {repeats}"
        ),
        details=[
            "Both sides pay the same fixed costs: Node and the CDK CLI, Python start-up, the jsii runtime and "
            "aws-cdk-lib's import. The difference is what our constructs, policies, asset staging and the cdk-nag "
            "rule packs add."
        ],
    )
