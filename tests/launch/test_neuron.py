"""The NxDT (NeMo-style) YAML for Trainium, with the parallelism of AWS's Trainium NeoX/Pythia blog for Pythia 6.9B and GPT-NeoX 20B."""

from __future__ import annotations

from pathlib import Path

import pytest

from launch.neuron import default_parallelism, nxdt_config
from slurm.errors import SubmitError
from slurm.target import resolve_target
from spec import load_spec
from training.config import load_job_config
from training.models.registry import get_model_args

TRN1 = resolve_target(load_spec("spec/examples/trn1-neuron.yaml"), "neuron", None, None)
CONFIGS = Path(__file__).resolve().parents[2] / "launch" / "jobs" / "configs"


def _render(name: str, nodes: int = 4) -> dict:
    job = load_job_config(CONFIGS / f"neuron-{name}.yaml").with_overrides(
        **{"data.prefix": "/fsx/data/wiki_text_document"}
    )
    tp, pp = default_parallelism(job.model.name)
    return nxdt_config(job, get_model_args(name), TRN1, nodes, Path(f"/fsx/runs/{name}"), "/fsx/tok", tp, pp)


def test_pythia_6_9b_is_tp8_on_32_workers_per_node() -> None:
    config = _render("pythia-6.9b")
    assert config["distributed_strategy"]["tensor_model_parallel_size"] == 8
    assert config["distributed_strategy"]["pipeline_model_parallel_size"] == 1
    assert (config["trainer"]["devices"], config["trainer"]["num_nodes"]) == (32, 4)
    model = config["model"]
    assert (model["num_layers"], model["hidden_size"], model["num_attention_heads"]) == (32, 4096, 32)
    assert model["rotary_percentage"] == 0.25 and model["transformer_block_type"] == "gpt_j"
    assert model["encoder_seq_length"] == 2048 and config["data"]["global_batch_size"] == 256
    assert config["data"]["data_prefix"] == [1.0, "/fsx/data/wiki_text_document"]
    assert config["compiler_cache_url"] == "/fsx/neuron-cache"


def test_neox_20b_is_tp8_pp4() -> None:
    config = _render("neox-20b")
    strategy = config["distributed_strategy"]
    assert (strategy["tensor_model_parallel_size"], strategy["pipeline_model_parallel_size"]) == (8, 4)
    assert config["model"]["num_layers"] == 44 and config["model"]["hidden_size"] == 6144
    assert config["exp_manager"]["checkpoint_callback_params"]["model_parallel_size"] == 32
    assert config["exp_manager"]["resume_if_exists"] is True


def test_llama_shapes_map_to_the_megatron_llama_block() -> None:
    job = load_job_config(CONFIGS / "neuron-pythia-6.9b.yaml").with_overrides(**{"model.name": "llama2-7b"})
    config = nxdt_config(job, get_model_args("llama2-7b"), TRN1, 1, Path("/r"), "/t", 8, 1)
    model = config["model"]
    assert (model["normalization"], model["activation"], model["has_bias"]) == ("rmsnorm", "swiglu", False)


def test_the_batch_must_split_over_the_data_parallel_ranks() -> None:
    job = load_job_config(CONFIGS / "neuron-pythia-6.9b.yaml").with_overrides(**{"data.global_batch_size": 100})
    with pytest.raises(
        SubmitError,
        match=r"data.global_batch_size: 100 is not a multiple of micro_batch_size x data-parallel size \(1 x 16\)",
    ):
        nxdt_config(job, get_model_args("pythia-6.9b"), TRN1, 4, Path("/r"), "/t", 8, 1)


def test_pipeline_stages_must_divide_the_layers() -> None:
    job = load_job_config(CONFIGS / "neuron-neox-20b.yaml")
    with pytest.raises(SubmitError, match=r"--pipeline-parallel: 8 does not divide model.n_layers \(44\)"):
        nxdt_config(job, get_model_args("neox-20b"), TRN1, 4, Path("/r"), "/t", 4, 8)


@pytest.mark.parametrize("name", ["qwen3-moe-tiny", "mixtral-tiny"])
def test_families_nxdt_cannot_build_are_refused_in_one_line(name: str) -> None:
    job = load_job_config(CONFIGS / "neuron-pythia-6.9b.yaml")
    with pytest.raises(
        SubmitError,
        match=r"^--backend neuron: model flavor '\w+' has no NxDT model \(.*\); train it with --backend fsdp$",
    ):
        nxdt_config(job, get_model_args(name), TRN1, 1, Path("/r"), "/t", 1, 1)
