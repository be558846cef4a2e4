"""Supervised fine-tuning data: instruction and chat rows -> tokens with a loss mask, and their packed batches."""
