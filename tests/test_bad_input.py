"""Bad input, the spec's half (issue 33): a bounded, seeded property-based test over the deployment spec.

Mutations of spec/default.yaml, each fed to a user's command: a leaf or section replaced by a value of the wrong
type, a boolean, NaN, infinity or a huge number; a required key removed; an unknown key added; the file re-encoded
(Latin-1, UTF-16, UTF-32), replaced by binary, by an alias bomb, by nesting deeper than the parser follows, by a
syntax error. The command is `llm-phase-two SPEC --outputs-file ...` (spec.phase_two.main, in process), which
loads the spec like synth does and rewrites it in place on success. Every example must be refused: non-zero exit,
at most 3 lines, no traceback, the field path (or the file) named, and the spec file and a sentinel beside it
unchanged. The CLIs' half is tests/test_bad_input_cli.py; the assertions are tests/bad_input_checks.py.
"""

from __future__ import annotations

import copy
import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spec import DEFAULT_SPEC_PATH
from spec.phase_two import main as phase_two
from tests.bad_input_checks import (
    assert_clear_refusal,
    assert_sentinels_survive,
    plant_sentinels,
    run_command,
    run_main,
)

DEFAULT_TEXT = DEFAULT_SPEC_PATH.read_text(encoding="utf-8")
DEFAULT_DOC: dict[str, Any] = yaml.safe_load(DEFAULT_TEXT)
OUTPUTS = {"llm-demo-network": {"VpcId": "vpc-0aaaaaaaaaaaaaaaa", "S3GatewayEndpointId": "vpce-0bbbbbbbbbbbbbbbb"}}
# Keys the model requires (an optional one removed is a valid spec).
REQUIRED = (
    "name",
    "region",
    "accounts",
    "accounts.compute",
    "accounts.data",
    "network",
    "network.availability_zone",
    "data",
    "data.bucket_name",
    "data.datasets",
    "data.datasets[0].name",
    "data.datasets[0].prefix",
    "data.datasets[0].access_point",
    "cluster.queues",
    "cluster.queues[0].name",
    "cluster.queues[0].instance_type",
    "cluster.queues[0].max_count",
)
SETTINGS = settings(
    derandomize=True, max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def paths(node: Any, prefix: str = "") -> Iterator[str]:
    """Every key and item of the document, as the spec's error lines spell them."""
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            yield from paths(value, path)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            path = f"{prefix}[{index}]"
            yield path
            yield from paths(value, path)


ALL_PATHS = sorted(paths(DEFAULT_DOC))


def split(path: str) -> list[str | int]:
    parts: list[str | int] = []
    for piece in path.replace("]", "").replace("[", ".").split("."):
        parts.append(int(piece) if piece.isdigit() else piece)
    return parts


def parent_and_key(doc: Any, path: str) -> tuple[Any, str | int]:
    *head, last = split(path)
    node = doc
    for part in head:
        node = node[part]
    return node, last


def value_at(doc: Any, path: str) -> Any:
    node, key = parent_and_key(doc, path)
    return node[key]


MAPPINGS = [""] + [path for path in ALL_PATHS if isinstance(value_at(DEFAULT_DOC, path), dict)]


def wrong_values(current: Any) -> st.SearchStrategy[Any]:
    """Values no field of the spec accepts in place of `current`: of another type, non-finite, or far out of
    range (every integer field has bounds well below 10**12; no string field takes a number or a boolean)."""
    huge = st.integers(min_value=10**12, max_value=10**40) | st.integers(max_value=-1, min_value=-(10**40))
    non_finite = st.sampled_from([math.nan, math.inf, -math.inf])
    containers = st.sampled_from([["x"], {"x": 1}, []])
    if isinstance(current, bool):
        return st.sampled_from([1, 0, 2.5, "maybe", ["x"], {"x": 1}]) | non_finite
    if isinstance(current, int):
        return st.sampled_from([True, False, 2.5, "12", ["x"], {"x": 1}]) | non_finite | huge
    if isinstance(current, str):
        return st.sampled_from([True, False, 2.5, ["x"], {"x": 1}]) | non_finite | huge
    if isinstance(current, list):
        return st.sampled_from([True, 7, "x", {"x": 1}, 2.5]) | non_finite
    return st.sampled_from([True, 7, "x", ["x"], 2.5]) | non_finite | containers.filter(lambda v: v != {})


@dataclass(frozen=True)
class BadSpec:
    what: str
    content: bytes
    names: tuple[str, ...]  # one of them must appear in the refusal


def dumped(doc: Any) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode("utf-8")


@st.composite
def replaced_values(draw: st.DrawFn) -> BadSpec:
    path = draw(st.sampled_from(ALL_PATHS))
    value = draw(wrong_values(value_at(DEFAULT_DOC, path)))
    doc = copy.deepcopy(DEFAULT_DOC)
    node, key = parent_and_key(doc, path)
    node[key] = value
    # A mapping replaced by a wrong one is refused by the fields inside it (`accounts.compute: ... missing`).
    return BadSpec(f"{path} = {value!r}", dumped(doc), (f"{path}:", f"{path}.", f"{path}["))


@st.composite
def removed_keys(draw: st.DrawFn) -> BadSpec:
    path = draw(st.sampled_from(REQUIRED))
    doc = copy.deepcopy(DEFAULT_DOC)
    node, key = parent_and_key(doc, path)
    del node[key]
    return BadSpec(f"without {path}", dumped(doc), (f"{path}:",))


@st.composite
def unknown_keys(draw: st.DrawFn) -> BadSpec:
    where = draw(st.sampled_from(MAPPINGS))
    key = draw(st.sampled_from(["colour", "max_nodes", "Name", "region_"]))
    doc = copy.deepcopy(DEFAULT_DOC)
    node = value_at(doc, where) if where else doc
    if key in node:
        key += "_x"
    node[key] = draw(st.sampled_from([1, "x", True]))
    path = f"{where}.{key}" if where else key
    return BadSpec(f"unknown {path}", dumped(doc), (f"{path}:",))


def alias_bomb(levels: int, width: int) -> bytes:
    lines = ["a0: &a0 [lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return ("\n".join(lines) + "\n").encode()


@st.composite
def unfit_files(draw: st.DrawFn) -> BadSpec:
    """Whole files that are no spec; the refusal names the file."""
    text = "# caf\u00e9: a non-ASCII comment, as a user's editor would keep it\n" + DEFAULT_TEXT
    choices = {
        "latin-1": lambda: text.encode("latin-1"),
        "utf-16": lambda: text.encode("utf-16"),
        "utf-32": lambda: text.encode("utf-32"),
        "binary": lambda: b"\xff" + draw(st.binary(min_size=1, max_size=4096)),
        "alias bomb": lambda: alias_bomb(draw(st.integers(9, 30)), draw(st.integers(5, 12))),
        "deep nesting": lambda: b"a: " + b"[" * draw(st.integers(2000, 20000)),
        "syntax error": lambda: DEFAULT_TEXT.replace("network:\n", "network: [\n", 1).encode(),
        "NUL byte": lambda: DEFAULT_TEXT.replace("name: llm-demo", "name: llm\x00demo", 1).encode(),
        "not a mapping": lambda: draw(st.sampled_from([b"- a\n- b\n", b"42\n", b"just text\n"])),
    }
    kind = draw(st.sampled_from(sorted(choices)))
    return BadSpec(kind, choices[kind](), ())


def refused_and_kept(tmp: Path, bad: BadSpec) -> None:
    spec = tmp / "my-deployment.yaml"
    spec.write_bytes(bad.content)
    outputs = tmp / "network-outputs.json"
    outputs.write_text(json.dumps(OUTPUTS))
    kept = plant_sentinels([spec, outputs, tmp / "beside"])
    outcome = run_main(phase_two, [str(spec), "--outputs-file", str(outputs)])
    assert_clear_refusal(outcome, bad.names or (str(spec),))
    assert_sentinels_survive(kept)


@SETTINGS
@given(bad=st.one_of(replaced_values(), removed_keys(), unknown_keys()))
def test_a_bad_field_is_refused_in_few_lines_naming_it(tmp_path_factory: Any, bad: BadSpec) -> None:
    refused_and_kept(tmp_path_factory.mktemp("spec"), bad)


@settings(SETTINGS, max_examples=40)
@given(bad=unfit_files())
def test_a_file_that_is_no_spec_is_refused_in_one_line_naming_it(tmp_path_factory: Any, bad: BadSpec) -> None:
    refused_and_kept(tmp_path_factory.mktemp("spec"), bad)


def test_the_installed_command_refuses_an_alias_bomb_in_one_line(tmp_path: Path) -> None:
    """The same through a fresh interpreter, as a user runs llm-phase-two: bounded in time by the subprocess's
    own timeout, not by a speed target."""
    spec = tmp_path / "my-deployment.yaml"
    spec.write_bytes(alias_bomb(12, 9))
    kept = plant_sentinels([spec, tmp_path / "beside"])
    outcome = run_command([sys.executable, "-m", "spec.phase_two", str(spec), "--dry-run", "--outputs-file", "x"])
    assert_clear_refusal(outcome, str(spec))
    assert_sentinels_survive(kept)
