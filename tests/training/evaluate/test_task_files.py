"""Task YAMLs: a file that does not parse, a missing data file or an unknown task is one line naming it; the
rendered copy names data files absolutely and keeps lm-eval's own tags."""

from pathlib import Path

import pytest
import yaml

from training.evaluate.errors import EvalError
from training.evaluate.task_files import _TaskLoader, check_tasks, render_tasks

TASK = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: data/{name}.jsonl
test_split: test
process_docs: !function utils.process_docs
output_type: multiple_choice
doc_to_text: "{{{{q}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: label
"""


def _task_dir(root: Path, name: str = "mine") -> Path:
    (root / "data").mkdir(parents=True)
    (root / f"{name}.yaml").write_text(TASK.format(name=name))
    (root / "data" / f"{name}.jsonl").write_text('{"q": "?", "choices": ["a", "b"], "label": 0}\n')
    (root / "utils.py").write_text("def process_docs(dataset):\n    return dataset\n")
    return root


def test_rendered_tasks_name_their_data_absolutely_and_keep_function_tags(tmp_path: Path) -> None:
    tasks = _task_dir(tmp_path / "tasks")
    out = render_tasks(tasks, tmp_path / "rendered")
    data = yaml.load((out / "mine.yaml").read_text(), Loader=_TaskLoader)
    assert data["dataset_kwargs"]["data_files"] == {"test": str(tasks / "data" / "mine.jsonl")}
    assert "process_docs: !function 'utils.process_docs'" in (out / "mine.yaml").read_text() or (
        "process_docs: !function utils.process_docs" in (out / "mine.yaml").read_text()
    )
    assert (out / "utils.py").is_file() and not (out / "data" / "mine.jsonl").exists()


def test_a_task_file_that_does_not_parse_is_one_line_naming_it(tmp_path: Path) -> None:
    tasks = _task_dir(tmp_path / "tasks")
    (tasks / "broken.yaml").write_text("task: broken\ndoc_to_text: [unclosed\n")
    with pytest.raises(EvalError) as error:
        check_tasks(tasks, ["mine"])
    assert str(error.value).startswith(f"{tasks / 'broken.yaml'}: does not parse as a task YAML at line")
    assert "\n" not in str(error.value)


def test_a_missing_data_file_and_an_unknown_task_are_named(tmp_path: Path) -> None:
    tasks = _task_dir(tmp_path / "tasks")
    (tasks / "data" / "mine.jsonl").unlink()
    with pytest.raises(
        EvalError, match=r"mine\.yaml: dataset_kwargs\.data_files test 'data/mine\.jsonl' is not a file"
    ):
        check_tasks(tasks, ["mine"])
    with pytest.raises(EvalError, match=r"^--tasks: 'hellaswag' is in no task YAML under .* \(it has: mine\)$"):
        check_tasks(tasks, ["hellaswag"])
