"""The Mixtral family: Llama attention with a mixture-of-experts feed-forward; DeepSeek-V3-style shapes too."""
