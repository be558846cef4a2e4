import json
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from training.corpus import demo_corpus_path
from training.data.indexed import idx_path, read_index
from training.data.manifest import read_manifest, sha256_file
from training.data.tokenizer import load_tokenizer, train_byte_level_bpe
from training.prepare import main, prepare_dataset

DOCUMENTS = [
    "Now is better than never.",
    "Although never is often better than *right* now.",
    "A literal <|endoftext|> and </s> inside a document are text, not separators.",
    "Namespaces are one honking great idea -- let's do more of those!",
    "",  # empty documents are skipped: one would put two EOD ids side by side
    "Simple is better than complex.\nComplex is better than complicated.",
]


def megatron_documents(prefix: Path) -> list[np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset

    dataset = IndexedDataset(str(prefix), mmap=True)
    # Copies: the arrays are views of a memmap that closes when the dataset object goes away.
    return [np.array(dataset[i], copy=True) for i in range(len(dataset))]


@pytest.fixture
def corpus(tmp_path: Path) -> list[Path]:
    jsonl = tmp_path / "raw" / "a.jsonl"
    jsonl.parent.mkdir()
    jsonl.write_text("".join(json.dumps({"text": text, "id": i}) + "\n" for i, text in enumerate(DOCUMENTS[:5])))
    text_file = tmp_path / "raw" / "b.txt"
    text_file.write_text(DOCUMENTS[5])
    return [jsonl, text_file]


def assert_one_eod_per_document(
    documents: list[np.ndarray], eod_id: int, expected_texts: list[str], tokenizer_path: Path
) -> None:
    tokenizer = load_tokenizer(tokenizer_path)
    assert len(documents) == len(expected_texts)
    for ids, text in zip(documents, expected_texts, strict=True):
        assert ids[-1] == eod_id
        assert eod_id not in ids[:-1].tolist()
        assert tokenizer.decode(ids[:-1].tolist(), skip_special_tokens=False) == text
    stream = np.concatenate(documents)
    eod_positions = np.flatnonzero(stream == eod_id)
    assert len(eod_positions) == len(documents)
    assert np.all(np.diff(eod_positions) > 1)  # never two in a row


def test_trained_tokenizer_dataset_is_megatron_readable_with_one_eod_between_documents(
    corpus: list[Path], tmp_path: Path
) -> None:
    prepared = prepare_dataset(corpus, tmp_path / "out" / "demo", vocab_size_to_train=300, workers=1)
    assert prepared.data_prefix == tmp_path / "out" / "demo_text_document"
    assert prepared.tokenizer_path == tmp_path / "out" / "demo_tokenizer.json"
    manifest = prepared.manifest
    nonempty = [text for text in DOCUMENTS if text]
    assert_one_eod_per_document(
        megatron_documents(prepared.data_prefix), manifest.eod_id, nonempty, prepared.tokenizer_path
    )
    assert (manifest.eod_token, manifest.eod_id, manifest.dtype) == ("<|endoftext|>", 0, "uint16")
    assert manifest.document_count == 5 and manifest.skipped_empty_documents == 1
    assert manifest.tokenizer_sha256 == sha256_file(prepared.tokenizer_path)
    assert manifest.tokenizer_file == "demo_tokenizer.json"
    assert manifest.bin.sha256 == sha256_file(f"{prepared.data_prefix}.bin")
    assert manifest.idx.sha256 == sha256_file(f"{prepared.data_prefix}.idx")
    assert [(s.path, s.documents) for s in manifest.sources] == [(str(corpus[0]), 4), (str(corpus[1]), 1)]
    assert manifest.token_count == sum(len(d) for d in megatron_documents(prepared.data_prefix))
    assert read_manifest(f"{prepared.data_prefix}.manifest.json") == manifest


def test_tokenizer_whose_post_processor_adds_bos_and_eos_still_gives_exactly_one_eod(
    corpus: list[Path], tmp_path: Path
) -> None:
    """The seed-000 failure: the tokenizer's template adds </s> and the pipeline adds another."""
    tokenizer = train_byte_level_bpe(DOCUMENTS * 5, vocab_size=300, eod_token="</s>")
    tokenizer.add_special_tokens(["<s>"])
    bos, eos = tokenizer.token_to_id("<s>"), tokenizer.token_to_id("</s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", bos), ("</s>", eos)]
    )
    tokenizer.enable_truncation(max_length=4)
    tokenizer_path = tmp_path / "llama-like" / "tokenizer.json"
    tokenizer_path.parent.mkdir()
    tokenizer.save(str(tokenizer_path))
    assert tokenizer.encode("Now").ids[0] == bos  # as shipped, the tokenizer does add BOS/EOS

    prepared = prepare_dataset(corpus, tmp_path / "out" / "llama", tokenizer_path=tokenizer_path, workers=1)
    documents = megatron_documents(prepared.data_prefix)
    assert prepared.manifest.eod_token == "</s>" and prepared.manifest.eod_id == eos
    assert prepared.manifest.tokenizer_file is None
    assert bos not in np.concatenate(documents).tolist()
    assert_one_eod_per_document(documents, eos, [text for text in DOCUMENTS if text], tokenizer_path)


def test_parallel_workers_keep_document_order(corpus: list[Path], tmp_path: Path) -> None:
    many = tmp_path / "many.jsonl"
    many.write_text(
        "".join(json.dumps({"text": f"document number {i}: " + "word " * (i % 13)}) + "\n" for i in range(300))
    )
    tokenizer = prepare_dataset([many], tmp_path / "serial", vocab_size_to_train=300, workers=1).tokenizer_path
    serial = prepare_dataset([many], tmp_path / "serial", tokenizer_path=tokenizer, workers=1)
    parallel = prepare_dataset([many], tmp_path / "parallel", tokenizer_path=tokenizer, workers=2)
    assert parallel.manifest.bin.sha256 == serial.manifest.bin.sha256
    assert parallel.manifest.idx.sha256 == serial.manifest.idx.sha256


def test_large_vocabulary_is_stored_as_int32(tmp_path: Path) -> None:
    vocab = {"<|endoftext|>": 0, "[UNK]": 1} | {f"w{i}": i + 2 for i in range(70_000)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(tmp_path / "big.json"))
    (tmp_path / "doc.txt").write_text("w69999 w1 w65535 unknown")
    prepared = prepare_dataset([tmp_path / "doc.txt"], tmp_path / "big", tokenizer_path=tmp_path / "big.json")
    assert prepared.manifest.dtype == "int32" and prepared.manifest.vocab_size == 70_002
    assert read_index(idx_path(prepared.data_prefix)).dtype == np.int32
    assert megatron_documents(prepared.data_prefix)[0].tolist() == [70_001, 3, 65_537, 1, 0]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a.jsonl": '{"text": "fine"}\n{"title": "no text"}\n'}, r"a.jsonl:2: no 'text' field"),
        ({"a.jsonl": '{"text": ""}\n'}, r"--input: empty corpus"),
        ({}, r"--input: .*missing.txt: no such file or directory"),
    ],
)
def test_cli_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str], message: str
) -> None:
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    inputs = [str(tmp_path / name) for name in files] or [str(tmp_path / "missing.txt")]
    assert main(["--input", *inputs, "--output-prefix", str(tmp_path / "out"), "--vocab-size", "300"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert re.search(message, err)
    assert not list(tmp_path.glob("out_text_document.*"))


def test_cli_success_prints_a_summary_and_no_progress_bar_off_a_terminal(
    corpus: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "--input",
        *map(str, corpus),
        "--output-prefix",
        str(tmp_path / "cli"),
        "--vocab-size",
        "300",
        "--workers",
        "1",
    ]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "5 documents" in out and "vocab" in out
    assert err == ""


def test_cli_demo_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    small = tmp_path / "demo.jsonl"
    small.write_text("".join(json.dumps({"text": text}) + "\n" for text in DOCUMENTS))
    monkeypatch.setattr("training.prepare.demo_corpus_path", lambda: small)
    argv = ["--demo-corpus", "--output-prefix", str(tmp_path / "demo"), "--vocab-size", "300", "--workers", "1"]
    assert main(argv) == 0
    assert read_manifest(tmp_path / "demo_text_document.manifest.json").sources[0].path == str(small)
    capsys.readouterr()


def test_an_unwritable_corpus_cache_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache's parent should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    argv = ["--demo-corpus", "--output-prefix", str(tmp_path / "demo"), "--workers", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --demo-corpus: cannot write the corpus cache ") and err.count("\n") == 1
    assert "Not a directory" in err and not (tmp_path / "demo_text_document.bin").exists()


def _pool_workers(parent: int) -> list[int]:
    """The spawned pool workers of `parent` (multiprocessing's spawn_main), not its resource tracker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"spawn_main" in command:
            found.append(int(entry.name))
    return found


def test_a_worker_killed_mid_run_ends_the_run_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    """multiprocessing.Pool replaced a SIGKILLed worker (the OOM killer's signal) and waited forever for its chunk:
    the run sat at flat CPU without a word. Now the pool breaks and the run ends, naming the documents in flight."""
    import signal
    import subprocess
    import sys

    from tests.training.jobs import REPO_ROOT, child_env, prepare_demo_subset
    from tests.waiting import wait_until

    (tmp_path / "tok").mkdir()
    prefix = prepare_demo_subset(tmp_path / "tok")
    tokenizer = Path(prefix.removesuffix("_text_document") + "_tokenizer.json")
    lines = demo_corpus_path().read_text(encoding="utf-8").splitlines()
    corpus = tmp_path / "big.jsonl"
    corpus.write_text("\n".join(lines * 40) + "\n", encoding="utf-8")  # long enough to be killed mid-run
    out = tmp_path / "out" / "big"
    command = [sys.executable, "-m", "training.prepare", "--input", str(corpus), "--tokenizer", str(tokenizer),
               "--output-prefix", str(out), "--workers", "2"]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=child_env(), stderr=subprocess.PIPE, text=True)
    try:
        partial = out.parent / "big_text_document.bin.partial"
        wait_until(lambda: partial.exists() and partial.stat().st_size > 0 and len(_pool_workers(process.pid)) == 2,
                   "tokens written by two pool workers", timeout_s=300)  # fmt: skip
        os.kill(_pool_workers(process.pid)[0], signal.SIGKILL)
        _, err = process.communicate(timeout=300)  # the old pool never returned
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 2, err
    (line,) = [line for line in err.splitlines() if line.strip()]
    assert re.fullmatch(
        r"error: --workers: a tokenizer worker process died \(killed by a signal, or out of memory\) with documents "
        r"[\d,]+-[\d,]+ in flight; nothing was written\. Run again, with fewer --workers if memory ran out",
        line,
    ), line
    assert not list(out.parent.iterdir())  # no .bin, .idx, manifest or .partial left
