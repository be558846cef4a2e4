"""The GPT-NeoX family: LayerNorm, fused QKV with biases, partial rotary, GELU MLP, parallel attention and MLP.

family.py (torch-free descriptor), configs.py (named shapes), model.py (the block), hf.py (Hugging Face adapter).
This __init__ imports nothing, so the planner can read the descriptor without torch.
"""
