"""`python -m policies.guardrails` as a command: the SCP as JSON on stdout, and on stderr the same one-line warning
synth gives while the spec still holds the example accounts or phase-two ids (an SCP built from them would deny
presigned notebook URLs everywhere once attached)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from spec import DEFAULT_SPEC_PATH, load_spec
from spec.phase_two import example_warning

REPO = Path(__file__).resolve().parents[2]
DEPLOYED_NETWORK = {
    "vpc_id": "vpc-0aaaaaaaaaaaaaaaa",
    "s3_gateway_endpoint_id": "vpce-0bbbbbbbbbbbbbbbb",
    "sagemaker_api_endpoint_id": "vpce-0cccccccccccccccc",
}


def _guardrails(spec_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "policies.guardrails", "--spec", str(spec_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _real_looking_spec(tmp_path: Path) -> Path:
    text = DEFAULT_SPEC_PATH.read_text().replace("111111111111", "123456789012").replace("222222222222", "210987654321")
    doc = yaml.safe_load(text)
    doc["network"].update(DEPLOYED_NETWORK)
    path = tmp_path / "my-deployment.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_example_spec_gets_synths_warning_and_the_scp_on_stdout() -> None:
    done = _guardrails(DEFAULT_SPEC_PATH)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["Statement"]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [example_warning(load_spec(DEFAULT_SPEC_PATH))]


def test_a_spec_with_real_looking_accounts_and_ids_gets_no_warning(tmp_path: Path) -> None:
    spec_path = _real_looking_spec(tmp_path)
    done = _guardrails(spec_path)
    assert done.returncode == 0, done.stderr
    assert "warning:" not in done.stderr
    statements = {s["Sid"]: s for s in json.loads(done.stdout)["Statement"]}
    notebook = statements["DenyPresignedNotebookUrlsOutsideVpc"]
    assert notebook["Condition"] == {
        "StringNotEquals": {"aws:SourceVpce": DEPLOYED_NETWORK["sagemaker_api_endpoint_id"]}
    }
