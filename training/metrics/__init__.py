"""Per-step metrics: FLOPs accounting (MFU/HFU), memory, JSON lines + TensorBoard + console, end-of-run plot."""
