"""A dataset directory as `llm-prepare --sft` leaves it for Megatron Bridge (Part A's contract): the dataset's
files (here the demo prefix's .bin/.idx, manifest and tokenizer, linked) and bridge/training.jsonl,
validation.jsonl with {"input","output"} rows; and a Hugging Face init directory of the job's shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from launch.bridge import bridge_hf_config
from training.config import load_job_config, resolve_model_args

ROWS = [
    {"input": f"Question {i}: what does function number {i} return?", "output": f"It returns the value {i * 7}."}
    for i in range(40)
]


def sft_dataset(directory: Path, demo_prefix: str, rows: list[dict[str, Any]] = ROWS) -> str:
    """The demo prefix's files linked into `directory`, Bridge's JSONL beside them; returns the new prefix."""
    directory.mkdir(parents=True, exist_ok=True)
    source = Path(demo_prefix)
    manifest = json.loads(Path(f"{demo_prefix}.manifest.json").read_text())
    for path in (*(Path(f"{demo_prefix}{s}") for s in (".bin", ".idx", ".manifest.json")),
                 source.parent / manifest["tokenizer_file"]):  # fmt: skip
        (directory / path.name).symlink_to(path)
    bridge = directory / "bridge"
    bridge.mkdir()
    held_out = len(rows) // 10 or 1
    for name, part in (("training", rows[held_out:]), ("validation", rows[:held_out])):
        (bridge / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in part))
    return str(directory / source.name)


def hf_init(directory: Path, job_yaml: Path, vocab: int = 512, **changed: Any) -> Path:
    """config.json of the job's model shape (fields in `changed` altered) and a safetensors file."""
    directory.mkdir(parents=True, exist_ok=True)
    model = resolve_model_args(load_job_config(job_yaml).model, vocab)
    (directory / "config.json").write_text(json.dumps({**bridge_hf_config(model), **changed}))
    (directory / "model.safetensors").write_bytes(b"")  # llm-submit checks presence; Bridge reads it on the nodes
    return directory
