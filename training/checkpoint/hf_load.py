"""Fine-tuning start: HF safetensors (one file or sharded with model.safetensors.index.json) into a model whose
parameters may be FSDP2 DTensor shards. Each rank opens only the files holding tensors it needs and reads only
the rows of its own shard (whole attention heads for NeoX's permuted query_key_value rows). A stacked expert
weight ([n_experts, out, in], one HF tensor per expert) reads the experts of its own dim-0 shard."""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from torch import nn
from torch.distributed.tensor import DTensor, Shard

from training.checkpoint.errors import CheckpointError
from training.models.args import ModelArgs
from training.models.hf import hf_expert_names, hf_name, hf_rows_to_ours, needs_row_permutation
from training.parallel.parallelize import plain_name

INDEX_FILE = "model.safetensors.index.json"


def weight_map(directory: Path) -> dict[str, Path]:
    """HF tensor name -> the safetensors file that holds it."""
    index = directory / INDEX_FILE
    if index.is_file():
        try:
            mapping = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (ValueError, KeyError) as error:
            raise CheckpointError(f"model.hf_checkpoint: {str(index)!r} is not a safetensors index: {error}") from None
        return {name: directory / file for name, file in mapping.items()}
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"model.hf_checkpoint: {str(directory)!r} holds no *.safetensors files")
    found: dict[str, Path] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            found.update(dict.fromkeys(handle.keys(), file))
    return found


def local_row_range(param: torch.Tensor) -> tuple[int, int]:
    """[start, end) of dim 0 this rank holds: torch.chunk semantics per sharded mesh dim, as FSDP2 shards."""
    start, end = 0, param.shape[0]
    if not isinstance(param, DTensor):
        return start, end
    coordinate = param.device_mesh.get_coordinate()
    assert coordinate is not None, "this rank is not in the parameter's mesh"
    for mesh_dim, placement in enumerate(param.placements):
        if isinstance(placement, Shard):
            if placement.dim != 0:
                raise CheckpointError(f"parameter sharded on dim {placement.dim}; only dim-0 (FSDP2) is supported")
            offset, length = chunk_range(end - start, param.device_mesh.size(mesh_dim), coordinate[mesh_dim])
            start, end = start + offset, start + offset + length
    return start, end


def chunk_range(length: int, parts: int, index: int) -> tuple[int, int]:
    """(offset, length) of part `index` when torch.chunk splits `length` rows into `parts` (the last may be short
    or empty)."""
    size = -(-length // parts)
    offset = min(index * size, length)
    return offset, min(size, length - offset)


def _read_rows(handle: Any, args: ModelArgs, name: str, key: str, start: int, end: int) -> torch.Tensor:
    view = handle.get_slice(key)
    if not needs_row_permutation(args, name):
        return view[start:end]
    block = 3 * args.head_dim  # one head's q, k, v rows; the permutation never leaves a head
    first, last = start // block * block, -(-end // block) * block
    rows = hf_rows_to_ours(args, name, view[first:last])
    return rows[start - first : end - first]


@torch.no_grad()
def load_hf_weights(
    model: nn.Module, args: ModelArgs, directory: Path, parameters: Iterable[tuple[str, nn.Parameter]] | None = None
) -> int:
    """Copy HF weights into `model` in place (into `parameters` only when given: a LoRA model's base, say); returns
    the number of tensors loaded."""
    files = weight_map(directory)
    loaded = 0
    with ExitStack() as stack:
        handles: dict[Path, Any] = {}
        for raw_name, param in model.named_parameters() if parameters is None else parameters:
            name = plain_name(raw_name)
            per_expert = hf_expert_names(args, name)
            if per_expert is not None:
                _load_experts(param, name, per_expert, files, handles, stack, directory)
                loaded += 1
                continue
            key = hf_name(args, name)
            if key not in files:
                raise CheckpointError(f"model.hf_checkpoint: {str(directory)!r} has no tensor {key!r} (for {name})")
            if files[key] not in handles:
                handles[files[key]] = stack.enter_context(safe_open(str(files[key]), framework="pt"))
            handle = handles[files[key]]
            shape = tuple(handle.get_slice(key).get_shape())
            if shape != tuple(param.shape):
                raise CheckpointError(
                    f"model.hf_checkpoint: tensor {key!r} has shape {list(shape)}, the model expects {list(param.shape)}"
                )
            start, end = local_row_range(param)
            local = param.to_local() if isinstance(param, DTensor) else param
            if local.shape[0] != end - start:
                raise CheckpointError(f"{name}: local shard has {local.shape[0]} rows, expected {end - start}")
            if end > start:
                local.copy_(_read_rows(handle, args, name, key, start, end))
            loaded += 1
    return loaded


def _handle(path: Path, handles: dict[Path, Any], stack: ExitStack) -> Any:
    if path not in handles:
        handles[path] = stack.enter_context(safe_open(str(path), framework="pt"))
    return handles[path]


def _load_experts(
    param: torch.Tensor,
    name: str,
    keys: list[str],
    files: dict[str, Path],
    handles: dict[Path, Any],
    stack: ExitStack,
    directory: Path,
) -> None:
    """Expert j of a stacked weight is HF tensor keys[j]; this rank reads the experts of its dim-0 rows only."""
    missing = [key for key in keys if key not in files]
    if missing:
        raise CheckpointError(f"model.hf_checkpoint: {str(directory)!r} has no tensor {missing[0]!r} (for {name})")
    start, end = local_row_range(param)
    local = param.to_local() if isinstance(param, DTensor) else param
    if local.shape[0] != end - start:
        raise CheckpointError(f"{name}: local shard has {local.shape[0]} experts, expected {end - start}")
    for row, key in enumerate(keys[start:end]):
        view = _handle(files[key], handles, stack).get_slice(key)
        shape = tuple(view.get_shape())
        if shape != tuple(param.shape[1:]):
            raise CheckpointError(
                f"model.hf_checkpoint: tensor {key!r} has shape {list(shape)}, the model expects {list(param.shape[1:])}"
            )
        local[row].copy_(view[:])
