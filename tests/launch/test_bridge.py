"""The Megatron Bridge config and Hugging Face model config rendered from our job config (launch/bridge.py).
What Megatron Bridge makes of them: tests/launch/test_bridge_contract.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from launch.bridge import BRIDGE_RECIPE, bridge_config, bridge_hf_config, hf_config_path
from slurm.errors import SubmitError
from slurm.target import resolve_target
from spec import load_spec
from tests.launch.test_nemo import _job
from training.models.registry import get_model_args
from training.parallel.dims import ParallelDims

P5 = resolve_target(load_spec(None), "nemo", None, None)
RUN = Path("/fsx/runs/l8")


def test_schedule_checkpoints_and_stop_carry_over() -> None:
    config = bridge_config(_job(), get_model_args("llama3-8b"), P5, 2, RUN, f"{RUN}/tokenizer", ParallelDims(tp=2))
    o = config["overrides"]
    assert (config["recipe"], config["framework"]) == (BRIDGE_RECIPE, "megatron-bridge-26.08")
    assert (o["train.train_iters"], o["train.global_batch_size"], o["validation.eval_interval"]) == (1000, 128, 100)
    assert (o["optimizer.lr"], o["optimizer.min_lr"], o["optimizer.clip_grad"]) == (3e-4, pytest.approx(3e-5), 1.0)
    assert (o["scheduler.lr_warmup_iters"], o["scheduler.lr_decay_iters"]) == (50, 1000)
    assert (o["checkpoint.save_interval"], o["checkpoint.most_recent_k"]) == (200, 3)
    assert (o["model.tensor_model_parallel_size"], o["model.sequence_parallel"]) == (2, True)
    assert o["train.exit_signal_handler"] is True
    assert config["data"]["paths"] == ["/fsx/data/c_text_document"]
    assert hf_config_path(config) == RUN / "hf" / "meta-llama" / "Meta-Llama-3-8B" / "config.json"


def test_the_hf_config_is_our_shape() -> None:
    model = get_model_args("llama3-8b")
    hf = bridge_hf_config(model)
    assert (hf["hidden_size"], hf["intermediate_size"], hf["num_hidden_layers"]) == (4096, 14336, 32)
    assert (hf["num_attention_heads"], hf["num_key_value_heads"], hf["vocab_size"]) == (32, 8, 128256)
    assert hf["rope_parameters"] == {"rope_type": "default", "rope_theta": 500000.0}
    assert hf["tie_word_embeddings"] is False and hf["max_position_embeddings"] >= 8192


def test_llama3_rope_scaling_is_carried_as_transformers_5_writes_it() -> None:
    model = dataclasses.replace(get_model_args("llama3-8b"), rope_type="llama3", rope_factor=32.0)
    rope = bridge_hf_config(model)["rope_parameters"]
    assert (rope["rope_type"], rope["factor"], rope["original_max_position_embeddings"]) == ("llama3", 32.0, 8192)


def test_neox_has_no_megatron_bridge_recipe() -> None:
    with pytest.raises(SubmitError, match="--backend nemo: model flavor 'neox' has no Megatron Bridge recipe"):
        bridge_config(_job(), get_model_args("pythia-6.9b"), P5, 2, RUN, f"{RUN}/tokenizer")


@pytest.mark.parametrize(
    ("name", "module", "recipe", "model_id"),
    [
        ("llama3-8b", "megatron.bridge.recipes.llama", "llama3_8b_pretrain_config", "meta-llama/Meta-Llama-3-8B"),
        ("qwen3-8b", "megatron.bridge.recipes.qwen", "qwen3_8b_pretrain_config", "Qwen/Qwen3-8B"),
        (
            "qwen3-30b-a3b",
            "megatron.bridge.recipes.qwen.h100.qwen3_moe",
            "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config",
            "Qwen/Qwen3-30B-A3B",
        ),
    ],
)
def test_the_recipe_is_the_one_of_the_models_family_and_shape(
    name: str, module: str, recipe: str, model_id: str
) -> None:
    config = bridge_config(_job(), get_model_args(name), P5, 2, RUN, f"{RUN}/tokenizer")
    assert (config["recipe_module"], config["recipe"], config["hf_model_id"]) == (module, recipe, model_id)
    assert hf_config_path(config) == RUN / "hf" / model_id / "config.json"


def test_expert_parallel_reaches_megatron_bridge_for_a_moe_model() -> None:
    config = bridge_config(_job(), get_model_args("qwen3-30b-a3b"), P5, 2, RUN, f"{RUN}/tokenizer", ParallelDims(ep=8))
    o = config["overrides"]
    assert (o["model.expert_model_parallel_size"], o["model.expert_tensor_parallel_size"]) == (8, 1)
    assert o["model.moe_token_dispatcher_type"] == "alltoall"
    assert (
        "model.moe_token_dispatcher_type"
        not in bridge_config(_job(), get_model_args("qwen3-8b"), P5, 2, RUN, f"{RUN}/tokenizer")["overrides"]
    )


@pytest.mark.parametrize(
    ("name", "layout", "message"),
    [
        ("qwen3-8b", ParallelDims(ep=2), "--expert-parallel: 2 needs a mixture-of-experts model; qwen3 has no experts"),
        ("qwen3-30b-a3b", ParallelDims(ep=3), r"--expert-parallel: 3 does not divide model.n_experts \(128\)"),
        (
            "qwen3-30b-a3b",
            ParallelDims(ep=32),
            "--pipeline-parallel x --expert-parallel: 1 x 32 does not divide 16 workers",
        ),
        ("mixtral-8x7b", ParallelDims(), "'mixtral' has no Megatron Bridge recipe .Megatron Bridge 0.6 has no Mixtral"),
    ],
)
def test_what_megatron_bridge_cannot_run_is_refused_in_one_line(name: str, layout: ParallelDims, message: str) -> None:
    with pytest.raises(SubmitError, match=message):
        bridge_config(_job(), get_model_args(name), P5, 2, RUN, f"{RUN}/tokenizer", layout)


def test_the_hf_config_carries_the_familys_head_size() -> None:
    # Qwen3's heads are wider than dim / n_heads (Qwen3-0.6B: 16 heads of 128 in a 1024-wide model).
    assert bridge_hf_config(get_model_args("qwen3-0.6b"))["head_dim"] == 128
    assert bridge_hf_config(get_model_args("qwen3-tiny"))["head_dim"] == 32
