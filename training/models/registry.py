"""Named model shapes. The published ones carry the shapes of their model cards / HF config.json files."""

from __future__ import annotations

from training.models.args import ModelArgs, ModelArgsError

MODEL_CONFIGS: dict[str, ModelArgs] = {
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
    "llama3-8b": ModelArgs(
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
}

# Sizes as published (model cards / papers), used by the tests to check the shapes above.
PUBLISHED_TOTAL_PARAMS: dict[str, int] = {
    "125m": 125_000_000,
    "1b": 1_235_814_400,
    "llama2-7b": 6_738_415_616,
    "llama2-13b": 13_015_864_320,
    "llama2-70b": 68_976_648_192,
    "llama3-8b": 8_030_261_248,
    "pythia-6.9b": 6_857_302_016,
    "neox-20b": 20_554_567_680,
}


def get_model_args(name: str) -> ModelArgs:
    try:
        return MODEL_CONFIGS[name]
    except KeyError:
        known = ", ".join(MODEL_CONFIGS)
        raise ModelArgsError(f"model.name: {name!r} is not a known model (known: {known})") from None
