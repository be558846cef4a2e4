"""The memory-fit check llm-submit runs on every backend: the planner's model (planner.memory) for the job as written,
on the backend's stack and layout, with LoRA, and on the local CPU node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from launch.fit import check_fits
from launch.neuron import default_parallelism
from slurm.errors import SubmitError
from slurm.target import local_target, resolve_target
from spec import load_spec
from training.config import JobConfig, parse_job_config
from training.models.registry import get_model_args
from training.parallel.dims import ParallelDims

REPO = Path(__file__).resolve().parents[2]
TRN1 = resolve_target(load_spec("spec/examples/trn1-neuron.yaml"), "neuron", None, None)
P5 = resolve_target(load_spec(None), "fsdp", None, None)
P4D = resolve_target(load_spec("spec/examples/p4d-odcr.yaml"), "fsdp", None, None)
LLAMA2_70B = get_model_args("llama2-70b")


def _shipped(path: str, **data: Any) -> JobConfig:
    raw = yaml.safe_load((REPO / path).read_text())
    mode = data.pop("mode", None)
    finetune = data.pop("finetune", "as written")
    raw["data"].update(data)
    if mode is not None:
        raw["parallel"]["activation_checkpoint"]["mode"] = mode
    if finetune != "as written":
        raw["finetune"] = finetune
    return parse_job_config(raw)


def _gib(message: str) -> float:
    return float(message.split(" GiB per device")[0].split()[-1])


def test_llama2_70b_with_lora_fits_one_p5_node_where_full_training_does_not() -> None:
    lora = _shipped("training/configs/llama2-70b-lora.yaml")
    message = check_fits(lora, LLAMA2_70B, P5, 1, model_name="llama2-70b")
    assert message.startswith("fits: ") and 25 < _gib(message) < 40
    full = _shipped("training/configs/llama2-70b-lora.yaml", finetune=None)
    with pytest.raises(SubmitError) as refused:
        check_fits(full, LLAMA2_70B, P5, 1, model_name="llama2-70b")
    error = str(refused.value)
    assert error.startswith("--nodes: llama2-70b on 1 x p5.48xlarge does not fit: needs ") and "\n" not in error
    # 3 nodes fit by memory, but 32 sequences do not split over 24 ranks: 4 is the smallest count that runs it.
    assert error.endswith("; use at least 4 nodes")
    assert check_fits(full, LLAMA2_70B, P5, 4).startswith("fits: ")


def test_when_no_count_runs_the_written_batch_the_hint_says_what_batch_would() -> None:
    full = _shipped("training/configs/llama2-70b-lora.yaml", finetune=None)  # 32 sequences: at most 4 p4d nodes
    with pytest.raises(SubmitError) as refused:
        check_fits(full, LLAMA2_70B, P4D, 1)
    assert str(refused.value).endswith("; use at least 7 nodes (with data.global_batch_size a multiple of 56 there)")


def test_the_smallest_node_count_is_named_plainly_when_the_written_batch_splits_there() -> None:
    full = _shipped("training/configs/llama2-70b-lora.yaml", finetune=None, global_batch_size=64)
    with pytest.raises(SubmitError, match=r"on 2 x p4d\.24xlarge does not fit: .*; use at least 8 nodes$"):
        check_fits(full, LLAMA2_70B, P4D, 2, model_name="llama2-70b")
    assert check_fits(full, LLAMA2_70B, P4D, 8).startswith("fits: ")
    with pytest.raises(SubmitError, match=r"data\.global_batch_size: 64 must be a multiple of .* \(56 x 1 = 56\)"):
        check_fits(full, LLAMA2_70B, P4D, 7)  # 7 fit by memory, but 64 sequences do not split over 56 ranks


def test_activations_that_no_node_count_divides_get_no_node_hint() -> None:
    greedy = _shipped("training/configs/llama3-8b.yaml", micro_batch_size=16, mode="none", global_batch_size=512)
    with pytest.raises(SubmitError) as refused:
        check_fits(greedy, get_model_args("llama3-8b"), P5, 1, model_name="llama3-8b")
    error = str(refused.value)
    assert error.startswith("--nodes: llama3-8b on 1 x p5.48xlarge does not fit: needs ")
    assert "use at least" not in error and "activation checkpointing 'full'" in error


def test_target_modules_reach_the_fit_check() -> None:
    every = check_fits(_shipped("training/configs/llama2-70b-lora.yaml"), LLAMA2_70B, P5, 1)
    q_only = _shipped("training/configs/llama2-70b-lora.yaml", finetune={"mode": "lora", "init": "/m",
                      "lora": {"target_modules": ["q_proj"]}})  # fmt: skip
    assert _gib(check_fits(q_only, LLAMA2_70B, P5, 1)) < _gib(every)


@pytest.mark.parametrize("name", ["pythia-6.9b", "neox-20b"])
def test_trainium_blog_shapes_fit_on_four_trn1_nodes_with_their_tensor_parallel(name: str) -> None:
    job = _shipped(f"launch/jobs/configs/neuron-{name}.yaml")
    tp, pp = default_parallelism(name)
    assert check_fits(job, get_model_args(name), TRN1, 4, "neuron", ParallelDims(tp=tp, pp=pp)).startswith("fits: ")


def test_nemo_is_checked_with_its_layout() -> None:
    job = _shipped("training/configs/llama3-8b.yaml", global_batch_size=64)
    model = get_model_args("llama3-8b")
    one, two = (check_fits(job, model, P5, 2, "nemo", ParallelDims(tp=tp)) for tp in (1, 2))
    assert _gib(two) < _gib(one)  # ZeRO-1 keeps bf16 weights whole per TP rank: TP 2 halves them


def test_a_layout_the_planner_refuses_is_named_by_its_flag() -> None:
    job = _shipped("training/configs/llama3-8b.yaml", global_batch_size=64)
    with pytest.raises(SubmitError) as refused:
        check_fits(job, get_model_args("llama3-8b"), P5, 1, "nemo", ParallelDims(tp=3), "llama3-8b")
    assert str(refused.value) == (
        "--model: llama3-8b on 1 x p5.48xlarge: --tensor-parallel: 3 must divide the 8 devices of a node"
    )


def test_the_local_cpu_node_is_planned_as_one_device_with_the_nodes_memory() -> None:
    tiny = _shipped("training/configs/tiny.yaml")
    message = check_fits(tiny, get_model_args("tiny"), local_target(), 2)
    assert message.startswith("fits: ") and "local-cpu has 4.0 GiB per device" in message
    with pytest.raises(SubmitError, match=r"^--nodes: llama3-8b on 2 x local-cpu does not fit: needs "):
        check_fits(tiny, get_model_args("llama3-8b"), local_target(), 2, model_name="llama3-8b")
