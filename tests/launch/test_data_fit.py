"""Submission refuses a dataset that cannot fill one sample of a split the job reads; Megatron's split is checked
against megatron-core's own functions (in .bridge-venv)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from launch.data_fit import megatron_document_ranges
from launch.nemo import validation_split
from launch.submit import main
from tests.launch.conftest import write_job
from training.prepare import prepare_dataset

DOCUMENTS = [f"document {i}: " + "a few words of text, " * (3 + i % 5) for i in range(40)]


@pytest.fixture(scope="module")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """40 short documents (about 2,000 tokens in all): too few for a long sample in the validation split."""
    directory = tmp_path_factory.mktemp("small-data")
    source = directory / "docs.jsonl"
    source.write_text("".join(json.dumps({"text": text}) + "\n" for text in DOCUMENTS))
    prepared = prepare_dataset([source], directory / "small", vocab_size_to_train=300, workers=1)
    return str(prepared.data_prefix)


def _submit(config: Path, data: str, run_dir: Path, backend: str, capsys: pytest.CaptureFixture[str]) -> str:
    argv = ["--backend", backend, "--model", str(config), "--nodes", "2", "--data-prefix", data, "--run-dir"]
    code = main([*argv, str(run_dir), *(["--local"] if backend == "fsdp" else []), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    return err.strip()


def test_a_validation_split_shorter_than_one_sample_is_refused(
    small_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # seq 256 (tiny's most): the 1 held-out document of 40 (validation_fraction 0.02) is far shorter.
    config = write_job(
        tmp_path / "job.yaml", data={"seq_len": 256, "validation_fraction": 0.02}, train={"eval_every": 10}
    )
    err = _submit(config, small_data, tmp_path / "r", "fsdp", capsys)
    assert err.startswith(f"error: --data-prefix: {small_data}: the validation split (1 documents, ")
    assert err.endswith("is shorter than one sample of data.seq_len + 1 = 257 tokens; prepare more data, lower "
                        "data.seq_len or raise data.validation_fraction")  # fmt: skip
    nemo = _submit(config, small_data, tmp_path / "n", "nemo", capsys)  # Megatron's contiguous split: 1 of 40 too
    assert "the validation split (1 documents, " in nemo


def test_without_evaluation_the_validation_split_is_not_needed(
    small_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_job(
        tmp_path / "job.yaml", data={"seq_len": 64, "validation_fraction": 0.02}, train={"eval_every": 0}
    )
    assert main(["--backend", "fsdp", "--model", str(config), "--nodes", "2", "--data-prefix", small_data,
                 "--run-dir", str(tmp_path / "r"), "--local", "--dry-run"]) == 0  # fmt: skip
    capsys.readouterr()


def test_a_train_split_shorter_than_one_sample_is_refused(
    small_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_job(
        tmp_path / "job.yaml",
        model={"max_seq_len": 8192},
        data={"seq_len": 4096, "validation_fraction": 0.02},
        train={"eval_every": 0},
    )
    err = _submit(config, small_data, tmp_path / "r", "fsdp", capsys)
    assert "the train split (39 documents, " in err and "data.seq_len + 1 = 4097 tokens" in err


FRACTIONS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.333)
DOCUMENT_COUNTS = (7, 40, 100, 3466)


def test_megatrons_own_split_cuts_the_documents_where_we_say(bridge_python: Path) -> None:
    cases = [(validation_split(fraction), documents) for fraction in FRACTIONS for documents in DOCUMENT_COUNTS]
    probe = (
        "import json, sys\n"
        "from megatron.core.datasets.blended_megatron_dataset_config import (\n"
        "    convert_split_vector_to_split_matrix, parse_and_normalize_split)\n"
        "out = []\n"
        f"for split, n in {cases!r}:\n"
        "    matrix = convert_split_vector_to_split_matrix(parse_and_normalize_split(split))\n"
        # blended_megatron_dataset_builder: beg/end = int(round(split[i][k] * float(num_elements)))
        "    out.append([None if b is None else [int(round(b[0] * float(n))), int(round(b[1] * float(n)))]\n"
        "                for b in matrix])\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run([str(bridge_python), "-c", probe], capture_output=True, text=True, check=True)
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    for (split, documents), theirs in zip(cases, answers, strict=True):
        expected = {
            name: tuple(bounds) for name, bounds in zip(("train", "validation", "test"), theirs, strict=True) if bounds
        }
        assert megatron_document_ranges(split, documents) == expected, (split, documents)
