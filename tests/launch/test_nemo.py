"""The NeMo 2 recipe override rendered from our job config."""

from __future__ import annotations

from pathlib import Path

import pytest

from launch.nemo import NEMO_RECIPE, nemo_config, validation_split
from slurm.errors import SubmitError
from slurm.target import resolve_target
from spec import load_spec
from training.config import parse_job_config
from training.models.registry import get_model_args
from training.parallel.dims import ParallelDims

P5 = resolve_target(load_spec(None), "nemo", None, None)


def _job(**optim: float):
    return parse_job_config(
        {
            "model": {"name": "llama3-8b"},
            "data": {
                "prefix": "/fsx/data/c_text_document",
                "seq_len": 8192,
                "micro_batch_size": 1,
                "global_batch_size": 128,
            },
            "train": {"max_steps": 1000, "grad_clip": 1.0, "eval_every": 100},
            "optim": {"lr": 3e-4, "min_lr_ratio": 0.1, "warmup_steps": 50, **optim},
            "checkpoint": {"every": 200, "keep_last": 3},
        }
    )


def test_shape_schedule_and_batch_carry_over() -> None:
    model = get_model_args("llama3-8b")
    config = nemo_config(_job(), model, P5, 2, Path("/fsx/runs/l8"), "/fsx/runs/l8/tokenizer", ParallelDims(tp=2))
    o = config["overrides"]
    assert config["recipe"] == NEMO_RECIPE and config["num_nodes"] == 2 and config["gpus_per_node"] == 8
    assert (o["model.config.num_layers"], o["model.config.hidden_size"], o["model.config.ffn_hidden_size"]) == (
        32,
        4096,
        14336,
    )
    assert (o["model.config.num_attention_heads"], o["model.config.num_query_groups"]) == (32, 8)
    assert o["model.config.seq_length"] == 8192 and o["model.config.rotary_base"] == 500000.0
    assert o["optim.config.lr"] == 3e-4 and o["optim.config.min_lr"] == pytest.approx(3e-5)
    assert o["optim.lr_scheduler.warmup_steps"] == 50 and o["optim.lr_scheduler.max_steps"] == 1000
    assert o["trainer.max_steps"] == 1000 and o["trainer.val_check_interval"] == 100
    assert o["trainer.strategy.tensor_model_parallel_size"] == 2
    # Every parallel size is ours: the recipe's context parallelism 2 would halve data parallelism unseen.
    assert (o["trainer.strategy.context_parallel_size"], o["trainer.strategy.expert_model_parallel_size"]) == (1, 1)
    assert o["trainer.strategy.sequence_parallel"] is True  # with TP 2
    # One checkpoint trigger: Lightning's ModelCheckpoint refuses steps and the recipe's time interval together.
    assert o["log.ckpt.every_n_train_steps"] == 200 and o["log.ckpt.train_time_interval"] is None
    assert config["exit_status_file"] == "/fsx/runs/l8/exit_status.json"
    assert config["data"]["paths"] == ["/fsx/data/c_text_document"]
    assert (config["data"]["global_batch_size"], config["data"]["micro_batch_size"]) == (128, 1)
    assert config["data"]["split"] == "990,10,0"


def test_neox_has_no_nemo_recipe() -> None:
    with pytest.raises(SubmitError, match="model flavor 'neox' has no NeMo 2 recipe"):
        nemo_config(_job(), get_model_args("pythia-6.9b"), P5, 1, Path("/r"), "/t")


def test_tensor_parallel_must_divide_the_heads() -> None:
    with pytest.raises(SubmitError, match=r"^--tensor-parallel: 16 does not divide model.n_heads \(8\)$"):
        nemo_config(
            _job(), get_model_args("llama3-8b").replace(n_heads=8), P5, 2, Path("/r"), "/t", ParallelDims(tp=16)
        )


def test_context_parallelism_counts_in_the_data_parallel_size() -> None:
    # 16 GPUs / (TP 2 x CP 4) = DP 2; micro batch 1 x DP 2 divides 128, so this fits; CP 8 with TP 4 does not divide.
    config = nemo_config(_job(), get_model_args("llama3-8b"), P5, 2, Path("/r"), "/t", ParallelDims(tp=2, cp=4))
    assert config["overrides"]["trainer.strategy.context_parallel_size"] == 4
    with pytest.raises(SubmitError, match=r"^--tensor-parallel x --pipeline-parallel x --context-parallel: 4 x 1 x 8"):
        nemo_config(_job(), get_model_args("llama3-8b"), P5, 2, Path("/r"), "/t", ParallelDims(tp=4, cp=8))


def test_tensor_parallel_must_divide_the_key_value_heads() -> None:
    with pytest.raises(SubmitError, match=r"^--tensor-parallel: 16 does not divide the key/value heads \(8\)$"):
        nemo_config(_job(), get_model_args("llama3-8b"), P5, 2, Path("/r"), "/t", ParallelDims(tp=16))


@pytest.mark.parametrize(("fraction", "split"), [(0.0, "1000,0,0"), (0.05, "950,50,0")])
def test_validation_split(fraction: float, split: str) -> None:
    assert validation_split(fraction) == split


@pytest.mark.parametrize("name", ["qwen3-8b", "mixtral-8x7b"])
def test_the_qwen3_and_mixtral_families_have_no_nemo_recipe_yet(name: str) -> None:
    with pytest.raises(SubmitError, match=r"model flavor '\w+' has no NeMo 2 recipe .*; train it with --backend fsdp$"):
        nemo_config(_job(), get_model_args(name), P5, 1, Path("/r"), "/t")
