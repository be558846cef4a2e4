"""The rehearsal's reader: the edits of README's copied spec and the substitutions in README's commands
(tests/rehearsal/user_spec.py). Fast: no emulator, no synth."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from spec import DEFAULT_SPEC_PATH
from tests.rehearsal import readme, user_spec
from tests.rehearsal.run import UnknownLiteral, rehearse
from tests.rehearsal.table import DOC

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
EXAMPLE = user_spec.example_spec()
EDITED = user_spec.edited_spec()
SUBS = user_spec.substitutions(EXAMPLE, EDITED)


def test_the_edit_changes_only_the_values_and_keeps_the_comments() -> None:
    example = DEFAULT_SPEC_PATH.read_text()
    edited = user_spec.edit(example, "my-deployment.yaml")
    removed = [line for line in difflib.ndiff(example.splitlines(), edited.splitlines()) if line.startswith("- ")]
    added = [line for line in difflib.ndiff(example.splitlines(), edited.splitlines()) if line.startswith("+ ")]
    assert len(removed) == len(added) == len(user_spec.EDITS)
    for (field, value), old, new in zip(user_spec.EDITS, removed, added, strict=True):
        assert value in new and value not in old, (field, old, new)
        # The line but the value is as it was: indentation, quoting, the comment after it.
        assert old.replace(str(user_spec.value_at(EXAMPLE, field)), value)[2:] == new[2:], (old, new)
    assert len([line for line in edited.splitlines() if "#" in line]) == len(
        [line for line in example.splitlines() if "#" in line]
    )


def test_the_edited_spec_holds_every_edit_and_shares_nothing_the_edit_changes_with_the_example() -> None:
    for field, value in user_spec.EDITS:
        assert user_spec.value_at(EDITED, field) == value, field
    changed = {sub.example for sub in SUBS if sub.example != sub.edited}
    assert {"llm-demo", "111111111111", "222222222222"} <= changed
    assert EDITED.region == EXAMPLE.region  # moto serves it; README's commands name it


def test_the_edits_cover_readmes_what_to_change_table() -> None:
    """Each field README tells the reader to change is changed by the rehearsal or kept with a reason; a field the
    table gains fails here until the rehearsal decides."""
    table = readme.fields_to_change(README)
    edited = {re.sub(r"\[\d+\]", "[*]", field) for field, _ in user_spec.EDITS}
    edited |= {field.removesuffix("[*]") for field in edited}
    assert [field for field in table if field not in edited and field not in user_spec.KEPT] == []
    assert [field for field in user_spec.KEPT if field not in table] == []
    assert all(user_spec.KEPT.values())


def test_a_field_the_copied_spec_lacks_is_one_line_naming_it() -> None:
    with pytest.raises(user_spec.EditError) as raised:
        user_spec.set_value(
            DEFAULT_SPEC_PATH.read_text(), "data.datasets[7].access_point", "x-ap", "my-deployment.yaml"
        )
    assert str(raised.value) == "my-deployment.yaml: data.datasets[7].access_point: not in the file; cannot set 'x-ap'"
    with pytest.raises(user_spec.EditError, match=r"^my-deployment.yaml: data: not a single value"):
        user_spec.set_value(DEFAULT_SPEC_PATH.read_text(), "data", "x", "my-deployment.yaml")


def test_substitution_replaces_whole_names_the_longest_first() -> None:
    text = (
        'npx cdk bootstrap aws://111111111111/us-east-1 --profile compute\nnpx cdk deploy -c spec="$SPEC" '
        'llm-demo-network llm-demo-data\n--description "llm-demo data perimeter"\ns3://llm-demo-datasets-222222222222/'
    )
    assert user_spec.substitute(text, SUBS) == (
        'npx cdk bootstrap aws://444444444444/us-east-1 --profile compute\nnpx cdk deploy -c spec="$SPEC" '
        'acme-llm-network acme-llm-data\n--description "acme-llm data perimeter"\ns3://acme-corpora-555555555555/'
    )


def test_readmes_rehearsed_commands_hold_no_literal_of_the_example_the_rehearsal_cannot_substitute() -> None:
    texts = readme.rehearsed_texts(README)
    assert [problem for text in texts for problem in user_spec.unknown_literals(text, SUBS)] == []
    substituted = "\n".join(user_spec.substitute(text, SUBS) for text in texts)
    for value in ("llm-demo", EXAMPLE.accounts.compute, EXAMPLE.accounts.data):
        assert value not in substituted
    assert f"{EDITED.name}-network" in substituted and EDITED.accounts.data in substituted


def test_a_readme_literal_the_rehearsal_cannot_substitute_stops_it_before_anything_runs(tmp_path: Path) -> None:
    """README gains a name of the example that no substitution covers: the rehearsal names it and starts nothing."""
    deploy = readme.section(README, readme.DEPLOY_SECTION)
    unknown = "aws s3 ls s3://llm-demo-scratch-111111111111/ --profile compute\n"
    gained = README.replace(deploy, deploy.replace("npx cdk bootstrap", unknown + "npx cdk bootstrap", 1))
    problems = [
        problem for text in readme.rehearsed_texts(gained) for problem in user_spec.unknown_literals(text, SUBS)
    ]
    assert problems and all("'s3://llm-demo-scratch-111111111111/'" in problem for problem in problems), problems
    with pytest.raises(UnknownLiteral) as raised:
        rehearse(tmp_path, readme_text=gained)
    message = str(raised.value)
    assert "README.md:" in message and "s3://llm-demo-scratch-111111111111/" in message, message
    assert "'llm-demo'" in message and "'111111111111'" in message
    assert not (tmp_path / "live").exists()  # nothing ran


def test_docs_rehearsal_md_shows_the_readers_spec_and_runs_readme_on_it() -> None:
    doc = (REPO / DOC).read_text()
    for field, value in user_spec.EDITS:
        assert re.search(rf"^\| `{re.escape(field)}` \| .* \| `{re.escape(value)}` \|", doc, re.M), field
    commands = re.findall(r"^\| \d+ \| (?:deploy|tear-down) \| (`.*?`) \|", doc, re.M)
    assert commands and not [c for c in commands if "llm-demo" in c or EXAMPLE.accounts.compute in c]
    assert any(f"{EDITED.name}-network" in command for command in commands)
