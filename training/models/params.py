"""Parameter counts from the shape alone (no torch), for MFU and for planners sizing a job."""

from __future__ import annotations

from dataclasses import dataclass

from training.models.args import ModelArgs


@dataclass(frozen=True)
class ParamCounts:
    """total: every parameter. embedding: the token table plus an untied output head (Pythia's convention for
    "non-embedding"). flop_params: parameters that take part in a matmul for every token, i.e. the blocks plus
    the output head whether tied or not; the 6N term of the MFU formula uses this one."""

    total: int
    embedding: int
    non_embedding: int
    flop_params: int
    per_layer: int


def _layer_params(args: ModelArgs) -> int:
    dim, ffn, kv_dim, q_dim = args.dim, args.ffn_dim, args.kv_heads * args.head_dim, args.attention_dim
    if args.flavor == "llama":
        attention = dim * q_dim + 2 * dim * kv_dim + q_dim * dim + ((q_dim + 2 * kv_dim) if args.qkv_bias else 0)
        mlp = 3 * dim * ffn
        norms = 2 * dim + (2 * args.head_dim if args.qk_norm else 0)
        return attention + mlp + norms
    attention = (3 * dim * dim + 3 * dim) + (dim * dim + dim)
    mlp = (dim * ffn + ffn) + (ffn * dim + dim)
    norms = 2 * 2 * dim
    return attention + mlp + norms


def _final_norm_params(args: ModelArgs) -> int:
    return args.dim if args.flavor == "llama" else 2 * args.dim


def count_parameters(args: ModelArgs) -> ParamCounts:
    per_layer = _layer_params(args)
    table = args.vocab_size * args.dim
    head = 0 if args.tie_embeddings else table
    blocks = args.n_layers * per_layer + _final_norm_params(args)
    total = table + head + blocks
    embedding = table + head
    return ParamCounts(
        total=total,
        embedding=embedding,
        non_embedding=total - embedding,
        flop_params=blocks + table,
        per_layer=per_layer,
    )
