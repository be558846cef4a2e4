import re
from pathlib import Path

import pytest

from planner.calibration import CALIBRATED
from planner.compare import compare_all
from planner.plot import TABLE_END, TABLE_START, markdown_table, plot, update_doc

ROOT = Path(__file__).resolve().parents[2]


def test_plot_writes_a_png(tmp_path: Path) -> None:
    path = plot(tmp_path / "plot.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_markdown_table_has_a_line_per_compared_value() -> None:
    table = markdown_table()
    row_ids = ("| fsdp-blog/", "| megatron-lm/", "| trainium-blog/", "| sagemaker-talk/", "| fms/", "| foundry/")
    row_ids += ("| mbridge/", "| torchtitan/", "| ours/", "| llama3-paper/", "| nemo-24.07/", "| bloom/")
    row_ids += ("| megatron-readme/",)
    rows = [line for line in table.splitlines() if line.startswith(row_ids)]
    assert len(rows) == len(compare_all())
    assert "held-out rows: mean" in table
    for backend in ("fsdp", "nemo", "neuron"):  # the backends apart, as the plot shows them
        assert f"- backend {backend}: mean" in table


def test_update_doc_replaces_only_the_marked_block(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{TABLE_START}\nold\n{TABLE_END}\noutro\n", encoding="utf-8")
    assert update_doc(doc, "new")
    assert doc.read_text(encoding="utf-8") == f"intro\n{TABLE_START}\nnew\n{TABLE_END}\noutro\n"
    (tmp_path / "bare.md").write_text("no markers\n", encoding="utf-8")
    assert not update_doc(tmp_path / "bare.md", "new")


def test_docs_table_is_current() -> None:
    # docs/planner.md carries the predicted-vs-published table; regenerate with `python -m planner.plot`.
    text = (ROOT / "docs" / "planner.md").read_text(encoding="utf-8")
    block = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()
    assert block == markdown_table()
    assert (ROOT / "docs" / "planner-vs-published.png").exists()


def test_docs_parameter_table_matches_the_calibration() -> None:
    text = (ROOT / "docs" / "planner.md").read_text(encoding="utf-8")
    for name, value in CALIBRATED.as_flat_dict().items():
        match = re.search(rf"^\| `{re.escape(name)}` \| ([0-9.]+) \|", text, re.MULTILINE)
        assert match, name
        assert float(match.group(1)) == pytest.approx(value, abs=0.06), name
