"""Tokenized training data: Megatron indexed datasets (.bin/.idx), their manifest, verification and the loader."""
