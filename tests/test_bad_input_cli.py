"""Bad input on every `llm-*` command (pyproject.toml's [project.scripts]), run in-process: a non-zero exit, at most 3
lines on stderr, no traceback, a message naming the option or the file, and every file already in an output location
left as it was. A bounded, seeded hypothesis search draws the bad values; the examples below pin the kinds found by
hand (issue 33)."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.bad_input_checks import (
    Outcome,
    assert_clear_refusal,
    assert_sentinels_survive,
    plant_sentinels,
    run_main,
)

REPO = Path(__file__).resolve().parents[1]
SCRIPTS: dict[str, str] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
TINY_JOB = REPO / "training" / "configs" / "tiny.yaml"
DEFAULT_SPEC = REPO / "spec" / "default.yaml"
SENTINEL = b"sentinel: must survive a refused command\n"
NOT_UTF8 = b"\xff\xfe\x00n\x00a\x00m\x00e\xe9\x80"


def run_script(name: str, argv: list[str]) -> Outcome:
    """The console script's main, in this process (tests/bad_input_checks.run_main)."""
    module, function = SCRIPTS[name].split(":")
    return run_main(getattr(importlib.import_module(module), function), argv)


def assert_refused(outcome: Outcome, *names: str) -> None:
    assert_clear_refusal(outcome, names)


@contextlib.contextmanager
def sentinels_survive(*paths: Path) -> Iterator[None]:
    """Each path holds the sentinel before the command and still holds it after."""
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(SENTINEL)
    kept = plant_sentinels(paths)
    yield
    assert_sentinels_survive(kept)


# ----- every parser: one line -----


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_an_unknown_option_is_one_line_naming_it(name: str) -> None:
    assert_refused(run_script(name, ["--no-such-option"]), "--no-such-option", "arguments are required")


# ----- the property-based search: each option of each command, given values of the kinds it must refuse -----

# The kinds of bad value; each option below lists the kinds it refuses at once (before reading or writing anything).
POSITIVE_INT, NON_NEGATIVE_INT, PRICE, OUT_DIR, OUT_PREFIX, IN_DIR, IN_FILE, AMI, S3_URI, TEXT_FILE, URL, PROFILE = (
    "positive int",
    "non-negative int",
    "price",
    "output dir",
    "output prefix",
    "input dir",
    "input file",
    "ami",
    "s3 uri",
    "text file",
    "url",
    "profile",
)


@dataclass(frozen=True)
class Option:
    command: str
    base: tuple[str, ...]  # the rest of a command line the option is checked in
    option: str  # '' for a positional argument
    kinds: tuple[str, ...]


def _options() -> list[Option]:
    submit = ("--backend", "nemo", "--model", str(TINY_JOB), "--nodes", "1", "--data-prefix", "d", "--run-dir", "r")
    plan = ("--model", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2")
    check = ("check", "--tool", "all_reduce_perf", "--instance-type", "p5.48xlarge", "--nodes", "2")
    check += ("--output", "out.txt", "--before", "b", "--after", "a")
    stage = ("--access-point-arn", "bucket", "--prefix", "p/", "--dest", "d", "--endpoint-url", "http://127.0.0.1:9")
    image = (str(DEFAULT_SPEC),)
    evaluate = ("--run-dir", "r", "--local", "--dry-run")
    sharded = ("--input", "a", "--output-prefix", "o", "--tokenizer", "out.txt", "--shards", "1")
    sharded += ("--local", "--dry-run")
    table = [
        ("llm-submit", submit, "--nodes", (POSITIVE_INT,)),
        ("llm-submit", submit, "--max-steps", (POSITIVE_INT,)),
        ("llm-submit", submit, "--signal-lead", (POSITIVE_INT,)),
        ("llm-submit", submit, "--tensor-parallel", (POSITIVE_INT,)),
        ("llm-submit", submit, "--max-requeues", (NON_NEGATIVE_INT,)),
        ("llm-submit", submit, "--run-dir", (OUT_DIR,)),
        ("llm-submit", submit, "--tokenizer", (IN_DIR,)),
        ("llm-submit", submit, "--model", (IN_FILE,)),
        ("llm-follow", ("--job", "1", "--run-dir", "r", "--timeout", "1"), "--run-dir", (OUT_DIR,)),
        ("llm-plan", plan, "--nodes", (POSITIVE_INT,)),
        ("llm-plan", plan, "--price-per-hour", (PRICE,)),
        ("llm-plan", plan, "--model", (IN_FILE, TEXT_FILE)),
        ("llm-prepare", ("--demo-corpus", "--output-prefix", "o"), "--output-prefix", (OUT_PREFIX,)),
        ("llm-prepare", ("--demo-corpus", "--output-prefix", "o"), "--workers", (POSITIVE_INT,)),
        ("llm-prepare", ("--demo-corpus", "--output-prefix", "o"), "--tokenizer", (IN_FILE,)),
        ("llm-stage", stage, "--dest", (OUT_DIR,)),
        ("llm-stage", stage, "--max-concurrency", (POSITIVE_INT,)),
        ("llm-stage", stage, "--endpoint-url", (URL,)),
        ("llm-containers", ("push", "--spec", str(DEFAULT_SPEC), "--dry-run"), "--profile", (PROFILE,)),
        ("llm-upload-artifacts", ("--dry-run",), "--profile", (PROFILE,)),
        ("llm-empty-bucket", ("some-bucket",), "--profile", (PROFILE,)),
        ("llm-phase-two", (str(DEFAULT_SPEC), "--dry-run"), "--profile", (PROFILE,)),
        ("llm-eval", evaluate, "--run-dir", (IN_DIR,)),
        ("llm-eval", evaluate, "--tasks-dir", (IN_DIR,)),
        ("llm-eval", evaluate, "--tokenizer", (IN_FILE,)),
        ("llm-eval", evaluate, "--step", (POSITIVE_INT,)),
        ("llm-eval", evaluate, "--batch-size", (POSITIVE_INT,)),
        ("llm-prepare-cluster", sharded, "--shards", (POSITIVE_INT,)),
        ("llm-prepare-cluster", sharded, "--workers", (POSITIVE_INT,)),
        ("llm-prepare-cluster", sharded, "--output-prefix", (OUT_PREFIX,)),
        ("llm-prepare-cluster", sharded, "--tokenizer", (IN_FILE,)),
        ("llm-restore", ("--run-dir", "r", "--list"), "--step", (POSITIVE_INT,)),
        ("llm-restore", ("--run-dir", "r", "--list"), "--spec", (IN_FILE,)),
        ("llm-export", ("--run-dir", "r", "--output", "o"), "--run-dir", (IN_DIR,)),
        ("llm-export", ("--run-dir", "r", "--output", "o"), "--output", (OUT_DIR,)),
        ("llm-report", ("--sacct-file", "s"), "--price", (PRICE,)),
        ("llm-report", ("--sacct-file", "s"), "--sacct-file", (IN_FILE, TEXT_FILE)),
        ("llm-fabric", ("render", "--queue", "gpu", "--nodes", "2", "--dry-run"), "--nodes", (POSITIVE_INT,)),
        ("llm-fabric", ("render", "--queue", "gpu", "--nodes", "2", "--dry-run"), "--output", (OUT_DIR,)),
        ("llm-fabric", check, "--nodes", (POSITIVE_INT,)),
        ("llm-fabric", check, "--before", (IN_DIR,)),
        ("llm-image-config", image, "--parent-image", (AMI,)),
        ("llm-image-config", image, "--component-uri", (S3_URI,)),
        ("llm-image-config", (*image, "--component"), "--nxdt-wheelhouse", (S3_URI,)),
        ("llm-upload-artifacts", ("--no-build",), "--build-dir", (IN_DIR,)),
        ("llm-upload-artifacts", ("--dry-run",), "--build-dir", (OUT_DIR,)),
        ("llm-phase-two", (str(DEFAULT_SPEC), "--dry-run"), "--outputs-file", (IN_FILE, TEXT_FILE)),
        ("llm-guardrails", (), "--spec", (IN_FILE,)),
        ("llm-summary", (), "--spec", (IN_FILE,)),
        ("llm-policy-report", ("--no-mutations",), "--spec", (IN_FILE,)),
    ]
    return [Option(command, base, option, kinds) for command, base, option, kinds in table]


OPTIONS = _options()

_BAD_INTS = st.sampled_from(["abc", "1.5", "nan", "", "0x", "one"]) | st.integers(max_value=-1).map(str)
_BAD_VALUES: dict[str, st.SearchStrategy[str]] = {
    POSITIVE_INT: _BAD_INTS | st.just("0"),
    NON_NEGATIVE_INT: _BAD_INTS,
    PRICE: st.sampled_from(["nan", "NaN", "inf", "-inf", "-1", "abc", ""]),
    AMI: st.sampled_from(["ami-123", "AMI-0123456789abcdef0", "ami-0123456789abcdefg", "image", "ami-"]),
    S3_URI: st.sampled_from(["bucket/key", "s3://", "s3://UPPER/key", "http://bucket/key", "s3://a/k", "s3:/b/k"]),
    URL: st.sampled_from(["127.0.0.1:9", "ftp://host", "http://", "https://host:port", "s3.amazonaws.com", ""]),
    PROFILE: st.sampled_from(["", "two words", "[compute]", "a/b"]),
}


def _bad_path(kind: str, tmp: Path, variant: int) -> tuple[str, list[Path]]:
    """A bad path of `kind` in `tmp` and the sentinel files the command must leave alone."""
    sentinel = tmp / "sentinel"
    if kind == OUT_DIR:  # a file where a directory belongs, or a directory below a file
        return (str(sentinel) if variant % 2 == 0 else str(sentinel / "sub")), [sentinel]
    if kind == OUT_PREFIX:  # a prefix below a file (a prefix naming a file only starts its names with it)
        return str(sentinel / ("sub" if variant % 2 == 0 else "deeper/sub")), [sentinel]
    if kind == IN_DIR:
        return (str(sentinel) if variant % 2 == 0 else str(tmp / "missing-dir")), [sentinel]
    if kind == IN_FILE:
        return (str(tmp / "missing.yaml") if variant % 2 == 0 else str(tmp)), [sentinel]
    assert kind == TEXT_FILE
    text = tmp / "not-utf8.json"
    text.write_bytes(NOT_UTF8 if variant % 2 == 0 else bytes(range(256)))
    return str(text), [sentinel]


def _with(option: Option, value: str) -> list[str]:
    """The base command line with `option=value` in place of the option's own (`=`: a value may start with '-')."""
    base = list(option.base)
    if option.option in base:
        index = base.index(option.option)
        return [*base[:index], f"{option.option}={value}", *base[index + 2 :]]
    return [*base, f"{option.option}={value}"]


@seed(33)
@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_option_refuses_bad_values_in_one_line_and_loses_nothing(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    option = data.draw(st.sampled_from(OPTIONS), label="option")
    kind = data.draw(st.sampled_from(option.kinds), label="kind")
    tmp = tmp_path_factory.mktemp("bad")
    for directory in ("a", "b", "r"):  # what the base command lines name as existing
        (tmp / directory).mkdir()
    (tmp / "out.txt").write_text("")
    if kind in _BAD_VALUES:
        value, sentinels = data.draw(_BAD_VALUES[kind], label="value"), [tmp / "sentinel"]
    else:
        value, sentinels = _bad_path(kind, tmp, data.draw(st.integers(0, 1), label="variant"))
    with contextlib.chdir(tmp), sentinels_survive(*sentinels):
        outcome = run_script(option.command, _with(option, value))
    assert_refused(outcome, option.option, value)


def test_the_search_covers_every_command() -> None:
    assert {option.command for option in OPTIONS} | {"llm-containers", "llm-update-plan", "llm-empty-bucket"} >= set(
        SCRIPTS
    )


# ----- the kinds that need a context: a spec, a dataset, a run -----


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LLM_TRAINING_SPEC", raising=False)
    return tmp_path


def _dataset(tmp: Path) -> Path:
    prefix = tmp / "data" / "corpus"
    (tmp / "docs.jsonl").write_text("".join(json.dumps({"text": f"document {i} " * 40}) + "\n" for i in range(400)))
    outcome = run_script("llm-prepare", ["--input", str(tmp / "docs.jsonl"), "--output-prefix", str(prefix)])
    assert outcome.status == 0, outcome.stderr
    return Path(f"{prefix}_text_document")


def test_submit_refuses_more_nodes_than_the_queue_can_start(in_tmp: Path) -> None:
    data = _dataset(in_tmp)
    argv = ["--backend", "fsdp", "--model", str(TINY_JOB), "--data-prefix", str(data), "--run-dir", "r", "--dry-run"]
    assert_refused(run_script("llm-submit", [*argv, "--nodes", "100000"]), "--nodes")
    assert not (in_tmp / "r").exists()


def test_submit_refuses_a_container_image_the_spec_refuses(in_tmp: Path) -> None:
    data = _dataset(in_tmp)
    argv = ["--backend", "nemo", "--model", str(TINY_JOB), "--nodes", "1", "--data-prefix", str(data)]
    argv += ["--run-dir", "r", "--dry-run", "--container-image"]
    for image in (
        "nvcr.io/nvidia/nemo:25.07",
        "/tmp/elsewhere.sqsh",
        "999999999999.dkr.ecr.eu-west-1.amazonaws.com/x:1",
    ):
        assert_refused(run_script("llm-submit", [*argv, image]), "--container-image")


def test_train_given_a_deployment_spec_says_it_is_not_a_job_config(in_tmp: Path) -> None:
    outcome = run_command_module("training.train", ["--config", str(DEFAULT_SPEC), "--run-dir", "r"])
    assert_refused(outcome, str(DEFAULT_SPEC))
    assert "not a job config" in outcome.stderr


def test_a_job_config_given_as_a_spec_says_it_is_not_a_spec(in_tmp: Path) -> None:
    outcome = run_script("llm-guardrails", ["--spec", str(TINY_JOB)])
    assert_refused(outcome, str(TINY_JOB))
    assert "job config" in outcome.stderr


def run_command_module(module: str, argv: list[str]) -> Outcome:
    """A main outside [project.scripts] (training.train logs its errors), its stdout and stderr as one."""
    import logging

    main: Callable[[list[str]], int] = importlib.import_module(module).main
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        finally:
            logging.getLogger("training").handlers.clear()
    return Outcome(int(code or 0), "", out.getvalue())


def _dataset_files(data: Path, tmp: Path) -> list[Path]:
    """What llm-prepare wrote for `data`: a refused rerun must leave each as it was."""
    return [Path(f"{data}.{suffix}") for suffix in ("bin", "idx", "manifest.json")] + [
        tmp / "data/corpus_tokenizer.json"
    ]


def test_prepare_with_an_unknown_eod_token_keeps_the_old_dataset_and_tokenizer(in_tmp: Path) -> None:
    files = _dataset_files(_dataset(in_tmp), in_tmp)
    before = {path: path.read_bytes() for path in files}
    argv = [
        "--input",
        str(in_tmp / "docs.jsonl"),
        "--output-prefix",
        str(in_tmp / "data/corpus"),
        "--vocab-size",
        "300",
    ]
    assert_refused(run_script("llm-prepare", [*argv, "--eod-token", "<nope>"]), "--eod-token", "<nope>")
    assert {path: path.read_bytes() for path in files} == before
    assert sorted(p.name for p in (in_tmp / "data").iterdir()) == sorted(p.name for p in files)


def test_prepare_on_malformed_input_keeps_the_old_manifest(in_tmp: Path) -> None:
    files = _dataset_files(_dataset(in_tmp), in_tmp)
    before = {path: path.read_bytes() for path in files}
    tokenizer = in_tmp / "data/corpus_tokenizer.json"
    bad = in_tmp / "bad.jsonl"
    bad.write_text(json.dumps({"text": "fine"}) + "\n" * 3 + "{not json\n")
    argv = ["--input", str(bad), "--output-prefix", str(in_tmp / "data/corpus"), "--tokenizer", str(tokenizer)]
    assert_refused(run_script("llm-prepare", argv), str(bad))
    assert {path: path.read_bytes() for path in files} == before
