from pathlib import Path

from bench.synth import template_count


def test_template_count_counts_stacks_and_nested_stacks(tmp_path: Path) -> None:
    for name in (
        "a.template.json",
        "b.template.json",
        "bnested.nested.template.json",
        "a.assets.json",
        "manifest.json",
    ):
        (tmp_path / name).write_text("{}")
    assert template_count(tmp_path) == 3
