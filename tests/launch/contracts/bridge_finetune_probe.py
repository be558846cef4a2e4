"""Runs in .bridge-venv (Megatron Bridge 0.6.0), never in the repo's venv:

    .bridge-venv/bin/python tests/launch/contracts/bridge_finetune_probe.py WORLD_SIZE RUN_DIR/bridge-config.yaml [...]

For each config rendered from a finetune: section it builds the ConfigContainer with launch/jobs/bridge_pretrain.py's
own build_config (Megatron Bridge's SFT or PEFT recipe, our overrides, LoRA and SFT data), runs runtime_config_update
(what finetune() -> pretrain() runs first, ConfigContainer.validate() and the dataset config's own validate()
included), then builds the SFT datasets from our JSONL with Bridge's own GPTSFTDatasetBuilder (offline packing
included) and reads a packed sample. Prints one JSON line; errors are reported, not raised.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from typing import Any

from bridge_probe import AbsentTEFinder, _error, without_te  # siblings: the probes run by path
from entry_point import load_entry_point


def _peft(container: Any) -> dict[str, Any] | None:
    peft = container.peft
    if peft is None:
        return None
    return {
        "type": type(peft).__name__,
        "target_modules": list(peft.target_modules),
        "dim": peft.dim,
        "alpha": peft.alpha,
        "dropout": peft.dropout,
    }


def _sft_data(container: Any) -> dict[str, Any]:
    from megatron.bridge.data.builders.gpt_sft import GPTSFTDatasetBuilder
    from megatron.bridge.training.tokenizers.tokenizer import build_tokenizer

    tokenizer = build_tokenizer(container.tokenizer)
    train, valid, test = GPTSFTDatasetBuilder(container.dataset, tokenizer).build()
    # One unpacked sample too: the loss mask of one row against its prompt and response.
    from megatron.bridge.data.builders.gpt_sft import build_gpt_sft_split, normalize_gpt_sft_dataset_kwargs

    rows = build_gpt_sft_split(
        f"{container.dataset.dataset_root}/validation.jsonl",
        tokenizer=tokenizer,
        seq_length=container.dataset.seq_length,
        memmap_workers=1,
        seed=container.dataset.seed,
        packed_sequence_size=-1,
        is_test=True,
        dataset_kwargs=normalize_gpt_sft_dataset_kwargs(container.dataset),
    )
    row = rows[0]
    ids = [int(t) for t in row["input_ids"]]
    answer_start = int(row["answer_start_idx"])
    packed = train[0]
    batch = train.collate_fn([packed])
    return {
        "train_type": type(train).__name__,
        "valid_type": type(valid).__name__ if valid is not None else None,
        "test": test is not None,
        "train_samples": len(train),
        "valid_samples": len(valid) if valid is not None else 0,
        "packed_keys": sorted(packed),
        "batch_keys": sorted(batch),
        "packed_tokens": int(batch["tokens"].numel()),
        "packed_loss_tokens": int(batch["loss_mask"].sum()),
        "cu_seqlens_q": [int(x) for x in batch["cu_seqlens_q"].flatten() if int(x) >= 0],
        "position_resets": int((batch["position_ids"].flatten() == 0).sum()),
        "row_prompt": tokenizer.detokenize(ids[:answer_start]),
        "row_response": tokenizer.detokenize(ids[answer_start:]),
        "eod": tokenizer.eod,
        "row_ends_with_eod": ids[-1] == tokenizer.eod,
    }


def probe(job: Any, world_size: int, config_path: str) -> dict[str, Any]:
    from megatron.bridge.training.config import runtime_config_update

    config = job.load_config(config_path)
    report: dict[str, Any] = {"config": config_path, "errors": {}}
    try:
        container = job.build_config(config)
    except Exception as error:  # reported to the test
        report["errors"]["build"] = _error(error)
        return report
    checked = copy.deepcopy(container)
    without_te(checked)
    os.environ["WORLD_SIZE"] = str(world_size)
    try:
        runtime_config_update(checked)
    except Exception as error:  # reported, not raised
        report["errors"]["validate"] = _error(error)
        return report
    ckpt, dataset = checked.checkpoint, checked.dataset
    report["peft"] = _peft(checked)
    report["checkpoint"] = {
        "pretrained_checkpoint": ckpt.pretrained_checkpoint,
        "save": ckpt.save,
        "load": ckpt.load,
        "async_save": ckpt.async_save,
    }
    report["train"] = {
        "exit_signal_handler": checked.train.exit_signal_handler,
        "exit_signal": int(checked.train.exit_signal),
        "train_iters": checked.train.train_iters,
        "micro_batch_size": checked.train.micro_batch_size,
    }
    report["dataset"] = {
        "type": type(dataset).__name__,
        "dataset_root": str(dataset.dataset_root),
        "hf_dataset": dataset.hf_dataset,
        "seq_length": dataset.seq_length,
        "packed_sequence_size": dataset.offline_packing_specs.packed_sequence_size,
        "pad_seq_to_mult": dataset.offline_packing_specs.pad_seq_to_mult,
    }
    report["model"] = {
        "seq_length": checked.model.seq_length,
        "context": checked.model.context_parallel_size,
        "calculate_per_token_loss": checked.model.calculate_per_token_loss,
    }
    try:
        report["data"] = _sft_data(checked)
    except Exception as error:  # reported, not raised
        report["errors"]["data"] = _error(error)
    return report


def main(argv: list[str]) -> int:
    sys.meta_path.insert(0, AbsentTEFinder())
    world_size, *paths = argv
    job = load_entry_point("bridge_pretrain")
    print("BRIDGE-FINETUNE-PROBE " + json.dumps({"reports": [probe(job, int(world_size), p) for p in paths]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
