from pathlib import Path

from training.corpus.stdlib_docstrings import iter_module_documents, module_sources

MODULE = '''"""A module about nothing in particular."""


class Widget:
    """A widget holds exactly one thing."""

    def __eq__(self, other):
        """Return self==value for any two values."""


def helper():
    """Return self==value for any two values."""


def tiny():
    """Short."""
'''


def fake_stdlib(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "widgets.py").write_text(MODULE)
    (root / "pkg" / "__init__.py").write_text('"""The package docstring has words."""\n')
    (root / "test").mkdir()
    (root / "test" / "test_widgets.py").write_text('"""Tests are not prose for the corpus."""\n')
    (root / "site-packages").mkdir()
    (root / "site-packages" / "third.py").write_text('"""Third-party code is not the stdlib."""\n')
    (root / "config-3.11-x86_64").mkdir()
    (root / "config-3.11-x86_64" / "python-config.py").write_text('"""Not an importable module name."""\n')
    (root / "broken.py").write_text("def (:\n")
    return root


def test_modules_are_parsed_in_path_order_skipping_tests_and_third_party(tmp_path: Path) -> None:
    root = fake_stdlib(tmp_path)
    assert [name for name, _ in module_sources(root)] == ["broken", "pkg", "widgets"]


def test_one_document_per_module_with_repeated_and_tiny_docstrings_left_out(tmp_path: Path) -> None:
    documents = list(iter_module_documents(fake_stdlib(tmp_path)))
    assert [d.module for d in documents] == ["pkg", "widgets"]
    assert documents[1].text == (
        "widgets\n\nA module about nothing in particular.\n\n"
        "widgets.Widget\n\nA widget holds exactly one thing.\n\n"
        "widgets.Widget.__eq__\n\nReturn self==value for any two values.\n"
    )
