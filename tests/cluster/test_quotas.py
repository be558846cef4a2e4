"""`python -m cluster.quotas`: the EC2 vCPUs a spec's cluster needs at max_count, per Service Quotas quota, with the
command that reads each quota (checked by the AWS CLI's own parser) and README's copy of what it prints."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from cluster.quotas import ON_DEMAND_QUOTAS, capacity_blocks, main, quota_for, report, vcpu_needs
from spec import DEFAULT_SPEC_PATH, load_spec
from spec.platform.instances import INSTANCE_TYPES
from tests.environments import ready

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "spec" / "examples"
P, TRN, STANDARD = "L-417A185B", "L-2C3B7624", "L-1216C47A"


def _needs(spec_path: Path) -> dict[str, int]:
    return {need.quota.code: need.vcpus for need in vcpu_needs(load_spec(spec_path))}


def test_the_default_spec_needs_two_p5_and_its_head_node() -> None:
    # 2 x p5.48xlarge (192 vCPUs each) on On-Demand; the m6i.2xlarge head node is a Standard instance.
    assert _needs(DEFAULT_SPEC_PATH) == {P: 384, STANDARD: 8}


def test_the_trn1_example_needs_the_trn_quota() -> None:
    assert _needs(EXAMPLES / "trn1-neuron.yaml") == {TRN: 4 * 128, STANDARD: 8}


def test_an_odcr_queue_counts_against_on_demand_and_a_capacity_block_does_not() -> None:
    assert _needs(EXAMPLES / "p4d-odcr.yaml") == {P: 4 * 96, STANDARD: 8}
    block = load_spec(EXAMPLES / "p5-capacity-block.yaml")
    assert {need.quota.code: need.vcpus for need in vcpu_needs(block)} == {STANDARD: 8}
    ((queue,),) = [(q,) for q in capacity_blocks(block)]
    assert (queue.instance_type, queue.max_count) == ("p5.48xlarge", 2)
    assert f"{queue.max_count} x p5.48xlarge from Capacity Block" in "\n".join(report(block, "compute"))


def test_every_instance_type_of_the_facts_table_has_its_on_demand_quota() -> None:
    assert {name: quota_for(name).code for name in INSTANCE_TYPES} == {
        name: P if name.startswith("p") else TRN if name.startswith("trn") else STANDARD for name in INSTANCE_TYPES
    }
    assert {q.code for q in ON_DEMAND_QUOTAS.values()} == {P, TRN, STANDARD}


def _printed(capsys: pytest.CaptureFixture[str], spec_path: Path) -> str:
    assert main(["--spec", str(spec_path)]) == 0
    return capsys.readouterr().out


def test_the_printed_commands_parse_with_the_aws_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    commands = [
        line.strip()
        for path in (DEFAULT_SPEC_PATH, EXAMPLES / "trn1-neuron.yaml")
        for line in _printed(capsys, path).splitlines()
        if line.strip().startswith("aws ")
    ]
    assert any(f"--quota-code {TRN} " in command for command in commands)
    config = tmp_path / "config"
    config.write_text("[profile compute]\nregion = us-east-1\n")
    credentials = tmp_path / "credentials"
    credentials.write_text("[compute]\naws_access_key_id = fake\naws_secret_access_key = fake\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "AWS_CONFIG_FILE": str(config),
        "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # nothing listens: only the connection may fail
        "AWS_MAX_ATTEMPTS": "1",
    }
    aws = ready("awscli-venv") / "bin" / "aws"
    for command in commands:
        argv = shlex.split(command)
        done = subprocess.run([str(aws), *argv[1:]], env=env, capture_output=True, text=True)
        assert "Could not connect to the endpoint URL" in done.stderr, (command, done.stderr)


def test_readme_shows_what_it_prints_for_the_default_spec(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (REPO / "README.md").read_text()
    match = re.search(
        r"python -m cluster\.quotas --spec my-deployment\.yaml\n```\n+[^`]*```text\n(.*?)```", readme, re.S
    )
    assert match, "README shows the quota command, then what it prints in a ```text block"
    assert match.group(1) == _printed(capsys, DEFAULT_SPEC_PATH)


def test_a_spec_without_a_cluster_needs_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = DEFAULT_SPEC_PATH.read_text()
    path = tmp_path / "no-cluster.yaml"
    path.write_text(text[: text.index("\ncluster:")] + "\n")
    assert main(["--spec", str(path)]) == 0
    assert "no cluster" in capsys.readouterr().out
