"""The Qwen3 family: Qwen3 dense and Qwen3-MoE (training/models/families.py)."""
