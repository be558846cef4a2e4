"""Task YAMLs under a directory (the shipped ones, or a user's staged HellaSwag/ARC/MMLU): found by task name,
checked before anything runs, and rendered for lm-eval with their local data files made absolute.

lm-eval hands `dataset_kwargs.data_files` to `datasets.load_dataset` as they are, so a relative path would be read
from the job's working directory; staged task directories keep their data beside the YAML, and the rendered copy
names it by its absolute path. The rendered tree is a copy of the whole directory (a YAML's `!function` helpers
and `include:` files resolve beside it).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from training.evaluate.errors import EvalError


class _Tagged:
    """A YAML node with a tag of lm-eval's own (`!function utils.process_docs`), kept as written."""

    def __init__(self, tag: str, value: Any) -> None:
        self.tag, self.value = tag, value


class _TaskLoader(yaml.SafeLoader):
    pass


class _TaskDumper(yaml.SafeDumper):
    pass


def _construct_tagged(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> _Tagged:
    if isinstance(node, yaml.ScalarNode):
        return _Tagged("!" + tag_suffix, loader.construct_scalar(node))
    if isinstance(node, yaml.SequenceNode):
        return _Tagged("!" + tag_suffix, loader.construct_sequence(node, deep=True))
    return _Tagged("!" + tag_suffix, loader.construct_mapping(node, deep=True))  # type: ignore[arg-type]


def _represent_tagged(dumper: yaml.SafeDumper, data: _Tagged) -> yaml.Node:
    if isinstance(data.value, list):
        return dumper.represent_sequence(data.tag, data.value)
    if isinstance(data.value, dict):
        return dumper.represent_mapping(data.tag, data.value)
    return dumper.represent_scalar(data.tag, str(data.value))


_TaskLoader.add_multi_constructor("!", _construct_tagged)
_TaskDumper.add_representer(_Tagged, _represent_tagged)


def read_task_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_TaskLoader)  # a SafeLoader subclass
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise EvalError(f"{path}: does not parse as a task YAML{line}: {problem}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise EvalError(f"{path}: cannot be read: {error}") from None
    if not isinstance(data, dict):
        raise EvalError(f"{path}: a task YAML is a mapping, not {type(data).__name__}")
    return data


def _task_names(data: dict[str, Any]) -> list[str]:
    """The names a file declares: `task:` (a string, or a group's list) and `group:`."""
    names = []
    for key in ("task", "group"):
        value = data.get(key)
        if isinstance(value, str):
            names.append(value)
    return names


def task_index(tasks_dir: Path) -> dict[str, Path]:
    """Task (or group) name -> its YAML; every YAML under the directory must parse."""
    if not tasks_dir.is_dir():
        raise EvalError(f"--tasks-dir: {tasks_dir} is not a directory")
    index: dict[str, Path] = {}
    for path in sorted(tasks_dir.rglob("*.yaml")):
        for name in _task_names(read_task_file(path)):
            index.setdefault(name, path)
    return index


def _data_files(data: dict[str, Any]) -> dict[str, Any] | None:
    kwargs = data.get("dataset_kwargs")
    files = kwargs.get("data_files") if isinstance(kwargs, dict) else None
    if isinstance(files, str | list):
        return {"": files}
    return files if isinstance(files, dict) else None


def _absolute(value: Any, base: Path, path: Path, split: str) -> Any:
    if isinstance(value, list):
        return [_absolute(item, base, path, split) for item in value]
    if not isinstance(value, str) or "://" in value:
        return value
    resolved = value if Path(value).is_absolute() else str(base / value)
    if not any(char in resolved for char in "*?[") and not Path(resolved).is_file():
        raise EvalError(f"{path}: dataset_kwargs.data_files {split or 'entry'} {value!r} is not a file ({resolved})")
    return resolved


def check_tasks(tasks_dir: Path, tasks: list[str]) -> dict[str, Path]:
    """Each named task's YAML, with its local data files present; one line naming the file or task otherwise."""
    index = task_index(tasks_dir)
    missing = [task for task in tasks if task not in index]
    if missing:
        known = ", ".join(sorted(index)) or "none"
        raise EvalError(f"--tasks: {missing[0]!r} is in no task YAML under {tasks_dir} (it has: {known})")
    for path in {index[task] for task in tasks}:
        files = _data_files(read_task_file(path)) or {}
        for split, value in files.items():
            _absolute(value, path.parent, path, str(split))
    return {task: index[task] for task in tasks}


def render_tasks(tasks_dir: Path, output: Path) -> Path:
    """A copy of the directory whose YAMLs name their local data files absolutely; returns `output`."""
    if output.exists():
        shutil.rmtree(output)
    shutil.copytree(tasks_dir, output, ignore=shutil.ignore_patterns("*.jsonl", "*.json", "*.parquet", "*.csv"))
    for source in sorted(tasks_dir.rglob("*.yaml")):
        data = read_task_file(source)
        files = _data_files(data)
        if files is None:
            continue
        rendered = {split: _absolute(value, source.parent, source, str(split)) for split, value in files.items()}
        data["dataset_kwargs"]["data_files"] = rendered.get("", rendered) if list(rendered) == [""] else rendered
        target = output / source.relative_to(tasks_dir)
        target.write_text(yaml.dump(data, Dumper=_TaskDumper, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return output
