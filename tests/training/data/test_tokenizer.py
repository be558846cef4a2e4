from pathlib import Path

import pytest
from tokenizers import processors

from training.data.errors import DataError
from training.data.tokenizer import encode_documents, find_eod, load_tokenizer, train_byte_level_bpe, vocab_size

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Pack my box with five dozen liquor jugs."] * 20


def test_trained_tokenizer_has_the_eod_token_as_id_zero() -> None:
    tokenizer = train_byte_level_bpe(TEXTS, vocab_size=300)
    assert find_eod(tokenizer) == ("<|endoftext|>", 0)
    assert vocab_size(tokenizer) == tokenizer.get_vocab_size() <= 300


def test_loading_strips_post_processor_truncation_and_special_text(tmp_path: Path) -> None:
    tokenizer = train_byte_level_bpe(TEXTS, vocab_size=300)
    tokenizer.add_special_tokens(["<s>"])
    bos = tokenizer.token_to_id("<s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A <|endoftext|>", special_tokens=[("<s>", bos), ("<|endoftext|>", 0)]
    )
    tokenizer.enable_truncation(max_length=3)
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    loaded = load_tokenizer(path)
    [ids] = encode_documents(loaded, ["The quick brown fox <|endoftext|> <s> jumps"])
    assert len(ids) > 3
    assert bos not in ids.tolist() and 0 not in ids.tolist()
    assert loaded.decode(ids.tolist()) == "The quick brown fox <|endoftext|> <s> jumps"


def test_eod_lookup() -> None:
    tokenizer = train_byte_level_bpe(TEXTS, vocab_size=300, eod_token="</s>")
    assert find_eod(tokenizer) == ("</s>", 0)
    with pytest.raises(DataError, match=r"tok.json: eod token '<eos>' is not in the vocabulary"):
        find_eod(tokenizer, "<eos>", source="tok.json")


def test_bad_tokenizer_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nope.json: tokenizer file not found"):
        load_tokenizer(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(DataError, match=r"bad.json: not a valid tokenizer.json"):
        load_tokenizer(tmp_path / "bad.json")
    with pytest.raises(DataError, match=r"--vocab-size: 100 must be at least 258"):
        train_byte_level_bpe(TEXTS, vocab_size=100)
