"""torchtitan 0.2.2's side of bench/gpu_vs_torchtitan.py, the part that needs no torchtitan: the TOML job file that
`python -m torchtitan.train --job.config_file FILE` reads (torchtitan/config/job_config.py of the 0.2.2 wheel:
[job], [model], [optimizer], [lr_scheduler], [training], [metrics], [checkpoint], [activation_checkpoint],
[compile], [experimental]).

0.2.2's Llama 3 has no 1B flavor, so the job names the train spec `bench.torchtitan_v0_2_spec` registers through
[experimental] custom_import: Llama 3's own spec with Llama 3.2 1B's shape added. That spec is untied (a separate
output projection), so ours runs untied too in this comparison. Unlike 0.3.0, 0.2.2 takes SDPA with a causal mask for
language models, the attention ours uses, so both sides run the same kernels' family.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TORCHTITAN_V0_2_SPEC_MODULE = "bench.torchtitan_v0_2_spec"
TRAIN_SPEC_NAME = "llama3_bench"
FLAVOR = "1B"
AC_MODES = ("none", "selective")


@dataclass(frozen=True)
class TorchtitanV02Job:
    corpus_dir: Path  # a directory with train.jsonl: what the "c4_test" loader reads as dataset_path
    tokenizer_dir: Path  # holds tokenizer.json (model.hf_assets_path)
    dump_folder: Path
    seq_len: int
    micro_batch: int
    steps: int
    ac: str
    compiled: bool


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    text = str(value)
    if any(ch in text for ch in '"\\\n'):
        raise ValueError(f"torchtitan job: {text!r} cannot be written as a plain TOML string")
    return f'"{text}"'


def job_sections(job: TorchtitanV02Job) -> dict[str, dict[str, object]]:
    """The job as TOML sections; the same settings as ours (AdamW at 3e-4, bf16 parameters with fp32 reductions,
    norm clipping at 1.0, no checkpoint, a metrics line per step)."""
    if job.ac not in AC_MODES:
        raise ValueError(f"--ac: {job.ac!r} is not one of {', '.join(AC_MODES)}")
    return {
        "job": {"dump_folder": str(job.dump_folder), "description": "bench/gpu_vs_torchtitan.py"},
        "metrics": {"log_freq": 1, "disable_color_printing": True, "enable_tensorboard": False},
        "model": {"name": TRAIN_SPEC_NAME, "flavor": FLAVOR, "hf_assets_path": str(job.tokenizer_dir)},
        "optimizer": {"name": "AdamW", "lr": 3e-4, "eps": 1e-8},
        "lr_scheduler": {"warmup_steps": 2, "decay_type": "cosine"},
        "training": {
            "dataset": "c4_test",
            "dataset_path": str(job.corpus_dir),
            "local_batch_size": job.micro_batch,
            "seq_len": job.seq_len,
            "steps": job.steps,
            "max_norm": 1.0,
            "mixed_precision_param": "bfloat16",
            "mixed_precision_reduce": "float32",
        },
        "checkpoint": {"enable": False},
        "activation_checkpoint": {"mode": job.ac},
        "compile": {"enable": job.compiled, "components": ["model", "loss"]},
        "experimental": {"custom_import": TORCHTITAN_V0_2_SPEC_MODULE},
    }


def job_toml(job: TorchtitanV02Job) -> str:
    lines: list[str] = []
    for section, values in job_sections(job).items():
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {_toml_value(value)}" for key, value in values.items())
        lines.append("")
    return "\n".join(lines)
