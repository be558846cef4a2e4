"""Runs in .bridge-venv (Megatron Bridge 0.6.0, NeMo Framework 26.08's), never in the repo's venv:

    .bridge-venv/bin/python tests/launch/contracts/bridge_probe.py WORLD_SIZE RUN_DIR/bridge-config.yaml [...]

For each rendered config it builds the ConfigContainer with launch/jobs/bridge_pretrain.py's own build_config (what
the job does in the container: Megatron Bridge's recipe function, our overrides), runs runtime_config_update on it
(what pretrain() runs first: mixed precision, data-parallel size, ConfigContainer.validate()) with the job's world
size, builds the tokenizer and the train/validation datasets from our .bin/.idx with Megatron Bridge's own builders,
and reports what Megatron Bridge made of it. Then it starts a job whose layout Megatron Bridge refuses through
bridge_pretrain.run_job, to see how the refusal is reported. Prints one JSON line; errors are reported, not raised.

Transformer Engine has no CPU build (transformer-engine-torch is a source distribution compiled against CUDA), and
Megatron Core runs without it. Two modules of megatron-bridge 0.6.0 import it unguarded at their top
(peft/lora_layers.py, models/gpt_full_te_layer_autocast_spec.py; LoRA and a TE layer spec, neither used by
pretraining): for those two only, `import transformer_engine...` yields a stand-in whose use raises. Megatron Core
itself sees no TE (HAVE_TE False), as on any machine without it.
"""

from __future__ import annotations

import builtins
import copy
import importlib.abc
import importlib.machinery
import json
import os
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from entry_point import load_entry_point  # a sibling: the probes run by path

TE_UNGUARDED = {"megatron.bridge.peft.lora_layers", "megatron.bridge.models.gpt_full_te_layer_autocast_spec"}


class _AbsentTE:
    """Any attribute is another stand-in (class bodies annotate with te.ops.Sequential); calling one raises."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> _AbsentTE:
        if name.startswith("__"):
            raise AttributeError(name)
        return _AbsentTE(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self._name}: Transformer Engine is not installed in the CPU contract venv")


def _te_import(name: str, globals_: Any = None, locals_: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    if level == 0 and (name == "transformer_engine" or name.startswith("transformer_engine.")):
        return _AbsentTE("transformer_engine")
    return builtins.__import__(name, globals_, locals_, fromlist, level)


class _TELoader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        module.__dict__["__builtins__"] = {**vars(builtins), "__import__": _te_import}
        self.inner.exec_module(module)


class AbsentTEFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in TE_UNGUARDED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _TELoader(spec.loader)
        return spec


HOPPER = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0)


def answer_as_hopper() -> None:
    import torch

    torch.cuda.get_device_properties = lambda device=None: HOPPER


def _error(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def _model(model: Any) -> dict[str, Any]:
    return {
        "provider": type(model).__name__,
        "num_layers": model.num_layers,
        "hidden_size": model.hidden_size,
        "ffn_hidden_size": model.ffn_hidden_size,
        "num_attention_heads": model.num_attention_heads,
        "num_query_groups": model.num_query_groups,
        "vocab_size": model.vocab_size,
        "seq_length": model.seq_length,
        "normalization": model.normalization,
        "gated_linear_unit": model.gated_linear_unit,
        "position_embedding_type": model.position_embedding_type,
        "rotary_base": model.rotary_base,
        "layernorm_epsilon": model.layernorm_epsilon,
        "share_embeddings_and_output_weights": model.share_embeddings_and_output_weights,
        "init_method_std": model.init_method_std,
        "tensor": model.tensor_model_parallel_size,
        "pipeline": model.pipeline_model_parallel_size,
        "context": model.context_parallel_size,
        "expert": model.expert_model_parallel_size,
        "sequence_parallel": model.sequence_parallel,
        "kv_channels": model.kv_channels,
        "qk_layernorm": model.qk_layernorm,
        "num_moe_experts": model.num_moe_experts,
        "moe_router_topk": model.moe_router_topk,
        "moe_ffn_hidden_size": model.moe_ffn_hidden_size,
        "moe_shared_expert_intermediate_size": model.moe_shared_expert_intermediate_size,
        "moe_token_dispatcher_type": model.moe_token_dispatcher_type,
        "expert_tensor": model.expert_tensor_parallel_size,
    }


def _datasets(container: Any) -> dict[str, Any]:
    """Megatron Bridge's tokenizer and dataset builders on our .bin/.idx (what setup() does before training)."""
    from megatron.bridge.data.utils import get_dataset_provider
    from megatron.bridge.training.tokenizers.tokenizer import build_tokenizer

    tokenizer = build_tokenizer(container.tokenizer)
    train_samples = container.train.train_iters * container.train.global_batch_size
    eval_samples = container.validation.eval_iters * container.train.global_batch_size
    container.dataset.tokenizer = tokenizer  # as setup() does
    provider = get_dataset_provider(container.dataset)
    train, valid, _test = provider([train_samples, eval_samples, 0], container.dataset)
    sample = train[0]
    # A mixture is megatron-core's BlendedDataset: which dataset each of its first samples comes from.
    dataset_index = getattr(train, "dataset_index", None)
    return {
        "blend_first_datasets": dataset_index[:256].tolist() if dataset_index is not None else None,
        "tokenizer": type(tokenizer).__name__,
        "tokenizer_vocab": tokenizer.vocab_size,
        "eod": tokenizer.eod,
        "train_samples": len(train),
        "valid_samples": len(valid) if valid is not None else 0,
        "sample_tokens": int(sample["tokens"].numel()),
        "sample_max_token": int(sample["tokens"].max()),
    }


# The recipe's settings that need Transformer Engine (absent here, present in the container), turned off on the
# probe's copy only: Megatron Core refuses them without TE. Everything else is validated as the job renders it.
TE_ONLY_SETTINGS: dict[str, Any] = {
    "transformer_impl": "local",
    "apply_rope_fusion": False,
    "cross_entropy_loss_fusion": False,
    "gradient_accumulation_fusion": False,
    "moe_permute_fusion": False,  # the MoE recipes' token permutation kernel
}


def _vocabulary(container: Any) -> dict[str, Any]:
    """The vocabulary the job trains, as Megatron Bridge's setup() decides it (its tokenizer built from the job's
    tokenizer settings, then its own _validate_and_set_vocab_size), and the embedding and output layers Megatron
    Bridge's model provider then builds (on CPU, Megatron Core's local layer spec; TP, PP, CP and EP 1 only: one
    process)."""
    from megatron.bridge.models.gpt_provider import local_layer_spec
    from megatron.bridge.training.model_load_save import temporary_distributed_context
    from megatron.bridge.training.setup import _validate_and_set_vocab_size
    from megatron.bridge.training.tokenizers.tokenizer import build_tokenizer

    model = container.model
    tokenizer = build_tokenizer(container.tokenizer)
    model.vocab_size, model.should_pad_vocab = _validate_and_set_vocab_size(
        model_vocab_size=model.vocab_size,
        tokenizer_vocab_size=tokenizer.vocab_size,
        use_tokenizer_vocab_size=getattr(container.tokenizer, "use_tokenizer_vocab_size", False),
    )
    report: dict[str, Any] = {
        "use_tokenizer_vocab_size": getattr(container.tokenizer, "use_tokenizer_vocab_size", False),
        "tokenizer_vocab": tokenizer.vocab_size,
        "model_vocab": model.vocab_size,
        "should_pad_vocab": model.should_pad_vocab,
    }
    sizes = (model.tensor_model_parallel_size, model.pipeline_model_parallel_size, model.context_parallel_size)
    # Not an MoE model: Megatron Core's all-to-all dispatcher makes a CUDA stream when it is built.
    if sizes == (1, 1, 1) and model.expert_model_parallel_size == 1 and not model.num_moe_experts:
        model.transformer_layer_spec = local_layer_spec
        model.persist_layer_norm = False
        with temporary_distributed_context(backend="gloo"):
            model.finalize()
            built = model.provide_distributed_model(wrap_with_ddp=False, use_cpu_initialization=True)[0]
            built = getattr(built, "module", built)  # inside Megatron's Float16Module (bf16)
            report["embedding_rows"] = built.embedding.word_embeddings.weight.shape[0]
            output = built.output_layer.weight  # None with tied embeddings: the output layer reads the embedding
            report["output_rows"] = (output if output is not None else built.shared_embedding_or_output_weight()).shape[
                0
            ]
    return report


# The optimizer's TE-only setting (Qwen3 recipes: TE's FusedAdam keeps the optimizer state in lower precision).
TE_ONLY_OPTIMIZER_SETTINGS: dict[str, Any] = {"use_precision_aware_optimizer": False}


def without_te(container: Any) -> dict[str, Any]:
    changed = {}
    for name, value in TE_ONLY_SETTINGS.items():
        if getattr(container.model, name) != value:
            changed[name] = getattr(container.model, name)
            setattr(container.model, name, value)
    for name, value in TE_ONLY_OPTIMIZER_SETTINGS.items():
        if getattr(container.optimizer, name) != value:
            changed[f"optimizer.{name}"] = getattr(container.optimizer, name)
            setattr(container.optimizer, name, value)
    return changed


def probe(job: Any, world_size: int, config_path: str) -> dict[str, Any]:
    from megatron.bridge.training.config import runtime_config_update

    config = job.load_config(config_path)
    report: dict[str, Any] = {"config": config_path, "errors": {}}
    try:
        container = job.build_config(config)
    except Exception as error:  # reported to the test
        report["errors"]["build"] = _error(error)
        return report
    report["recipe_model"] = type(container.model).__name__
    checked = copy.deepcopy(container)
    report["te_only_settings_turned_off"] = without_te(checked)
    os.environ["WORLD_SIZE"] = str(world_size)
    try:
        runtime_config_update(checked)
    except Exception as error:  # reported, not raised
        report["errors"]["validate"] = _error(error)
        return report
    report["model"] = _model(checked.model)
    report["data_parallel_size"] = checked.data_parallel_size
    train, ckpt = checked.train, checked.checkpoint
    report["train"] = {
        "train_iters": train.train_iters,
        "global_batch_size": train.global_batch_size,
        "micro_batch_size": train.micro_batch_size,
        "exit_signal_handler": train.exit_signal_handler,
        "exit_signal": int(train.exit_signal),
        "exit_duration_in_mins": train.exit_duration_in_mins,
        "exit_interval": train.exit_interval,
    }
    report["checkpoint"] = {
        "save": ckpt.save,
        "load": ckpt.load,
        "save_interval": ckpt.save_interval,
        "most_recent_k": ckpt.most_recent_k,
        "ckpt_format": ckpt.ckpt_format,
    }
    report["optimizer"] = {"lr": checked.optimizer.lr, "min_lr": checked.optimizer.min_lr}
    report["scheduler"] = {
        "lr_warmup_iters": checked.scheduler.lr_warmup_iters,
        "lr_decay_iters": checked.scheduler.lr_decay_iters,
    }
    report["logger"] = {"tensorboard_dir": checked.logger.tensorboard_dir, "log_interval": checked.logger.log_interval}
    report["dataset"] = {"blend": checked.dataset.blend, "split": checked.dataset.split}
    report["checkpoint"]["async_save"] = ckpt.async_save
    # FP8 as Megatron Bridge resolved the rendered preset onto the model's TransformerConfig
    report["precision"] = {
        "fp8": checked.model.fp8,
        "fp8_recipe": getattr(checked.model, "fp8_recipe", None),
        "bf16": checked.model.bf16,
    }
    try:
        report["vocabulary"] = _vocabulary(copy.deepcopy(checked))
    except Exception as error:  # reported, not raised
        report["errors"]["vocabulary"] = _error(error)
    try:
        report["data"] = _datasets(checked)
    except Exception as error:  # reported, not raised
        report["errors"]["data"] = _error(error)
    return report


def refused_start(job: Any, config_path: str, world_size: int) -> dict[str, Any]:
    """The job started with a world size its layout does not divide: Megatron Bridge refuses it in validation."""
    os.environ["WORLD_SIZE"] = str(world_size)
    build = job.build_config

    def build_without_te(config: dict[str, Any]) -> Any:
        container = build(config)
        without_te(container)
        return container

    job.build_config = build_without_te  # _configure's own validation, minus the TE-only kernels
    code = job.run_job(config_path, job._configure)
    job.build_config = build
    status_file = job.load_config(config_path)["exit_status_file"]
    status = json.loads(Path(status_file).read_text()) if Path(status_file).exists() else None
    return {"exit": code, "status": status}


def main(argv: list[str]) -> int:
    sys.meta_path.insert(0, AbsentTEFinder())
    answer_as_hopper()
    world_size, *paths = argv
    job = load_entry_point("bridge_pretrain")
    reports = [probe(job, int(world_size), path) for path in paths]
    refused = refused_start(job, paths[0], int(world_size) + 1)
    print("BRIDGE-PROBE " + json.dumps({"reports": reports, "refused": refused}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
