"""One CLI contract (spec/cli.py): every command wraps its main in user_errors, so a UserError is
`error: <line>` on stderr and exit 2, and the commands are the entry points pyproject.toml declares."""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

import pytest

from spec.cli import user_errors
from spec.errors import UserError

REPO = Path(__file__).resolve().parents[1]
# Every top-level package but the tests: derived, so a command moved into a new package is never skipped.
SHIPPED = tuple(sorted(path.parent.name for path in REPO.glob("*/__init__.py") if path.parent.name != "tests"))
# mains outside the contract, and why.
EXEMPT = {
    "training/train.py": "its exit statuses are the requeue contract with the job script (training/signals.py)",
    "launch/jobs/nemo_pretrain.py": "runs inside the NeMo container, where the repo's spec package is absent",
    "launch/jobs/bridge_pretrain.py": "runs inside the NeMo Framework container, where the repo's spec package is absent",
    "cluster/verify/pcluster/validate_config.py": "runs in .pcluster-venv, without the repo's dependencies",
    "cluster/verify/pcluster/dump_update_policies.py": "runs in .pcluster-venv, without the repo's dependencies",
    "cluster/verify/pcluster/node_policies.py": "runs in .pcluster-venv, without the repo's dependencies",
    "cluster/verify/pcluster/config_patch.py": "runs in .pcluster-venv, without the repo's dependencies",
    "cluster/verify/pcluster/parse_commands.py": "runs in .pcluster-venv, without the repo's dependencies",
    "bench/gpu_vs_torchtitan.py": "copied alone to a GPU machine with its own wheels",
    "launch/liveness.py": "run by path by torchrun and the job script (stdlib only), with the Neuron venv's python on nodes",
    "launch/lease.py": "run by path by the job script (stdlib only); its exit status is the script's refusal",
    "training/checkpoint/ownership.py": "run by path by the job script (stdlib only); its exit status is the refusal",
}


def _mains() -> list[tuple[str, ast.FunctionDef]]:
    found = []
    for package in SHIPPED:
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [
                (str(path.relative_to(REPO)), node)
                for node in tree.body
                if isinstance(node, ast.FunctionDef) and node.name == "main"
            ]
    return found


def test_every_main_is_wrapped_in_user_errors() -> None:
    unwrapped = [
        path
        for path, node in _mains()
        if path not in EXEMPT
        and not any(isinstance(d, ast.Name) and d.id == "user_errors" for d in node.decorator_list)
    ]
    assert unwrapped == []


def test_the_exemptions_still_exist() -> None:
    assert set(EXEMPT) <= {path for path, _ in _mains()}


def test_every_entry_point_is_a_wrapped_main() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert "llm-submit" in scripts  # the head node's command
    for name, target in scripts.items():
        module, function = target.split(":")
        main = getattr(importlib.import_module(module), function)
        assert getattr(main, "__wrapped__", None) is not None, f"{name}: {target} is not wrapped in user_errors"


def test_every_entry_points_module_is_among_the_scanned_mains() -> None:
    # A command moved into a package SHIPPED did not list would be skipped by the wrapping check above.
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    scanned = {path for path, _ in _mains()}
    modules = {target.split(":")[0].replace(".", "/") + ".py" for target in scripts.values()}
    assert modules - scanned == set()
    assert {"launch", "planner"} <= set(SHIPPED)


def test_a_user_error_is_one_error_line_per_problem_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    @user_errors
    def main(argv: list[str] | None = None) -> int:
        raise UserError("a.b: 'x' is not a y\nc: 3 is above 2")

    assert main([]) == 2
    assert capsys.readouterr().err == "error: a.b: 'x' is not a y\nerror: c: 3 is above 2\n"


def test_other_errors_pass_through_and_the_return_value_is_the_status() -> None:
    @user_errors
    def fails() -> int:
        raise RuntimeError("a bug, with its traceback")

    @user_errors
    def returns_none() -> None:
        return None

    with pytest.raises(RuntimeError):
        fails()
    assert returns_none() == 0


def test_a_cli_reports_a_bad_spec_the_contract_way(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from policies.guardrails import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: 7\n")
    assert main(["--spec", str(bad)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), lines
