"""docs/rehearsal.md names every resource type of the deployment that moto's CloudFormation accepts without a model
(tests/rehearsal/unmodelled.py), computed here from a fresh synth and moto's own type lookup."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rehearsal import unmodelled
from tests.rehearsal.table import DOC
from tests.stacks.conftest import Assembly

REPO = Path(__file__).resolve().parents[1]


def test_moto_models_a_type_by_its_own_lookup() -> None:
    assert unmodelled.moto_models_type("AWS::S3::Bucket")
    assert unmodelled.moto_models_type("Custom::Anything")  # moto's custom-resource model (it runs the Lambda)
    assert not unmodelled.moto_models_type("AWS::S3::AccessPoint")
    assert not unmodelled.moto_models_type("AWS::CloudFormation::WaitConditionHandle")  # moto ignores it outright


def test_the_types_are_counted_by_stack_with_their_properties() -> None:
    template = {
        "Resources": {
            "A": {"Type": "AWS::S3::AccessPoint", "Properties": {"Bucket": "b", "Policy": {}}},
            "B": {"Type": "AWS::S3::AccessPoint", "Properties": {"VpcConfiguration": {}}},
            "C": {"Type": "AWS::S3::Bucket"},
        }
    }
    rows = unmodelled.unmodelled([("data", template), ("other", {"Resources": {"D": template["Resources"]["A"]}})])
    assert [(row.type, row.stacks, row.count, row.properties) for row in rows] == [
        ("AWS::S3::AccessPoint", ["data", "other"], 3, {"Bucket", "Policy", "VpcConfiguration"})
    ]


def test_a_doc_without_the_section_lists_nothing() -> None:
    assert unmodelled.documented("# t\n\n## Other\n\n| `AWS::S3::AccessPoint` | x |\n") == set()


@pytest.mark.synth
def test_docs_rehearsal_md_names_every_type_moto_accepts_without_a_model(default_assembly: Assembly) -> None:
    """(types of the synthesized templates and of the bootstrap stack) minus (types moto models) is the table of
    docs/rehearsal.md, and each has a line saying what it carries."""
    templates = [(name, template) for name, template in default_assembly.templates.items()]
    templates.append(("CDKToolkit", unmodelled.bootstrap_template()))
    expected = {row.type for row in unmodelled.unmodelled(templates)}
    assert {"AWS::S3::AccessPoint", "AWS::S3::BucketPolicy", "AWS::EC2::SecurityGroupEgress"} <= expected
    assert unmodelled.documented((REPO / DOC).read_text()) == expected, "regenerate it: make rehearse"
    assert sorted(expected - set(unmodelled.CARRIES)) == []


def test_the_security_groups_held_open_are_said_by_stack() -> None:
    groups = [("net", True, True), ("net", True, False), ("net", False, True), ("other", True, True)]
    said = " ".join(unmodelled.opened_groups(groups))
    assert "of the 3 security groups whose egress the templates restrict" in said
    assert "holds 2 (`net`, `other`) open to 0.0.0.0/0" in said
    assert "holds none open" in " ".join(unmodelled.opened_groups([("net", True, False)]))
    assert unmodelled.opened_groups([("net", False, True)]) == []
