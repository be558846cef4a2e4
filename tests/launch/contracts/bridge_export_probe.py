"""Runs in .bridge-venv (Megatron Bridge 0.6.0, NeMo Framework 26.08's), never in the repo's venv; three steps of the
Hugging Face export check (tests/launch/test_bridge_export.py):

    bridge_export_probe.py save RENDERED_HF_DIR REFERENCE_DIR CHECKPOINT_DIR
    bridge_export_probe.py python -c CODE ARG...
    bridge_export_probe.py compare REFERENCE_DIR EXPORT_DIR

`save` makes the run's checkpoint: a random Llama of the run's rendered HF config (transformers, seeded), saved as the
reference, turned into a Megatron model by Megatron Bridge's own Llama bridge and saved as a Megatron checkpoint with
Megatron Bridge's save_megatron_model (megatron-core's torch_dist writer, what pretrain() saves with).
`python` runs the documented export command's code as `python -c` would, with only the Transformer Engine stand-in
of bridge_probe.py installed (the container has TE). `compare` loads the export and the reference with transformers
and prints what differs. Each step prints one JSON line.

What CPU needs, on the save side only (the export runs unpatched):
- Megatron Core's local layer spec instead of the Transformer Engine one, and the TE-only kernels off
  (bridge_probe.TE_ONLY_SETTINGS; `persist_layer_norm`, which only TE's LayerNorm has): the checkpoint's run config
  then names the local spec, and the export rebuilds the model with it.
- cuda_calls_on_cpu(): megatron-core 0.19.2 / megatron-bridge 0.6.0's save path makes three CUDA calls that mean
  nothing without a GPU, each answered with its CPU counterpart for the length of the save.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any

from bridge_probe import TE_ONLY_SETTINGS, AbsentTEFinder  # a sibling: the probes run by path

SHAPE = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "vocab_size",
)
CPU_SETTINGS: dict[str, Any] = {**TE_ONLY_SETTINGS, "persist_layer_norm": False}


@contextlib.contextmanager
def cuda_calls_on_cpu() -> Iterator[None]:
    """The save path's GPU-only calls, given their CPU meaning while it runs:
    - megatron/bridge/training/checkpointing.py get_rng_state: `torch.cuda.get_rng_state()` (the CUDA generator's
      state, captured for every checkpoint) -> the CPU generator's state;
    - megatron/core/dist_checkpointing/strategies/filesystem_async.py preload_tensors: `torch.cuda.synchronize()`
      after the non-blocking copies to host memory -> nothing to wait for, the tensors are on the host;
    - megatron/core/dist_checkpointing/strategies/state_dict_saver.py save_state_dict_async_finalize: the write
      failure flag made on `torch.cuda.current_device()` to broadcast it (NCCL) -> made on the CPU (gloo).
    """
    import torch

    saved = (torch.cuda.get_rng_state, torch.cuda.synchronize, torch.cuda.current_device)
    torch.cuda.get_rng_state = lambda device="cuda": torch.get_rng_state()
    torch.cuda.synchronize = lambda device=None: None
    torch.cuda.current_device = lambda: "cpu"
    try:
        yield
    finally:
        torch.cuda.get_rng_state, torch.cuda.synchronize, torch.cuda.current_device = saved


def save(rendered: str, reference: str, checkpoint: str) -> dict[str, Any]:
    import torch
    from megatron.bridge import AutoBridge
    from megatron.bridge.models.gpt_provider import local_layer_spec
    from megatron.bridge.training.model_load_save import save_megatron_model, temporary_distributed_context
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(1234)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(rendered)).save_pretrained(reference)
    provider = AutoBridge.from_hf_pretrained(reference).to_megatron_provider(load_weights=True)
    for name, value in CPU_SETTINGS.items():
        setattr(provider, name, value)
    provider.transformer_layer_spec = local_layer_spec
    with temporary_distributed_context(backend="gloo"):
        provider.finalize()
        model = provider.provide_distributed_model(wrap_with_ddp=False, use_cpu_initialization=True)
        parameters = sum(p.numel() for p in model[0].parameters())
        with cuda_calls_on_cpu():
            save_megatron_model(model, checkpoint)
    return {"provider": type(provider).__name__, "parameters": parameters}


def run_c(code: str, args: list[str]) -> None:
    """`python -c CODE ARG...`: sys.argv is ['-c', ARG...], the code runs as __main__."""
    sys.argv = ["-c", *args]
    exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})


def compare(reference: str, exported: str) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    expected = AutoModelForCausalLM.from_pretrained(reference).state_dict()
    model = AutoModelForCausalLM.from_pretrained(exported)
    actual = model.state_dict()
    config = model.config
    return {
        "architecture": type(model).__name__,
        "shape": [getattr(config, name) for name in SHAPE],
        "tensors": len(expected),
        "missing": sorted(set(expected) - set(actual)),
        "unexpected": sorted(set(actual) - set(expected)),
        "different": sorted(k for k in set(expected) & set(actual) if not torch.equal(expected[k], actual[k])),
        "dtypes": sorted({str(t.dtype) for t in actual.values()}),
        "tokenizer_vocab": len(AutoTokenizer.from_pretrained(exported)),
    }


def main(argv: list[str]) -> int:
    sys.meta_path.insert(0, AbsentTEFinder())
    step, *args = argv
    if step == "python":
        flag, code, *rest = args
        assert flag == "-c", f"only `python -c` is emulated, not {flag}"
        run_c(code, rest)
        return 0
    report = save(*args) if step == "save" else compare(*args)
    print(f"BRIDGE-EXPORT-{step.upper()} " + json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
