"""Imported by torchtitan 0.2.2 itself ([experimental] custom_import of bench/torchtitan_v0_2_job.py's TOML), never by
our trainer: registers `llama3_bench`, torchtitan's own Llama 3 train spec with Llama 3.2 1B's shape added as flavor
"1B" (dim 2048, 16 layers, GQA 32/8, SwiGLU 8192 = 256-multiple of 1.5 x 2/3 x 4 x 2048, vocabulary 128,256,
rope theta 500,000). The registry call and the dict of flavors are 0.2.2's (torchtitan/protocols/train_spec.py,
torchtitan/models/llama3/__init__.py)."""

from __future__ import annotations

import dataclasses

from torchtitan.models.llama3 import TransformerModelArgs, get_train_spec, llama3_args
from torchtitan.protocols.train_spec import register_train_spec

from bench.torchtitan_v0_2_job import FLAVOR, TRAIN_SPEC_NAME

LLAMA_3_2_1B = TransformerModelArgs(
    dim=2048,
    n_layers=16,
    n_heads=32,
    n_kv_heads=8,
    ffn_dim_multiplier=1.5,
    multiple_of=256,
    vocab_size=128256,
    rope_theta=500000,
)

register_train_spec(
    TRAIN_SPEC_NAME, dataclasses.replace(get_train_spec(), model_args={**llama3_args, FLAVOR: LLAMA_3_2_1B})
)
