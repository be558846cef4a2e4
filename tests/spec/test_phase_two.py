"""Phase two as a command: the network stack's outputs (CDK's --outputs-file JSON, or CloudFormation) into the spec,
only those values changed, the diff shown, every bad input one line naming the field and the value."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from spec import DEFAULT_SPEC_PATH, load_spec, parse_spec
from spec.phase_two import EXAMPLE_IDS, NETWORK_OUTPUTS, example_warning, main
from tests.bad_input_checks import assert_clear_refusal, assert_sentinels_survive, plant_sentinels, run_main

REPO = Path(__file__).resolve().parents[2]
DEPLOYED = {
    "VpcId": "vpc-0aaaaaaaaaaaaaaaa",
    "S3GatewayEndpointId": "vpce-0bbbbbbbbbbbbbbbb",
    "SageMakerApiEndpointId": "vpce-0cccccccccccccccc",
    "ComputeSubnetId": "subnet-0dddddddddddddddd",
}


def _spec_copy(tmp_path: Path) -> Path:
    path = tmp_path / "my-deployment.yaml"
    shutil.copy(DEFAULT_SPEC_PATH, path)
    return path


def _outputs(tmp_path: Path, outputs: dict[str, str], stack: str = "llm-demo-network") -> Path:
    """What `npx cdk deploy --outputs-file` writes: every deployed stack's outputs by stack name."""
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({stack: outputs, "llm-demo-identity": {}}, indent=2))
    return path


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ")
    return line


def test_the_outputs_file_fills_the_three_fields_and_keeps_the_rest_of_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_path = _spec_copy(tmp_path)
    before = spec_path.read_text()
    assert main([str(spec_path), "--outputs-file", str(_outputs(tmp_path, DEPLOYED))]) == 0
    after = spec_path.read_text()
    network = load_spec(spec_path).network
    assert (network.vpc_id, network.s3_gateway_endpoint_id, network.sagemaker_api_endpoint_id) == (
        DEPLOYED["VpcId"],
        DEPLOYED["S3GatewayEndpointId"],
        DEPLOYED["SageMakerApiEndpointId"],
    )
    # Only the three values changed: every other line, comments included, is the same.
    changed = [(old, new) for old, new in zip(before.splitlines(), after.splitlines(), strict=True) if old != new]
    assert [old.split(":")[0].strip() for old, _ in changed] == list(NETWORK_OUTPUTS.values())
    # The `# example` mark beside each id goes with it.
    assert all(old.endswith("# example") and "example" not in new for old, new in changed)
    out = capsys.readouterr().out
    for field, example in EXAMPLE_IDS.items():
        assert f"-  {field}: {example}" in out
    assert f"+  vpc_id: {DEPLOYED['VpcId']}" in out
    assert "next: deploy llm-demo-data" in out
    # A second run has nothing to do.
    assert main([str(spec_path), "--outputs-file", str(_outputs(tmp_path, DEPLOYED))]) == 0
    assert "already hold the outputs" in capsys.readouterr().out


def test_dry_run_shows_the_diff_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec_path = _spec_copy(tmp_path)
    assert main([str(spec_path), "--outputs-file", str(_outputs(tmp_path, DEPLOYED)), "--dry-run"]) == 0
    assert spec_path.read_text() == DEFAULT_SPEC_PATH.read_text()
    assert "+  s3_gateway_endpoint_id: vpce-0bbbbbbbbbbbbbbbb" in capsys.readouterr().out


def test_without_a_sagemaker_api_endpoint_its_field_is_cleared(tmp_path: Path) -> None:
    spec_path = _spec_copy(tmp_path)
    outputs = {k: v for k, v in DEPLOYED.items() if k != "SageMakerApiEndpointId"}
    assert main([str(spec_path), "--outputs-file", str(_outputs(tmp_path, outputs))]) == 0
    assert load_spec(spec_path).network.sagemaker_api_endpoint_id is None


@pytest.mark.parametrize(
    ("outputs_text", "expected"),
    [
        (json.dumps({"other-network": DEPLOYED}), "has no stack 'llm-demo-network' (it has: other-network)"),
        ("{not json", "is not JSON (line 1)"),
        (json.dumps(["VpcId"]), "is not what `npx cdk deploy --outputs-file` writes"),
        (json.dumps({"llm-demo-network": {"VpcId": DEPLOYED["VpcId"]}}), "outputs S3GatewayEndpointId are missing"),
        (
            json.dumps({"llm-demo-network": {**DEPLOYED, "VpcId": "vpc-xyz"}}),
            "network.vpc_id: 'vpc-xyz' must be a VPC id such as vpc-0123456789abcdef0",
        ),
    ],
    ids=["other-stack", "not-json", "not-cdk-format", "missing-output", "bad-id"],
)
def test_bad_outputs_are_one_line_and_leave_the_spec_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], outputs_text: str, expected: str
) -> None:
    spec_path = _spec_copy(tmp_path)
    outputs = tmp_path / "outputs.json"
    outputs.write_text(outputs_text)
    assert main([str(spec_path), "--outputs-file", str(outputs)]) == 2
    assert expected in _one_error(capsys)
    assert spec_path.read_text() == DEFAULT_SPEC_PATH.read_text()


def test_a_missing_outputs_file_names_the_option_and_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(_spec_copy(tmp_path)), "--outputs-file", str(tmp_path / "nope.json")]) == 2
    assert f"--outputs-file: '{tmp_path / 'nope.json'}' cannot be read" in _one_error(capsys)


def test_an_invalid_spec_is_refused_before_any_output_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_path = tmp_path / "bad.yaml"
    spec_path.write_text(DEFAULT_SPEC_PATH.read_text().replace("region: us-east-1", "region: mars-1"))
    assert main([str(spec_path), "--outputs-file", str(tmp_path / "never-read.json")]) == 2
    assert "region: 'mars-1'" in capsys.readouterr().err


def _no_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)


def test_without_credentials_or_an_outputs_file_it_says_which_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_aws_credentials(monkeypatch, tmp_path)
    assert main([str(_spec_copy(tmp_path))]) == 2
    line = _one_error(capsys)
    assert "the environment gives no AWS credentials" in line
    assert "--outputs-file" in line
    assert main([str(_spec_copy(tmp_path)), "--profile", "compute"]) == 2
    assert "--profile: 'compute' is not a profile" in _one_error(capsys)


def test_with_credentials_it_reads_the_deployed_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The boto3 path against moto's CloudFormation (the same API calls, answered offline)."""
    import boto3
    from moto import mock_aws

    _no_aws_credentials(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    template = {
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {name: {"Value": value} for name, value in DEPLOYED.items()},
    }
    spec_path = _spec_copy(tmp_path)
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name="us-east-1")
        cloudformation.create_stack(StackName="llm-demo-network", TemplateBody=json.dumps(template))
        assert main([str(spec_path)]) == 0
        assert load_spec(spec_path).network.vpc_id == DEPLOYED["VpcId"]
        assert main([str(tmp_path / "other.yaml")]) == 2  # (a missing spec file: one line)
        capsys.readouterr()
        renamed = tmp_path / "renamed.yaml"
        renamed.write_text(DEFAULT_SPEC_PATH.read_text().replace("name: llm-demo", "name: llm-other"))
        assert main([str(renamed)]) == 2
        assert "stack 'llm-other-network' in us-east-1: cannot be described" in _one_error(capsys)


def test_the_example_spec_says_so_in_one_warning_line() -> None:
    warning = example_warning(load_spec())
    assert warning is not None
    (line,) = warning.splitlines()
    assert line.startswith("warning: llm-demo: ")
    assert "111111111111, 222222222222" in line
    for field in EXAMPLE_IDS:
        assert f"network.{field}" in line
    assert "llm-phase-two" in line


def test_a_spec_with_real_accounts_and_ids_has_no_warning() -> None:
    doc = yaml.safe_load(DEFAULT_SPEC_PATH.read_text())
    text = json.dumps(doc).replace("111111111111", "123456789012").replace("222222222222", "210987654321")
    doc = json.loads(text)
    doc["network"].update(
        vpc_id=DEPLOYED["VpcId"],
        s3_gateway_endpoint_id=DEPLOYED["S3GatewayEndpointId"],
        sagemaker_api_endpoint_id=DEPLOYED["SageMakerApiEndpointId"],
    )
    assert example_warning(parse_spec(doc)) is None
    doc["network"]["vpc_id"] = EXAMPLE_IDS["vpc_id"]
    assert "network.vpc_id" in (example_warning(parse_spec(doc)) or "")


def test_the_examples_carry_only_the_example_ids() -> None:
    """Every phase-two id in the shipped specs is one of the recognisable examples, so synth warns about it."""
    for path in [DEFAULT_SPEC_PATH, *sorted((REPO / "spec" / "examples").glob("*.yaml"))]:
        network = load_spec(path).network
        for field, example in EXAMPLE_IDS.items():
            assert getattr(network, field) in (None, example), (path.name, field)
        assert example_warning(load_spec(path)) is not None, path.name


@pytest.mark.parametrize(
    "content",
    [
        DEFAULT_SPEC_PATH.read_text().replace("llm-demo", "llm-d\u00e9mo").encode("latin-1"),
        DEFAULT_SPEC_PATH.read_text().encode("utf-16"),
        "a0: &a0 [lol]\n" + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 12)),
    ],
    ids=["latin-1", "utf-16", "alias-bomb"],
)
def test_a_spec_that_is_not_utf8_yaml_or_is_an_alias_bomb_is_one_line_and_left_alone(
    tmp_path: Path, content: bytes | str
) -> None:
    spec_path = tmp_path / "my-deployment.yaml"
    spec_path.write_bytes(content if isinstance(content, bytes) else content.encode())
    kept = plant_sentinels([spec_path])
    outcome = run_main(main, [str(spec_path), "--outputs-file", str(_outputs(tmp_path, DEPLOYED))])
    assert_clear_refusal(outcome, str(spec_path))
    assert_sentinels_survive(kept)


def test_an_outputs_file_that_is_not_utf8_names_the_option_and_the_path(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs.json"
    outputs.write_bytes(json.dumps({"llm-demo-network": DEPLOYED}).encode("utf-16"))
    spec_path = _spec_copy(tmp_path)
    kept = plant_sentinels([spec_path])
    outcome = run_main(main, [str(spec_path), "--outputs-file", str(outputs)])
    assert_clear_refusal(outcome, "--outputs-file")
    assert "is not UTF-8 text" in outcome.stderr
    assert_sentinels_survive(kept)
