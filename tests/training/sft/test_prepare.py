import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.training.sft.conftest import write_rows
from training.data.errors import DataError
from training.data.tokenizer import load_tokenizer
from training.prepare import main
from training.sft.prepare import loss_mask_prefix, prepare_sft, tokens_prefix

ROWS = [
    {"prompt": "What does abs do?", "response": "Return the absolute value of the argument."},
    {
        "messages": [
            {"role": "user", "content": "What does json.dumps do?"},
            {"role": "assistant", "content": "Serialize obj to a JSON formatted str."},
        ]
    },
] * 10


def megatron_read(prefix: Path) -> list[np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset

    dataset = IndexedDataset(str(prefix), mmap=True)
    return [np.array(dataset[i], copy=True) for i in range(len(dataset))]


def test_tokens_and_loss_mask_read_back_with_megatron_core_and_mask_only_the_prompt(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    source = write_rows(tmp_path / "rows.jsonl", ROWS)
    prepared = prepare_sft([source], tmp_path / "out" / "sft", tokenizer_path=tokenizer_dir / "tokenizer.json")
    tokens = megatron_read(tokens_prefix(tmp_path / "out" / "sft"))
    masks = megatron_read(loss_mask_prefix(tmp_path / "out" / "sft"))
    assert len(tokens) == len(masks) == len(ROWS) == prepared.manifest.document_count
    assert tokens[0].dtype == np.int32 and masks[0].dtype == np.uint8
    tokenizer = load_tokenizer(tokenizer_dir / "tokenizer.json")
    for ids, mask in zip(tokens, masks, strict=True):
        assert ids.shape == mask.shape and ids[-1] == prepared.manifest.eod_id and mask[-1] == 1
        trained = tokenizer.decode(ids[mask == 1][:-1].tolist())
        prompt = tokenizer.decode(ids[mask == 0].tolist())
        assert trained in (
            "Return the absolute value of the argument.\n\n",
            "Serialize obj to a JSON formatted str.\n\n",
        )
        assert prompt.startswith("### User:\n") and prompt.endswith("### Assistant:\n")
        assert np.all(np.diff(mask.astype(int)) >= 0)  # one prompt, then one response
    assert prepared.manifest.extra["template"] == "plain"


def test_the_dataset_carries_its_tokenizer_so_a_run_on_it_finds_it(tokenizer_dir: Path, tmp_path: Path) -> None:
    from training.data.manifest import sha256_file

    prepared = prepare_sft([write_rows(tmp_path / "rows.jsonl", ROWS)], tmp_path / "out" / "sft",
                           tokenizer_path=tokenizer_dir / "tokenizer.json")  # fmt: skip
    beside = tmp_path / "out" / "sft_tokenizer.json"
    assert prepared.manifest.tokenizer_file == beside.name
    assert sha256_file(beside) == sha256_file(tokenizer_dir / "tokenizer.json") == prepared.manifest.tokenizer_sha256


def test_bridge_jsonl_holds_a_seeded_held_out_split_of_input_output_rows(tokenizer_dir: Path, tmp_path: Path) -> None:
    source = write_rows(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "out" / "sft"
    prepare_sft([source], out, tokenizer_path=tokenizer_dir / "tokenizer.json", validation_fraction=0.2, seed=3)
    read = [
        [json.loads(line) for line in (out.parent / "bridge" / f"{name}.jsonl").read_text().splitlines()]
        for name in ("training", "validation")
    ]
    assert (len(read[0]), len(read[1])) == (16, 4)
    assert all(set(row) == {"input", "output"} for row in read[0] + read[1])
    assert read[0][0] == {"input": "### User:\nWhat does abs do?\n\n### Assistant:\n", "output": ROWS[0]["response"]}


BAD_ROWS = [
    ({"prompt": "no answer"}, r"rows.jsonl:3: response: missing"),
    ("{not json\n", r"rows.jsonl:3: not valid JSON"),
    ({"messages": []}, r"rows.jsonl:3: messages: empty"),
    ({"messages": [{"role": "user", "content": "hi"}]}, r"rows.jsonl:3: messages: no assistant message"),
    ({"messages": [{"role": "user"}]}, r"rows.jsonl:3: messages\[0\].content: missing"),
    ({"prompt": "q", "response": ""}, r"rows.jsonl:3: response: empty"),
    ({"text": "pretraining row"}, r"rows.jsonl:3: neither"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_ROWS)
def test_a_bad_row_is_refused_with_its_line_and_the_old_dataset_survives(
    tokenizer_dir: Path, tmp_path: Path, bad: object, message: str
) -> None:
    out = tmp_path / "out" / "sft"
    prepare_sft([write_rows(tmp_path / "good.jsonl", ROWS)], out, tokenizer_path=tokenizer_dir / "tokenizer.json")
    (out.parent / "sentinel.txt").write_text("a file of the user's beside the dataset")
    before = {path: path.read_bytes() for path in sorted(out.parent.rglob("*")) if path.is_file()}
    # 2 x (.bin, .idx), the manifest, its tokenizer, 2 Bridge files, the sentinel: nothing partial
    assert len(before) == 9
    rows = write_rows(tmp_path / "rows.jsonl", [ROWS[0], ROWS[1], bad])
    with pytest.raises(DataError, match=message):
        prepare_sft([rows], out, tokenizer_path=tokenizer_dir / "tokenizer.json")
    after = {path: path.read_bytes() for path in sorted(out.parent.rglob("*")) if path.is_file()}
    assert after == before


def test_the_cli_refuses_a_bad_row_in_one_line(
    tokenizer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    rows = write_rows(tmp_path / "rows.jsonl", [ROWS[0], {"prompt": "q"}])
    argv = ["--sft", "--input", str(rows), "--output-prefix", str(tmp_path / "sft")]
    assert main([*argv, "--tokenizer", str(tokenizer_dir / "tokenizer.json")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {rows}:2: response: missing"
    assert main(argv) == 2
    assert "--tokenizer" in capsys.readouterr().err
    assert not list(tmp_path.glob("sft*"))


def test_the_cli_writes_the_sft_dataset(tokenizer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = write_rows(tmp_path / "rows.jsonl", ROWS)
    tokenizer = str(tokenizer_dir / "tokenizer.json")
    assert (
        main(["--sft", "--input", str(rows), "--output-prefix", str(tmp_path / "sft"), "--tokenizer", tokenizer]) == 0
    )
    assert "20 samples" in capsys.readouterr().out
    assert (tmp_path / "sft_sft_tokens.manifest.json").is_file()
