"""The GPT-NeoX family's named shapes: Pythia and NeoX as published, and the GPT shapes of the published
benchmark tables the planner is calibrated on (planner/published.py), which share the NeoX block's arithmetic.
"""

from __future__ import annotations

from training.models.args import ModelArgs


def gpt_4h(hidden: int, layers: int, heads: int, vocab: int) -> ModelArgs:
    """A GPT with a 4h GELU MLP, LayerNorm and tied embeddings (the neox flavor's block)."""
    return ModelArgs(
        flavor="neox",
        dim=hidden,
        n_layers=layers,
        n_heads=heads,
        ffn_dim=4 * hidden,
        vocab_size=vocab,
        max_seq_len=2048,
        tie_embeddings=True,
    )


# The Megatron-LM paper's GPT shapes by size label: (hidden, layers, heads); 51,200 vocabulary, 2048 tokens.
MEGATRON_SHAPES: dict[str, tuple[int, int, int]] = {
    "1.7b": (2304, 24, 24),
    "3.6b": (3072, 30, 32),
    "7.5b": (4096, 36, 32),
    "18b": (6144, 40, 48),
    "39b": (8192, 48, 64),
    "76b": (10240, 60, 80),
    "145b": (12288, 80, 96),
    "310b": (16384, 96, 128),
    "530b": (20480, 105, 128),
    "1t": (25600, 128, 160),
}
MEGATRON_VOCAB = 51200

# llm-foundry's MPT shapes by size label: (hidden, layers, heads); 50,368 vocabulary. Their learned position
# embeddings (seq x hidden) are left out: not matmul parameters, under 0.3 % of any benchmarked model.
MPT_SHAPES: dict[str, tuple[int, int, int]] = {
    "1b": (2048, 24, 16),
    "3b": (2560, 32, 20),
    "7b": (4096, 32, 32),
    "13b": (5120, 40, 40),
    "30b": (7168, 48, 64),
    "70b": (8192, 80, 64),
}
MPT_VOCAB = 50368

CONFIGS: dict[str, ModelArgs] = {
    # GPT-3 Small's shape (12 x 768, 12 heads, 4h MLP) in the NeoX flavor with a tied 50,304 vocabulary.
    "125m": ModelArgs(
        flavor="neox",
        dim=768,
        n_layers=12,
        n_heads=12,
        ffn_dim=3072,
        vocab_size=50304,
        rotary_pct=0.25,
        tie_embeddings=True,
    ),
    # Pythia and NeoX: GPT-2 BPE padded to 50,432, untied head, rotary on 25 % of each head.
    "pythia-6.9b": ModelArgs(
        flavor="neox",
        dim=4096,
        n_layers=32,
        n_heads=32,
        ffn_dim=16384,
        vocab_size=50432,
        rotary_pct=0.25,
        max_seq_len=2048,
    ),
    "neox-20b": ModelArgs(
        flavor="neox",
        dim=6144,
        n_layers=44,
        n_heads=64,
        ffn_dim=24576,
        vocab_size=50432,
        rotary_pct=0.25,
        max_seq_len=2048,
    ),
    **{f"megatron-gpt-{size}": gpt_4h(*shape, MEGATRON_VOCAB) for size, shape in MEGATRON_SHAPES.items()},
    **{f"mpt-{size}": gpt_4h(*shape, MPT_VOCAB) for size, shape in MPT_SHAPES.items()},
}

# Sizes as published (model cards / papers), used by the tests to check the shapes above.
PUBLISHED_TOTAL_PARAMS: dict[str, int] = {
    "125m": 125_000_000,
    "pythia-6.9b": 6_857_302_016,
    "neox-20b": 20_554_567_680,
}
