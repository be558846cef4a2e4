"""The Mixtral family's named shapes: tiny CPU test shapes, Mixtral 8x7B and 8x22B as their HF config.json files
give them, and a DeepSeek-V3-style shape.

"deepseek-v3-mha" is DeepSeek-V3's MoE layout (7168 wide, 61 layers, 256 routed experts of width 2048 with 8 per
token, one shared expert, sigmoid affinities with the aux-loss-free bias, routed scaling 2.5, 129,280 tokens) with
plain multi-head attention where DeepSeek-V3 has multi-head latent attention (MLA is not built), every layer MoE
(DeepSeek-V3's first three are dense) and top-k over all experts (no node-limited group routing). It is not
DeepSeek-V3's parameter count and has no Hugging Face export.
"""

from __future__ import annotations

from training.models.args import ModelArgs

_MIXTRAL_8X7B = ModelArgs(
    flavor="mixtral",
    dim=4096,
    n_layers=32,
    n_heads=32,
    n_kv_heads=8,
    ffn_dim=14336,
    vocab_size=32000,
    norm_eps=1e-5,
    rope_theta=1000000.0,
    max_seq_len=32768,
    n_experts=8,
    experts_per_token=2,
    router_aux_loss_coef=0.02,
)

_DEEPSEEK_V3_STYLE = ModelArgs(
    flavor="mixtral",
    dim=7168,
    n_layers=61,
    n_heads=128,
    attention_head_dim=128,
    ffn_dim=18432,
    vocab_size=129280,
    norm_eps=1e-6,
    rope_theta=10000.0,
    max_seq_len=4096,
    n_experts=256,
    experts_per_token=8,
    expert_ffn_dim=2048,
    n_shared_experts=1,
    router_score="sigmoid",
    route_scale=2.5,
    router_bias_update_rate=0.001,
)

CONFIGS: dict[str, ModelArgs] = {
    "mixtral-tiny": _MIXTRAL_8X7B.replace(
        dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=512, max_seq_len=256, n_experts=4
    ),
    "deepseek-v3-tiny": _DEEPSEEK_V3_STYLE.replace(
        dim=64,
        n_layers=2,
        n_heads=4,
        attention_head_dim=16,
        ffn_dim=128,
        vocab_size=512,
        max_seq_len=256,
        n_experts=8,
        experts_per_token=2,
        expert_ffn_dim=32,
    ),
    "mixtral-8x7b": _MIXTRAL_8X7B,
    "mixtral-8x22b": _MIXTRAL_8X7B.replace(
        dim=6144, n_layers=56, n_heads=48, ffn_dim=16384, max_seq_len=65536, vocab_size=32768
    ),
    "deepseek-v3-mha": _DEEPSEEK_V3_STYLE,
}

PUBLISHED_TOTAL_PARAMS: dict[str, int] = {
    "mixtral-8x7b": 46_702_792_704,  # the safetensors index's total_size / 2 (bf16)
}
