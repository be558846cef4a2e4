"""Low-precision training: FP8 matrix multiplies for the blocks' linear layers (torchao), a converter applied to
the model on the meta device before parallelize, as torchtitan's model converters are. See docs/float8.md."""
