"""Parameter counts from the shape alone (no torch), for MFU and for planners sizing a job."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from training.models.args import ModelArgs
from training.models.families import family_named


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


@functools.lru_cache(maxsize=1024)  # the planner's fit asks for the same shapes millions of times
def count_parameters(args: ModelArgs) -> ParamCounts:
    family = family_named(args.flavor)
    per_layer = family.layer_parameters(args)
    table = args.vocab_size * args.dim
    head = 0 if args.tie_embeddings else table
    blocks = args.n_layers * per_layer + family.final_norm_parameters(args.dim)
    total = table + head + blocks
    embedding = table + head
    return ParamCounts(
        total=total,
        embedding=embedding,
        non_embedding=total - embedding,
        flop_params=blocks + table,
        per_layer=per_layer,
    )
