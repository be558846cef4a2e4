"""The vocabulary rule at submission (launch/vocab.py): a tokenizer larger than the declared vocabulary is refused
in one line on both NeMo Framework paths; a smaller one is allowed; TP must divide the declared vocabulary (Megatron
no longer pads it). What Megatron Bridge and NeMo then build: tests/launch/test_bridge_contract.py and
test_nemo_contract.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models

from launch.submit import main
from tests.launch.conftest import nemo2507_spec_file, write_job
from tests.launch.test_nemo_contract import LLAMA_JOB


def _tokenizer_dir(directory: Path, tokens: int) -> Path:
    """A real Hugging Face tokenizer.json (the tokenizers library writes it) of `tokens` word-level tokens."""
    directory.mkdir(parents=True)
    vocab = {f"t{i}": i for i in range(tokens)}
    Tokenizer(models.WordLevel(vocab, unk_token="t0")).save(str(directory / "tokenizer.json"))
    return directory


def _argv(tmp_path: Path, demo_data: str, vocab_size: int | str, *extra: str) -> list[str]:
    job = {**LLAMA_JOB, "model": {**LLAMA_JOB["model"], "vocab_size": vocab_size}}
    config = write_job(tmp_path / "job.yaml", **job)
    return ["--backend", "nemo", "--model", str(config), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(tmp_path / "run"), "--dry-run", *extra]  # fmt: skip


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err.strip()


@pytest.fixture(params=["bridge", "nemo-2.4"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    return [] if request.param == "bridge" else ["--spec", str(nemo2507_spec_file(tmp_path / "nemo.yaml"))]


def test_a_tokenizer_larger_than_the_declared_vocabulary_is_refused(
    demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: list[str]
) -> None:
    tokenizer = _tokenizer_dir(tmp_path / "big-tokenizer", 600)
    err = _error(capsys, _argv(tmp_path, demo_data, 512, "--tokenizer", str(tokenizer), *spec))
    assert err == (
        f"error: --tokenizer: {tokenizer / 'tokenizer.json'} has 600 tokens, more than model.vocab_size 512; "
        "declare a vocabulary that holds it (or vocab_size: data)"
    )


def test_a_smaller_tokenizer_is_allowed(
    demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: list[str]
) -> None:
    tokenizer = _tokenizer_dir(tmp_path / "small-tokenizer", 300)
    assert main(_argv(tmp_path, demo_data, 512, "--tokenizer", str(tokenizer), *spec)) == 0


def test_the_datasets_own_tokenizer_is_checked_too(
    demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A dataset whose manifest says 512 tokens but whose tokenizer.json (replaced after preparing) has 700.
    data = tmp_path / "data"
    data.mkdir()
    for suffix in (".bin", ".idx", ".manifest.json"):
        shutil.copyfile(demo_data + suffix, str(data / "d") + suffix)
    manifest = json.loads(Path(demo_data + ".manifest.json").read_text())
    _tokenizer_dir(tmp_path / "t", 700)
    shutil.copyfile(tmp_path / "t" / "tokenizer.json", data / manifest["tokenizer_file"])
    err = _error(capsys, _argv(tmp_path, str(data / "d"), 512))
    assert err.startswith(f"error: --data-prefix: {data / manifest['tokenizer_file']} has 700 tokens")


def test_tensor_parallelism_must_divide_the_declared_vocabulary(
    demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: list[str]
) -> None:
    err = _error(capsys, _argv(tmp_path, demo_data, 1001, "--tensor-parallel", "2", *spec))
    assert err == "error: --tensor-parallel: 2 does not divide model.vocab_size (1001)"
