"""bench/torchtitan_v0_2_job.py and bench/torchtitan_v0_2_spec.py through torchtitan 0.2.2's own code (the release the
lent GPU machines' torch 2.11 runs): its ConfigManager reads our TOML, its Trainer's custom_import registers our
train spec, its Transformer builds the flavor (on the meta device), and its c4_test loader reads the corpus directory.
In .torchtitan-venv with torchtitan 0.2.2 first on PYTHONPATH (`make torchtitan-venv` puts it there)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from bench.gpu_vs_torchtitan import torchtitan_corpus_dir
from bench.torchtitan_v0_2_job import TorchtitanV02Job, job_toml
from tests.environments import ready
from training.models.params import count_parameters
from training.models.registry import get_model_args

REPO = Path(__file__).resolve().parents[2]
TORCHTITAN_VENV = REPO / ".torchtitan-venv"
RELEASE_DIR = TORCHTITAN_VENV / "torchtitan-0.2.2"

PROBE = textwrap.dedent(
    """
    import importlib, json, sys
    from importlib.metadata import version
    import torch
    from torchtitan.config import ConfigManager
    from torchtitan.hf_datasets.text_datasets import _validate_dataset
    from torchtitan.protocols.train_spec import get_train_spec

    config = ConfigManager().parse_args(["--job.config_file", sys.argv[1]])
    importlib.import_module(config.experimental.custom_import)  # what Trainer.__init__ does first
    spec = get_train_spec(config.model.name)
    args = spec.model_args[config.model.flavor]
    args.update_from_config(config)
    with torch.device("meta"):
        model = spec.model_cls(args)
    path, loader, process = _validate_dataset(config.training.dataset, config.training.dataset_path)
    rows = loader(path)
    print(json.dumps({
        "torchtitan": version("torchtitan"),
        "parameters": sum(p.numel() for p in model.parameters()),
        "attention": [args.attn_type, args.attn_mask_type],
        "ffn_hidden": model.layers["0"].feed_forward.w1.out_features,
        "n_kv_heads": args.n_kv_heads,
        "seq_len": [config.training.seq_len, args.max_seq_len],
        "compile": [config.compile.enable, config.compile.components],
        "ac": config.activation_checkpoint.mode,
        "checkpoint": config.checkpoint.enable,
        "mixed_precision": [config.training.mixed_precision_param, config.training.mixed_precision_reduce],
        "rows": len(rows),
        "first": process(rows[0])[:40],
    }))
    """
)


@pytest.fixture(scope="module")
def torchtitan_python() -> Path:
    """.torchtitan-venv (0.2.2 sits in it, RELEASE_DIR), built or waited for."""
    return ready("torchtitan-venv") / "bin" / "python"


@pytest.mark.parametrize(("ac", "compiled"), [("none", False), ("selective", True)])
def test_torchtitan_0_2_2_builds_the_same_model_from_our_toml(
    torchtitan_python: Path, tmp_path: Path, ac: str, compiled: bool
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"document {i} of the corpus"}) + "\n" for i in range(3)))
    job = TorchtitanV02Job(
        corpus_dir=torchtitan_corpus_dir(corpus, tmp_path / "tt-corpus"),
        tokenizer_dir=tmp_path / "tokenizer",
        dump_folder=tmp_path / "out",
        seq_len=4096,
        micro_batch=4,
        steps=30,
        ac=ac,
        compiled=compiled,
    )
    config = tmp_path / "job.toml"
    config.write_text(job_toml(job))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(RELEASE_DIR), str(REPO)]),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    completed = subprocess.run(
        [str(torchtitan_python), "-c", PROBE, str(config)], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    ours_untied = dataclasses.replace(get_model_args("1b"), tie_embeddings=False)
    assert found["torchtitan"] == "0.2.2"
    assert found["parameters"] == count_parameters(ours_untied).total == 1_498_482_688
    assert (found["ffn_hidden"], found["n_kv_heads"]) == (ours_untied.ffn_dim, ours_untied.n_kv_heads)
    assert found["attention"] == ["sdpa", "causal"]  # the attention ours runs
    assert found["seq_len"] == [4096, 4096]
    assert found["compile"] == [compiled, ["model", "loss"]] and found["ac"] == ac
    assert found["checkpoint"] is False and found["mixed_precision"] == ["bfloat16", "float32"]
    assert (found["rows"], found["first"]) == (3, "document 0 of the corpus")
