"""The spec loads, and every bad value fails with one line naming the field path and the value."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from spec import DEFAULT_SPEC_PATH, SpecError, load_spec, parse_spec


def default_doc() -> dict[str, Any]:
    return yaml.safe_load(DEFAULT_SPEC_PATH.read_text())


def test_default_spec_loads_offline() -> None:
    spec = load_spec()
    assert spec.accounts.compute == "111111111111"
    assert spec.accounts.data == "222222222222"
    assert spec.organization_id is not None
    assert spec.s3_prefix_list_id == "pl-63a5400a"
    assert spec.role_arn("cluster-node") == "arn:aws:iam::111111111111:role/llm-demo-cluster-node"


def test_spec_file_is_picked_by_path(tmp_path: Path) -> None:
    doc = default_doc()
    doc["name"] = "other-team"
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert load_spec(path).name == "other-team"


def test_spec_module_imports_without_cdk_or_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, spec; spec.load_spec();"
        "bad = [m for m in ('aws_cdk', 'torch', 'constructs') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    parts = path.replace("]", "").replace("[", ".").split(".")
    node: Any = doc
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    last = parts[-1]
    if value is _DELETE:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value


_DELETE = object()

# (description, edits, expected field path in the message, expected value text in the message)
BAD_SPECS: list[tuple[str, list[tuple[str, Any]], str, str]] = [
    ("account id too short", [("accounts.compute", "12345")], "accounts.compute", "'12345'"),
    ("account id with letters", [("accounts.data", "22222222222x")], "accounts.data", "22222222222x"),
    ("unknown region", [("region", "us-moon-1")], "region", "'us-moon-1'"),
    ("AZ outside region", [("network.availability_zone", "us-west-2a")], "network.availability_zone", "us-west-2a"),
    (
        "access point with uppercase",
        [("data.datasets[0].access_point", "Pretraining_AP")],
        "data.datasets[0].access_point",
        "Pretraining_AP",
    ),
    (
        "access point with reserved suffix",
        [("data.datasets[1].access_point", "ft-s3alias")],
        "data.datasets[1].access_point",
        "ft-s3alias",
    ),
    (
        "prefix without slash",
        [("data.datasets[0].prefix", "corpora/pretraining")],
        "data.datasets[0].prefix",
        "corpora/pretraining",
    ),
    ("whole bucket granted", [("data.datasets[1].prefix", "/")], "data.datasets[1].prefix", "'/'"),
    ("wildcard prefix", [("data.datasets[1].prefix", "corpora/*/")], "data.datasets[1].prefix", "corpora/*/"),
    (
        "overlapping prefixes",
        [("data.datasets[1].prefix", "corpora/pretraining/extra/")],
        "data.datasets[1].prefix",
        "corpora/pretraining/extra/",
    ),
    ("duplicate dataset names", [("data.datasets[1].name", "pretraining")], "data.datasets[1].name", "'pretraining'"),
    (
        "duplicate access points",
        [("data.datasets[2].access_point", "llm-demo-pretraining")],
        "data.datasets[2].access_point",
        "llm-demo-pretraining",
    ),
    (
        "reader in the wrong account",
        [("data.datasets[0].readers[0]", "arn:aws:iam::333333333333:role/analyst")],
        "data.datasets[0].readers[0]",
        "333333333333",
    ),
    (
        "reader that is no role",
        [("data.datasets[0].readers[0]", "everyone")],
        "data.datasets[0].readers[0]",
        "'everyone'",
    ),
    (
        "missing organization id for the perimeter",
        [("organization_id", _DELETE)],
        "organization_id",
        "perimeter.organization_bound",
    ),
    ("bad organization id", [("organization_id", "org-123")], "organization_id", "'org-123'"),
    ("bucket with dots", [("data.bucket_name", "my.bucket")], "data.bucket_name", "'my.bucket'"),
    ("bucket too long for its log bucket", [("data.bucket_name", "b" * 60)], "data.bucket_name", "bbbb"),
    (
        "internet-origin access point",
        [("data.datasets[0].network_origin", "internet")],
        "data.datasets[0].network_origin",
        "'internet'",
    ),
    (
        "writers without output prefix",
        [("data.datasets[1].writers", ["cluster-node"])],
        "data.datasets[1].output_prefix",
        "None",
    ),
    (
        "output prefix outside the dataset",
        [("data.datasets[0].output_prefix", "elsewhere/")],
        "data.datasets[0].output_prefix",
        "elsewhere/",
    ),
    ("notebook reader while notebook off", [("notebook.enabled", False)], "data.datasets[0].readers[2]", "'notebook'"),
    ("same account twice", [("accounts.data", "111111111111")], "accounts.data", "111111111111"),
    ("misspelled key", [("network.internet_egres", "none")], "network.internet_egres", "'none'"),
    ("bad egress choice", [("network.internet_egress", "igw")], "network.internet_egress", "'igw'"),
    ("public CIDR", [("network.cidr", "8.8.0.0/16")], "network.cidr", "8.8.0.0/16"),
    ("bad VPC id", [("network.vpc_id", "vpc-xyz")], "network.vpc_id", "'vpc-xyz'"),
    ("existing mode without subnets", [("network.mode", "existing")], "network.existing", "None"),
    (
        "KMS key in the compute account",
        [
            (
                "data.encryption",
                {"kms_key_arn": "arn:aws:kms:us-east-1:111111111111:key/0f0e0d0c-0b0a-0908-0706-050403020100"},
            )
        ],
        "data.encryption.kms_key_arn",
        "111111111111",
    ),
    (
        "region without pinned prefix list",
        [("region", "eu-north-1"), ("network.availability_zone", "eu-north-1a")],
        "network.s3_prefix_list_id",
        "None",
    ),
    ("dataset granting nobody", [("data.datasets[1].readers", [])], "data.datasets[1].readers", "[]"),
    (
        "checkpoint replica naming no dataset",
        [("data.checkpoint_replica", "ckpts")],
        "data.checkpoint_replica",
        "'ckpts'",
    ),
    (
        "checkpoint replica the nodes cannot write",
        [("data.checkpoint_replica", "finetuning")],
        "data.checkpoint_replica",
        "'finetuning'",
    ),
    ("bad notebook type", [("notebook.instance_type", "t3.medium")], "notebook.instance_type", "'t3.medium'"),
    # Over what the FSx API takes (StorageCapacity is a 32-bit integer), though a multiple of 2400.
    ("FSx past the API's size", [("cluster.fsx.storage_gib", 2400 * 10**6)], "cluster.fsx.storage_gib", "2400000000"),
    ("queue count past any fleet", [("cluster.queues[0].min_count", 10**30)], "cluster.queues[0].min_count", "1000"),
    ("malformed AMI id", [("cluster.custom_ami", "ami-12345")], "cluster.custom_ami", "'ami-12345'"),
    *(
        (f"wheelhouse {uri}", [("cluster.python_wheelhouse", uri)], "cluster.python_wheelhouse", repr(uri))
        for uri in (
            "s3://my..bucket/wheels/",
            "s3://192.168.1.1/wheels/",
            "s3://xn--bucket/wheels/",
            "s3://my-bucket/wheels//py3.11/",
            "s3://my-bucket/wheels/../other/",
            "s3://My-Bucket/wheels/",
        )
    ),
]


@pytest.mark.parametrize(("case", "edits", "path", "value"), BAD_SPECS, ids=[c[0] for c in BAD_SPECS])
def test_bad_spec_names_field_and_value(case: str, edits: list[tuple[str, Any]], path: str, value: str) -> None:
    doc = copy.deepcopy(default_doc())
    for field, new in edits:
        _set(doc, field, new)
    with pytest.raises(SpecError) as raised:
        parse_spec(doc, source="bad.yaml")
    lines = str(raised.value).splitlines()
    matching = [line for line in lines if line.startswith(f"bad.yaml: {path}: ")]
    assert matching, f"{case}: no line names {path!r}: {lines}"
    assert any(value in line for line in matching), f"{case}: value {value!r} missing from {matching}"


def test_yaml_account_ids_as_numbers_are_accepted_when_twelve_digits() -> None:
    doc = default_doc()
    doc["accounts"]["compute"] = 111111111111
    assert parse_spec(doc).accounts.compute == "111111111111"


def test_unreadable_and_malformed_files_give_one_line(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"<file>: .*missing.yaml.* cannot be read"):
        load_spec(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match=r"not valid YAML at line"):
        load_spec(broken)


def test_readme_and_the_spec_agree_that_the_two_accounts_differ() -> None:
    """Separate accounts are the design's boundary (the data account's policies admit the compute account's roles,
    and no administrator of one is one of the other); README's field table must not promise otherwise."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    (row,) = [line for line in readme.splitlines() if line.startswith("| `accounts.compute`, `accounts.data` |")]
    assert "may be the same" not in row
    assert "two different account ids" in row
    doc = default_doc()
    doc["accounts"]["data"] = doc["accounts"]["compute"]
    with pytest.raises(SpecError, match=r"accounts\.data: '111111111111' equals accounts\.compute"):
        parse_spec(doc)
