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
    the output head whether tied or not; the 6N term of the MFU formula uses this one. In a mixture of experts
    only the routed experts a token is sent to count there: `active` is total less the experts a token skips
    (the usual "active parameters"), and flop_params counts active blocks; per_layer stays every parameter
    (what memory holds), active_per_layer what one token multiplies by."""

    total: int
    embedding: int
    non_embedding: int
    flop_params: int
    per_layer: int
    active: int = 0
    active_per_layer: int = 0


@functools.lru_cache(maxsize=1024)  # the planner's fit asks for the same shapes millions of times
def count_parameters(args: ModelArgs) -> ParamCounts:
    family = family_named(args.flavor)
    per_layer = family.layer_parameters(args)
    active_per_layer = per_layer if family.active_layer_parameters is None else family.active_layer_parameters(args)
    table = args.vocab_size * args.dim
    head = 0 if args.tie_embeddings else table
    final_norm = family.final_norm_parameters(args.dim)
    blocks = args.n_layers * per_layer + final_norm
    active_blocks = args.n_layers * active_per_layer + final_norm
    total = table + head + blocks
    embedding = table + head
    return ParamCounts(
        total=total,
        embedding=embedding,
        non_embedding=total - embedding,
        flop_params=active_blocks + table,
        per_layer=per_layer,
        active=table + head + active_blocks,
        active_per_layer=active_per_layer,
    )
