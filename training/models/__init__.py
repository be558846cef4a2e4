"""Decoder-only transformers, one folder per model family (training/models/families.py). No parallelism here.

This package's __init__ imports no torch so that parameter counting (args, registry, params) stays cheap for
planners; import `training.models.transformer` for the nn.Module.
"""

from training.models.args import ModelArgs, ModelArgsError
from training.models.params import ParamCounts, count_parameters
from training.models.registry import MODEL_CONFIGS, get_model_args

__all__ = ["MODEL_CONFIGS", "ModelArgs", "ModelArgsError", "ParamCounts", "count_parameters", "get_model_args"]
