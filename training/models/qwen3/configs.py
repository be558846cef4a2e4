"""The Qwen3 family's named shapes: tiny CPU test shapes and the released Qwen3 / Qwen3-MoE shapes as their HF
config.json files give them (Qwen/Qwen3-0.6B, Qwen/Qwen3-8B, Qwen/Qwen3-30B-A3B)."""

from __future__ import annotations

from training.models.args import ModelArgs

_QWEN3 = ModelArgs(
    flavor="qwen3",
    dim=1024,
    n_layers=28,
    n_heads=16,
    n_kv_heads=8,
    attention_head_dim=128,
    qk_norm=True,
    ffn_dim=3072,
    vocab_size=151936,
    norm_eps=1e-6,
    rope_theta=1000000.0,
    max_seq_len=40960,
    tie_embeddings=True,
)

CONFIGS: dict[str, ModelArgs] = {
    # CPU test shapes: a few hundred thousand parameters; `vocab_size: data` in a job sizes the table.
    "qwen3-tiny": _QWEN3.replace(
        dim=64, n_layers=2, n_heads=4, n_kv_heads=2, attention_head_dim=32, ffn_dim=128, vocab_size=512, max_seq_len=256
    ),
    "qwen3-moe-tiny": _QWEN3.replace(
        dim=64,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        attention_head_dim=32,
        ffn_dim=128,
        vocab_size=512,
        max_seq_len=256,
        tie_embeddings=False,
        n_experts=4,
        experts_per_token=2,
        expert_ffn_dim=32,
        router_aux_loss_coef=0.01,
    ),
    "qwen3-0.6b": _QWEN3,
    "qwen3-8b": _QWEN3.replace(
        dim=4096, n_layers=36, n_heads=32, ffn_dim=12288, tie_embeddings=False, attention_head_dim=None
    ),
    # 128 experts of width 768, 8 per token; transformers' default aux coefficient for the family.
    "qwen3-30b-a3b": _QWEN3.replace(
        dim=2048,
        n_layers=48,
        n_heads=32,
        n_kv_heads=4,
        ffn_dim=6144,
        tie_embeddings=False,
        n_experts=128,
        experts_per_token=8,
        expert_ffn_dim=768,
        router_aux_loss_coef=0.001,
    ),
}

# The model cards give rounded sizes only (0.6B, 8.2B, 30.5B total / 3.3B active); tests compare to those.
PUBLISHED_TOTAL_PARAMS: dict[str, int] = {}
