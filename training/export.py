"""`python -m training.export --run-dir DIR --output OUT [--step N] [--dtype bfloat16] [--tokenizer FILE] [--merge-lora]`

Writes the model of a committed checkpoint as one HF-style directory: OUT/model.safetensors (HF parameter names,
LlamaForCausalLM or GPTNeoXForCausalLM layout) and OUT/config.json. A job config with
`model: {hf_checkpoint: OUT}` fine-tunes from it. Runs in one process on CPU; DCP reassembles the shards.
A LoRA run's checkpoint gives its frozen base there and the adapters in PEFT's format in OUT/adapter; with
--merge-lora, OUT holds the adapters folded into the weights instead (a full checkpoint, no adapter).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import warnings
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from safetensors.torch import save_file

from spec.cli import OneLineParser, user_errors
from spec.cli_types import existing_directory, output_directory
from training.checkpoint.errors import CheckpointError
from training.checkpoint.layout import TRAINER_STATE, complete_checkpoints, latest_complete, step_dir
from training.checkpoint.ownership import NotOwnedError, check_tree
from training.checkpoint.storage import TensorFileReader
from training.finetune.config import LoraSection
from training.finetune.lora import apply_lora
from training.finetune.peft_format import adapter_tensors, base_state_dict, merged_state_dict, write_adapter
from training.models.args import ModelArgs
from training.models.hf import hf_config, to_hf_state_dict
from training.models.transformer import Transformer, build_model

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def find_checkpoint(checkpoint_root: Path, step: int | None) -> Path:
    if step is None:
        latest = latest_complete(checkpoint_root)
        if latest is None:
            raise CheckpointError(f"--run-dir: no committed checkpoint under {checkpoint_root}")
        return latest[1]
    if (step, step_dir(checkpoint_root, step)) not in complete_checkpoints(checkpoint_root):
        raise CheckpointError(f"--step: {step} has no committed checkpoint under {checkpoint_root}")
    return step_dir(checkpoint_root, step)


def checkpoint_lora(checkpoint: Path) -> LoraSection | None:
    """The adapters' settings of a LoRA run's checkpoint (trainer_state.json), None for any other."""
    state = json.loads((checkpoint / TRAINER_STATE).read_text(encoding="utf-8"))
    lora = (state.get("finetune") or {}).get("lora")
    return None if lora is None else LoraSection.model_validate(lora)


def load_checkpoint_model(checkpoint: Path) -> Transformer:
    """The full (unsharded) model of a checkpoint, on CPU in float32; a LoRA run's with its adapters. Only one its
    reader's user (or group) wrote: DCP unpickles its `.metadata` (training/checkpoint/ownership.py)."""
    check_tree(checkpoint, "checkpoint")
    state = json.loads((checkpoint / TRAINER_STATE).read_text(encoding="utf-8"))
    args = ModelArgs(**state["model_args"])
    model = build_model(args, device="meta")
    lora = checkpoint_lora(checkpoint)
    if lora is not None:
        apply_lora(model, args, lora, torch.float32)
    model = model.to_empty(device="cpu")
    weights = model.state_dict()
    with warnings.catch_warnings():
        # One process reading a multi-rank checkpoint is the intent here, not a mistake worth a warning.
        warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
        dcp.load({"model": weights}, storage_reader=TensorFileReader(checkpoint), no_dist=True)
    model.load_state_dict(weights)
    return model


def export_checkpoint(
    checkpoint: Path, output: Path, dtype: torch.dtype, tokenizer: Path | None = None, merge_lora: bool = False
) -> Path:
    model = load_checkpoint_model(checkpoint)
    args = model.args
    lora = checkpoint_lora(checkpoint)
    if merge_lora and lora is None:
        raise CheckpointError(f"--merge-lora: {checkpoint} is not of a LoRA run (no adapters to merge)")
    weights = merged_state_dict(model) if merge_lora else base_state_dict(model)
    tensors = {name: tensor.detach().to(dtype).contiguous() for name, tensor in to_hf_state_dict(args, weights).items()}
    output.mkdir(parents=True, exist_ok=True)
    if lora is not None and not merge_lora:  # the base here, the adapters beside it
        write_adapter(adapter_tensors(model, args), lora, str(output.resolve()), output / "adapter")
    save_file(tensors, str(output / WEIGHTS_FILE), metadata={"format": "pt", "source": str(checkpoint)})
    dtype_name = next(name for name, value in DTYPES.items() if value == dtype)
    (output / CONFIG_FILE).write_text(json.dumps(hf_config(args, dtype_name), indent=2) + "\n", encoding="utf-8")
    if tokenizer is not None:
        shutil.copyfile(tokenizer, output / "tokenizer.json")
    return output


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m training.export", description=__doc__.splitlines()[0])
    # checked after parsing, so a command naming a run an earlier step makes parses on its own
    parser.add_argument("--run-dir", required=True, help="the training run directory")
    parser.add_argument(
        "--output", required=True, type=output_directory, help="directory to write model.safetensors and config.json to"
    )
    parser.add_argument("--checkpoint-dir", type=existing_directory, help="checkpoint root if not RUN_DIR/checkpoints")
    parser.add_argument("--step", type=int, help="export this step instead of the latest")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--tokenizer", help="tokenizer.json to copy alongside (e.g. the dataset's)")
    parser.add_argument(
        "--merge-lora", action="store_true", help="a LoRA run: fold the adapters into the weights (a full checkpoint)"
    )
    args = parser.parse_args(argv)
    try:
        existing_directory(args.run_dir)
    except argparse.ArgumentTypeError as error:
        parser.error(f"argument --run-dir: {error}")
    root = Path(args.checkpoint_dir) if args.checkpoint_dir else Path(args.run_dir) / "checkpoints"
    try:
        checkpoint = find_checkpoint(root, args.step)
        out = export_checkpoint(
            checkpoint,
            Path(args.output),
            DTYPES[args.dtype],
            Path(args.tokenizer) if args.tokenizer else None,
            merge_lora=args.merge_lora,
        )
    except (CheckpointError, NotOwnedError, OSError) as error:  # what to export, or where: the caller's to fix (exit 2)
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"exported {checkpoint} -> {out / WEIGHTS_FILE} and {out / CONFIG_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
