"""The Llama family's named shapes, as their model cards / HF config.json files give them.

Training configs and the shapes of the published benchmark tables the planner is calibrated on (planner/
published.py) share this one table, so a name means the same shape in a job YAML and in `llm-plan --model`.
"""

from __future__ import annotations

from training.models.args import ModelArgs

# Llama 3 8B; the larger Llama 3 shapes below are it with other sizes (their rotary scaling changes neither FLOPs
# nor memory, and the trainer reads it from a config.json).
_LLAMA3_8B = ModelArgs(
    flavor="llama",
    dim=4096,
    n_layers=32,
    n_heads=32,
    n_kv_heads=8,
    ffn_dim=14336,
    vocab_size=128256,
    norm_eps=1e-5,
    rope_theta=500000.0,
    max_seq_len=8192,
)

CONFIGS: dict[str, ModelArgs] = {
    # CPU demo: about 2 M parameters with an 8k vocabulary; trains in minutes on two cores. Job configs usually
    # set `vocab_size: data` to size the table from the dataset's tokenizer.
    "tiny": ModelArgs(
        flavor="llama",
        dim=128,
        n_layers=4,
        n_heads=4,
        ffn_dim=384,
        vocab_size=8192,
        max_seq_len=256,
        tie_embeddings=True,
    ),
    # Llama 3.2 1B's shape: GQA 32/8, tied embeddings, 128k vocabulary.
    "1b": ModelArgs(
        flavor="llama",
        dim=2048,
        n_layers=16,
        n_heads=32,
        n_kv_heads=8,
        ffn_dim=8192,
        vocab_size=128256,
        norm_eps=1e-5,
        rope_theta=500000.0,
        max_seq_len=8192,
        tie_embeddings=True,
    ),
    "llama2-7b": ModelArgs(
        flavor="llama",
        dim=4096,
        n_layers=32,
        n_heads=32,
        ffn_dim=11008,
        vocab_size=32000,
        norm_eps=1e-5,
        max_seq_len=4096,
    ),
    "llama2-13b": ModelArgs(
        flavor="llama",
        dim=5120,
        n_layers=40,
        n_heads=40,
        ffn_dim=13824,
        vocab_size=32000,
        norm_eps=1e-5,
        max_seq_len=4096,
    ),
    # Llama 2 34B was never released as a base model; this is the shape Code Llama 34B and the FSDP recipe use.
    "llama2-34b": ModelArgs(
        flavor="llama",
        dim=8192,
        n_layers=48,
        n_heads=64,
        n_kv_heads=8,
        ffn_dim=22016,
        vocab_size=32000,
        norm_eps=1e-5,
        max_seq_len=4096,
    ),
    "llama2-70b": ModelArgs(
        flavor="llama",
        dim=8192,
        n_layers=80,
        n_heads=64,
        n_kv_heads=8,
        ffn_dim=28672,
        vocab_size=32000,
        norm_eps=1e-5,
        max_seq_len=4096,
    ),
    "llama3-8b": _LLAMA3_8B,
    # Llama 3 70B and Llama 3.1 405B as their config.json files give them (tests/planner/test_published.py reads
    # the files and compares).
    "llama3-70b": _LLAMA3_8B.replace(dim=8192, n_layers=80, n_heads=64, ffn_dim=28672),
    "llama3.1-405b": _LLAMA3_8B.replace(dim=16384, n_layers=126, n_heads=128, ffn_dim=53248, max_seq_len=131072),
}

# Sizes as published (model cards / papers), used by the tests to check the shapes above.
PUBLISHED_TOTAL_PARAMS: dict[str, int] = {
    "1b": 1_235_814_400,
    "llama2-7b": 6_738_415_616,
    "llama2-13b": 13_015_864_320,
    "llama2-70b": 68_976_648_192,
    "llama3-8b": 8_030_261_248,
}
