import json
from pathlib import Path

import pytest
import yaml

from planner.data_size import token_bytes
from planner.plan import main
from spec import DEFAULT_SPEC_PATH
from tests.training.jobs import tiny_job
from training.data.indexed import token_dtype_for_vocab

LLAMA3_8B = ["--model", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "8", "--seq", "8192"]


def plan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def spec_with_fsx(tmp_path: Path, storage_gib: int) -> Path:
    doc = yaml.safe_load(DEFAULT_SPEC_PATH.read_text())
    doc["cluster"].setdefault("fsx", {})["storage_gib"] = storage_gib
    path = tmp_path / f"fsx-{storage_gib}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("vocab", [512, 50_304, 65_499, 65_500, 128_256, 152_064])
def test_token_bytes_are_the_writers_dtype(vocab: int) -> None:
    assert token_bytes(vocab) == token_dtype_for_vocab(vocab)(0).itemsize


def test_a_trillion_llama_3_tokens_are_4_tb_and_the_default_fsx_cannot_hold_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = plan(capsys, *LLAMA3_8B, "--tokens", "1T")
    assert code == 0
    lines = out.splitlines()
    assert (
        "prepared data: 4.00 TB (1e+12 tokens x 4 bytes, vocabulary 128,256; the .idx adds 20 bytes a document)"
        in lines
    )
    (warning,) = [line for line in lines if line.startswith("warning: ")]
    assert warning.startswith("warning: cluster.fsx.storage_gib 1200 (1.29 TB) cannot hold the prepared data (4.00 TB)")
    assert "plus checkpoint.keep_last 2 x " in warning and "raise storage_gib to at least 4800" in warning


def test_a_file_system_that_holds_data_and_checkpoints_gives_no_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = plan(capsys, *LLAMA3_8B, "--tokens", "1T", "--spec", str(spec_with_fsx(tmp_path, 4800)))
    assert code == 0 and "prepared data: 4.00 TB" in out and "warning:" not in out
    _, small, _ = plan(capsys, *LLAMA3_8B, "--tokens", "100B")
    assert "prepared data: 0.40 TB" in small and "warning:" not in small
    _, without_tokens, _ = plan(capsys, *LLAMA3_8B)
    assert "prepared data" not in without_tokens


def test_a_vocabulary_under_65500_stores_2_bytes_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = plan(capsys, "--model", "pythia-6.9b", "--instance", "p5.48xlarge", "--nodes", "2", "--tokens", "300B")
    assert "prepared data: 0.60 TB (3e+11 tokens x 2 bytes, vocabulary 50,432;" in out


def test_a_job_yamls_keep_last_counts_its_checkpoints(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def warnings(keep_last: int) -> list[str]:
        job = tiny_job("data/x_text_document", checkpoint={"keep_last": keep_last})
        job["model"] = {"name": "llama3-8b"}
        job["data"].update({"seq_len": 8192, "micro_batch_size": 1, "global_batch_size": 64})
        path = tmp_path / f"keep-{keep_last}.yaml"
        path.write_text(yaml.safe_dump(job))
        _, out, _ = plan(capsys, "--model", str(path), "--instance", "p5.48xlarge", "--nodes", "8", "--tokens", "200B")
        return [line for line in out.splitlines() if line.startswith("warning: ")]

    # 0.8 TB of data: with 2 checkpoints of 96 GB it fits the default 1200 GiB (1.29 TB), with 7 it does not
    assert warnings(2) == []
    (warning,) = warnings(7)
    assert "plus checkpoint.keep_last 7 x 96.4 GB of checkpoints = 1.47 TB" in warning


def test_the_planner_reads_every_dataset_of_a_mixture(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for name, vocab in (("web", 512), ("code", 512), ("other", 1000)):
        (tmp_path / f"{name}_text_document.manifest.json").write_text(json.dumps({"vocab_size": vocab}))

    def job_yaml(*names: str) -> Path:
        job = tiny_job("unused")
        del job["data"]["prefix"]
        job["data"]["datasets"] = [{"prefix": str(tmp_path / f"{n}_text_document"), "weight": 1} for n in names]
        path = tmp_path / f"{'-'.join(names)}.yaml"
        path.write_text(yaml.safe_dump(job))
        return path

    single = tiny_job(str(tmp_path / "web_text_document"))
    (tmp_path / "single.yaml").write_text(yaml.safe_dump(single))
    local = ["--instance", "local-cpu", "--nodes", "1"]
    code, one_dataset, _ = plan(
        capsys, "--model", str(tmp_path / "single.yaml"), "--data-prefix", str(tmp_path / "web_text_document"), *local
    )
    assert code == 0
    # vocab_size: data, read from the mixture's manifests: the same model as the 512-token dataset's
    code, mixture, _ = plan(capsys, "--model", str(job_yaml("web", "code")), *local)
    assert code == 0 and mixture.splitlines()[0] == one_dataset.splitlines()[0]
    code, _, err = plan(capsys, "--model", str(job_yaml("web", "other")), "--instance", "local-cpu", "--nodes", "1")
    assert code == 2 and err.count("\n") == 1
    assert f"data.datasets[1].prefix: {str(tmp_path / 'other_text_document')!r} has vocab_size 1000" in err


def test_the_storage_example_in_the_docs_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = plan(capsys, *LLAMA3_8B, "--activation-checkpointing", "selective", "--tokens", "1T")
    lines = [line for line in out.splitlines() if line.startswith(("prepared data: ", "warning: "))]
    assert code == 0 and len(lines) == 2
    docs = (Path(__file__).resolve().parents[2] / "docs" / "planner.md").read_text()
    assert "```text\n" + "\n".join(lines) + "\n```" in docs


def test_json_has_the_storage_figures(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _, out, _ = plan(capsys, *LLAMA3_8B, "--tokens", "1T", "--json")
    storage = json.loads(out)["storage"]
    assert storage["data_bytes"] == 4e12 and storage["keep_last"] == 2 and storage["fsx_bytes"] == 1200 * 2**30
    assert storage["needed_bytes"] == 4e12 + 2 * storage["checkpoint_bytes"] and storage["fits"] is False
    _, out, _ = plan(capsys, *LLAMA3_8B, "--tokens", "1T", "--json", "--spec", str(spec_with_fsx(tmp_path, 4800)))
    assert json.loads(out)["storage"]["fits"] is True
    _, out, _ = plan(capsys, *LLAMA3_8B, "--json")
    assert json.loads(out)["storage"] is None
