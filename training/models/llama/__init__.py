"""The Llama family: pre-norm RMSNorm, SwiGLU, rotary attention with optional GQA (and Qwen2/Qwen3 options).

family.py (torch-free descriptor), configs.py (named shapes), model.py (the block), hf.py (Hugging Face adapter).
This __init__ imports nothing, so the planner can read the descriptor without torch.
"""
