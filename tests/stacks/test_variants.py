"""Other shapes of the spec synthesize cleanly (cdk-nag included) and change what they should."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import App

from spec import DEFAULT_SPEC_PATH, parse_spec
from stacks.assemble import assemble

REPO = Path(__file__).resolve().parents[2]


def _doc() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(DEFAULT_SPEC_PATH.read_text()))


def synth(doc: dict[str, Any], out: Path) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """In-process synth with the same feature flags as cdk.json, cdk-nag on; raises if nag fails."""
    spec = parse_spec(doc)
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    # The construct paths the CDK CLI writes into every template (what the principal coverage check reads).
    context |= {"aws:cdk:enable-path-metadata": True}
    app = App(outdir=str(out), context=context)
    deployment = assemble(app, spec)
    app.synth()
    templates = {
        key: json.loads((out / f"{name}.template.json").read_text())
        for key, name in spec.stack_names.items()
        if (out / f"{name}.template.json").exists()
    }
    return templates, deployment.skipped


def _types(template: dict[str, Any]) -> list[str]:
    return [r["Type"] for r in template["Resources"].values()]


def test_existing_network_uses_the_given_vpc_and_route_tables(tmp_path: Path) -> None:
    doc = _doc()
    doc["network"] = {
        "mode": "existing",
        "availability_zone": "us-east-1b",
        "vpc_id": "vpc-0fedcba9876543210",
        "existing": {
            "subnet_ids": ["subnet-0123456789abcdef0"],
            "route_table_ids": ["rtb-0123456789abcdef0"],
            "vpc_cidr": "10.8.0.0/16",
        },
    }
    templates, _ = synth(doc, tmp_path)
    network = templates["network"]
    assert "AWS::EC2::VPC" not in _types(network)
    s3 = next(
        r["Properties"]
        for r in network["Resources"].values()
        if r["Type"] == "AWS::EC2::VPCEndpoint" and r["Properties"]["VpcEndpointType"] == "Gateway"
    )
    assert s3["VpcId"] == "vpc-0fedcba9876543210"
    assert s3["RouteTableIds"] == ["rtb-0123456789abcdef0"]
    access_points = [r for r in templates["data"]["Resources"].values() if r["Type"] == "AWS::S3::AccessPoint"]
    assert {ap["Properties"]["VpcConfiguration"]["VpcId"] for ap in access_points} == {"vpc-0fedcba9876543210"}


def test_nat_egress_is_a_spec_choice_and_opens_only_web_ports(tmp_path: Path) -> None:
    doc = _doc()
    doc["network"]["internet_egress"] = "nat"
    templates, _ = synth(doc, tmp_path)
    resources = templates["network"]["Resources"]
    assert "AWS::EC2::NatGateway" in _types(templates["network"])
    egress = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::EC2::SecurityGroupEgress"]
    for group in (r for r in resources.values() if r["Type"] == "AWS::EC2::SecurityGroup"):
        egress += group["Properties"].get("SecurityGroupEgress", [])
    internet = [rule for rule in egress if rule.get("CidrIp") == "0.0.0.0/0"]
    assert sorted(r["FromPort"] for r in internet) == [80, 443]


def test_notebook_off_removes_its_stack_role_and_endpoints(tmp_path: Path) -> None:
    doc = _doc()
    doc["notebook"]["enabled"] = False
    for dataset in doc["data"]["datasets"]:
        dataset["readers"] = [r for r in dataset["readers"] if r != "notebook"]
    templates, _ = synth(doc, tmp_path)
    assert "notebook" not in templates
    services = json.dumps(templates["network"])
    assert "sagemaker" not in services
    roles = [
        r["Properties"]["RoleName"]
        for r in templates["identity"]["Resources"].values()
        if r["Type"] == "AWS::IAM::Role"
    ]
    assert "llm-demo-notebook" not in roles


def test_given_kms_key_is_used_and_not_created(tmp_path: Path) -> None:
    doc = _doc()
    key_arn = "arn:aws:kms:us-east-1:222222222222:key/0f0e0d0c-0b0a-0908-0706-050403020100"
    doc["data"]["encryption"] = {"kms_key_arn": key_arn}
    templates, _ = synth(doc, tmp_path)
    assert "AWS::KMS::Key" not in _types(templates["data"])
    assert key_arn in json.dumps(templates["data"])
    identity = json.dumps(templates["identity"])
    assert key_arn in identity and "kms:ResourceAliases" not in identity


def test_data_stack_waits_for_the_vpc_id_in_create_mode(tmp_path: Path) -> None:
    doc = _doc()
    del doc["network"]["vpc_id"]
    templates, skipped = synth(doc, tmp_path)
    assert "data" not in templates
    assert "network.vpc_id" in skipped["data"] and "VpcId" in skipped["data"]


UNSAFE_EDITS = [
    (("network_origin", "internet"), "data.datasets[0].network_origin: 'internet' must be 'vpc'"),
    (("prefix", "/"), "data.datasets[0].prefix: '/'"),
]
UNSAFE_IDS = ["internet-origin access point", "reader granted the whole bucket"]


def _unsafe_spec(tmp_path: Path, edit: tuple[str, str]) -> Path:
    doc = _doc()
    doc["data"]["datasets"][0][edit[0]] = edit[1]
    spec_path = tmp_path / "unsafe.yaml"
    spec_path.write_text(yaml.safe_dump(doc))
    return spec_path


@pytest.mark.parametrize(("edit", "expected"), UNSAFE_EDITS, ids=UNSAFE_IDS)
def test_the_cdk_app_refuses_unsafe_specs_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: tuple[str, str], expected: str
) -> None:
    """app.py's own entry point, given the context `cdk synth -c spec=...` gives it: the spec is refused before
    any stack is built, so the CDK CLI has nothing to add (the test below runs it once)."""
    import app

    spec_path = _unsafe_spec(tmp_path, edit)
    with pytest.raises(SystemExit) as exit_status:
        app.main(App(outdir=str(tmp_path / "out"), context={"spec": str(spec_path)}))
    assert exit_status.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if "unsafe.yaml" in line]
    assert any(expected in line for line in lines), lines


def test_cdk_synth_refuses_an_unsafe_spec_with_one_line(tmp_path: Path) -> None:
    from tests.stacks.conftest import cdk_synth

    edit, expected = UNSAFE_EDITS[1]
    result = cdk_synth(tmp_path / "out", _unsafe_spec(tmp_path, edit))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if "unsafe.yaml" in line]
    assert any(expected in line for line in lines), result.stderr
