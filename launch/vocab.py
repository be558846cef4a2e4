"""The one vocabulary rule of every GPU backend: the model that trains has the declared vocabulary (model.vocab_size
resolved by training.config, what the job config, the rendered HF config, the planner and the export describe),
exactly, padding included. The tokenizer the job reads may be smaller (its ids never reach the extra rows, as in
Megatron's own "dummy tokens"), never larger: its ids would index past the embedding.

Read from tokenizer.json with the standard library: the head node's submit env has no `tokenizers`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slurm.errors import SubmitError
from training.models.args import ModelArgs

TOKENIZER_FILE = "tokenizer.json"


def tokenizer_rows(tokenizer_json: Path, option: str) -> int:
    """Embedding rows the tokenizer needs: one past its largest id, added tokens included (the trainer's rule,
    training.data.tokenizer.vocab_size). `option` names what the user passed, for the error line."""
    try:
        data: Any = json.loads(tokenizer_json.read_text(encoding="utf-8"))
        vocab = data["model"]["vocab"]
        # BPE, WordLevel, WordPiece map token -> id; Unigram lists [token, score] pairs, the id is the position.
        ids = {int(i) for i in vocab.values()} if isinstance(vocab, dict) else set(range(len(vocab)))
        ids |= {int(token["id"]) for token in data.get("added_tokens") or []}
    except OSError as error:
        raise SubmitError(f"{option}: cannot read {tokenizer_json}: {error.strerror}") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise SubmitError(f"{option}: {tokenizer_json} is not a Hugging Face tokenizer.json") from None
    return max(ids, default=-1) + 1


def check_vocabulary(model: ModelArgs, tokens: int, option: str, source: Path) -> None:
    if tokens > model.vocab_size:
        raise SubmitError(
            f"{option}: {source} has {tokens} tokens, more than model.vocab_size {model.vocab_size}; "
            "declare a vocabulary that holds it (or vocab_size: data)"
        )
