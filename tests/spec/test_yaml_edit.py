"""Setting a few scalars of a YAML section changes only their characters: comments and layout stay."""

from __future__ import annotations

import pytest
import yaml

from spec import DEFAULT_SPEC_PATH, SpecError
from spec.yaml_edit import set_scalars

TEXT = """\
# top comment
name: x
network:
  mode: create              # the network stack builds the VPC
  vpc_id: vpc-0123456789abcdef0   # example
  s3_gateway_endpoint_id: 'vpce-0123456789abcdef0'
  sagemaker_api_endpoint_id:
  existing:
    subnet_ids: [subnet-0123456789abcdef0]
  # a comment at the section's end
data: {}
"""


def test_existing_values_change_in_place_and_keep_comments_and_quotes() -> None:
    new = set_scalars(
        TEXT,
        "network",
        {
            "vpc_id": "vpc-0aaaaaaaaaaaaaaaa",
            "s3_gateway_endpoint_id": "vpce-0bbbbbbbbbbbbbbbb",
            "sagemaker_api_endpoint_id": "vpce-0cccccccccccccccc",
        },
    )
    assert new == (
        TEXT.replace("vpc-0123456789abcdef0", "vpc-0aaaaaaaaaaaaaaaa")
        .replace("'vpce-0123456789abcdef0'", "'vpce-0bbbbbbbbbbbbbbbb'")
        .replace("sagemaker_api_endpoint_id:\n", "sagemaker_api_endpoint_id: vpce-0cccccccccccccccc\n")
    )


def test_a_missing_key_is_added_at_the_sections_indentation_after_its_last_scalar() -> None:
    text = "network:\n    mode: create  # c\n    existing:\n      k: v\nother: 1\n"
    new = set_scalars(text, "network", {"vpc_id": "vpc-0aaaaaaaaaaaaaaaa"})
    assert (
        new
        == "network:\n    mode: create  # c\n    vpc_id: vpc-0aaaaaaaaaaaaaaaa\n    existing:\n      k: v\nother: 1\n"
    )
    assert yaml.safe_load(new)["network"]["vpc_id"] == "vpc-0aaaaaaaaaaaaaaaa"


def test_a_mark_comment_goes_with_the_value_it_marks() -> None:
    text = "network:\n  vpc_id: vpc-0123456789abcdef0   # example: replace me\n  mode: create  # example too\n"
    new = set_scalars(text, "network", {"vpc_id": "vpc-0aaaaaaaaaaaaaaaa", "mode": "create"}, drop_mark="# example")
    assert new == "network:\n  vpc_id: vpc-0aaaaaaaaaaaaaaaa\n  mode: create  # example too\n"
    empty = set_scalars("network:\n  vpc_id:   # example\n", "network", {"vpc_id": "vpc-0a"}, drop_mark="# example")
    assert empty == "network:\n  vpc_id: vpc-0a\n"


def test_none_writes_null() -> None:
    new = set_scalars(TEXT, "network", {"s3_gateway_endpoint_id": None})
    assert yaml.safe_load(new)["network"]["s3_gateway_endpoint_id"] is None
    assert "# example" in new


def test_the_default_spec_round_trips_with_every_comment() -> None:
    text = DEFAULT_SPEC_PATH.read_text()
    same = set_scalars(text, "network", {"vpc_id": yaml.safe_load(text)["network"]["vpc_id"]})
    assert same == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("network: {mode: create}\n", "network: '{mode: create}' must be a block mapping"),
        ("name: x\n", "network: None is missing"),
        ("network:\n  vpc_id: [a]\n", "network.vpc_id: '[a]' must be a scalar"),
        ("network: [\n", "is not valid YAML at line 2"),
    ],
)
def test_what_cannot_be_edited_is_one_line_naming_the_field(text: str, expected: str) -> None:
    with pytest.raises(SpecError) as raised:
        set_scalars(text, "network", {"vpc_id": "vpc-0aaaaaaaaaaaaaaaa"}, "my.yaml")
    (line,) = str(raised.value).splitlines()
    assert expected in line
    assert line.startswith("my.yaml: ")
