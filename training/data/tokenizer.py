"""HF `tokenizers` set up for pretraining data: no special tokens of its own, the loader-side EOD is the only one.

The 2T-token run of "Maximizing training throughput using PyTorch FSDP" (https://pytorch.org/blog/maximizing-training/) trained on two separators between documents because the tokenizer's post-processor added
one and the data pipeline added another. Here the tokenizer never adds anything: the post-processor is removed,
`add_special_tokens=False`, truncation and padding are off, and special-token text inside a document
(a literal "<|endoftext|>" in a web page) is encoded as ordinary text rather than as the EOD id.
"""

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from training.data.errors import DataError

DEFAULT_EOD_TOKEN = "<|endoftext|>"
# End-of-document tokens of the tokenizers users bring: GPT-2/NeoX/Pythia, Llama 3, Llama 2/Mistral, Gemma.
EOD_CANDIDATES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>")


def load_tokenizer(path: str | Path) -> Tokenizer:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: tokenizer file not found")
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as error:  # tokenizers raises a bare Exception for malformed JSON
        raise DataError(f"{path}: not a valid tokenizer.json: {str(error).splitlines()[0]}") from None
    return without_special_token_handling(tokenizer)


def without_special_token_handling(tokenizer: Tokenizer) -> Tokenizer:
    """Strip everything that would add, drop or reinterpret tokens behind the data pipeline's back."""
    tokenizer.post_processor = None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    tokenizer.encode_special_tokens = True
    return tokenizer


def vocab_size(tokenizer: Tokenizer) -> int:
    """Embedding rows a model needs: one past the largest id, added tokens included."""
    largest_id = max(tokenizer.get_vocab(with_added_tokens=True).values(), default=-1)
    return max(largest_id + 1, tokenizer.get_vocab_size(with_added_tokens=True))


def find_eod(tokenizer: Tokenizer, eod_token: str | None = None, *, source: str = "tokenizer") -> tuple[str, int]:
    """The end-of-document token and its id: the one asked for, else the first known EOD token the vocab has."""
    candidates = (eod_token,) if eod_token else EOD_CANDIDATES
    for token in candidates:
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token, token_id
    if eod_token:
        raise DataError(f"{source}: eod token {eod_token!r} is not in the vocabulary")
    raise DataError(f"{source}: none of the end-of-document tokens {list(EOD_CANDIDATES)} is in the vocabulary")


def train_byte_level_bpe(documents: Iterable[str], vocab_size: int, eod_token: str = DEFAULT_EOD_TOKEN) -> Tokenizer:
    """A GPT-2 style byte-level BPE with the EOD token as its only special token (id 0)."""
    if vocab_size < 257 + 1:
        raise DataError(f"--vocab-size: {vocab_size} must be at least 258 (256 bytes, the EOD token, one merge)")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[eod_token],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(documents, trainer)
    return without_special_token_handling(tokenizer)


# Pool workers hold one tokenizer each, loaded once by the initializer from its JSON text.
_worker_tokenizer: Tokenizer | None = None


def init_worker(tokenizer_json: str) -> None:
    global _worker_tokenizer
    # One process per core already; tokenizers' own thread pool inside each would oversubscribe the cores.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _worker_tokenizer = without_special_token_handling(Tokenizer.from_str(tokenizer_json))


def encode_in_worker(texts: Sequence[str]) -> list[np.ndarray]:
    assert _worker_tokenizer is not None, "init_worker was not called"
    return encode_documents(_worker_tokenizer, texts)


def encode_documents(tokenizer: Tokenizer, texts: Sequence[str]) -> list[np.ndarray]:
    """Token ids per document, with nothing added: no BOS, no EOS, no separator."""
    encodings = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return [np.asarray(encoding.ids, dtype=np.int64) for encoding in encodings]


def tokenizer_json(tokenizer: Tokenizer) -> str:
    """The tokenizer as used (post-processor removed), serialized for the pool workers."""
    return tokenizer.to_str()
