"""The rendered Megatron Bridge job against Megatron Bridge's own code (0.6.0, NeMo Framework 26.08's, in .bridge-venv).

The job's config is rendered by `launch.submit --backend nemo` with the default spec (cluster.containers.
nemo_framework: megatron-bridge-26.08) as on the head node; tests/launch/contracts/bridge_probe.py then builds the
ConfigContainer with bridge_pretrain.build_config (what the container runs: Megatron Bridge's llama3_8b recipe
function, its model provider made by Megatron Bridge's Llama bridge from our rendered Hugging Face config), runs
runtime_config_update (pretrain()'s own first step, ConfigContainer.validate() included) at the job's world size, and
builds the tokenizer and the datasets from our .bin/.idx with Megatron Bridge's builders.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from launch import submit
from launch.bridge import RECIPE_HF_MODEL_ID
from tests.launch.conftest import write_job, write_mixture_job
from tests.launch.test_nemo_contract import LLAMA_JOB
from tests.training.jobs import prepare_second_source
from training.data.blend import BlendIndex
from training.signals import EXIT_CONFIG_ERROR

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "tests" / "launch" / "contracts" / "bridge_probe.py"
NODES, GPUS = 2, 8  # the default spec's first GPU queue: p5.48xlarge


def _declared(vocab_size: int, **checkpoint: Any) -> dict[str, dict[str, Any]]:
    """LLAMA_JOB with a vocabulary of its own (the demo tokenizer has 512 tokens)."""
    return {
        **LLAMA_JOB,
        "model": {**LLAMA_JOB["model"], "vocab_size": vocab_size},
        "checkpoint": {**LLAMA_JOB["checkpoint"], **checkpoint},
    }


DECLARED_1024 = _declared(1024, async_save=True)
B200_SPEC = REPO / "spec" / "examples" / "p6-b200-capacity-block.yaml"


# The qwen3 family's tiny shapes (training/models/qwen3/configs.py) on the job's schedule: Bridge's Qwen3 recipes.
QWEN3_JOB = {**LLAMA_JOB, "model": {"name": "qwen3-tiny", "vocab_size": "data"}}
QWEN3_MOE_JOB = {**LLAMA_JOB, "model": {"name": "qwen3-moe-tiny", "vocab_size": "data"}}


def fp8_job(recipe: str) -> dict[str, dict[str, Any]]:
    return {**LLAMA_JOB, "float8": {"recipe": recipe}}


def _render(
    tmp_path: Path,
    demo_data: str,
    name: str,
    *extra: str,
    job: dict[str, dict[str, Any]] = LLAMA_JOB,
    mixture: list[tuple[float, str]] | None = None,
) -> Path:
    if mixture is None:
        config = write_job(tmp_path / f"{name}.yaml", **job)
        data = ["--data-prefix", demo_data]
    else:  # the job YAML lists the datasets; no --data-prefix
        config = write_mixture_job(tmp_path / f"{name}.yaml", mixture, **job)
        data = []
    run_dir = tmp_path / name
    argv = ["--backend", "nemo", "--model", str(config), "--nodes", str(NODES), *data,
            "--run-dir", str(run_dir), *extra]  # fmt: skip
    submit.write(submit.render(submit.parse_options(argv), "python -m launch.submit " + " ".join(argv)))
    return run_dir / "bridge-config.yaml"


@pytest.fixture(scope="module")
def probe(bridge_python: Path, demo_data: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One probe run (Megatron Bridge's imports take most of a minute) over every rendered layout."""
    tmp_path = tmp_path_factory.mktemp("bridge-contract")
    second_source = prepare_second_source(demo_data)
    configs = {
        "default": _render(tmp_path, demo_data, "default"),
        "tp2-cp2": _render(tmp_path, demo_data, "tp2-cp2", "--tensor-parallel", "2", "--context-parallel", "2"),
        "pp2": _render(tmp_path, demo_data, "pp2", "--pipeline-parallel", "2"),
        "declared-1024": _render(tmp_path, demo_data, "declared-1024", job=DECLARED_1024),
        "declared-1000-tp2": _render(
            tmp_path, demo_data, "declared-1000-tp2", "--tensor-parallel", "2", job=_declared(1000)
        ),
        "fp8-tensorwise": _render(tmp_path, demo_data, "fp8-tensorwise", job=fp8_job("tensorwise")),
        "mxfp8-b200": _render(tmp_path, demo_data, "mxfp8-b200", "--spec", str(B200_SPEC), job=fp8_job("mxfp8")),
        "mixture": _render(tmp_path, demo_data, "mixture", mixture=[(0.75, demo_data), (0.25, second_source)]),
        "qwen3": _render(tmp_path, demo_data, "qwen3", job=QWEN3_JOB),
        "qwen3-moe-ep2": _render(tmp_path, demo_data, "qwen3-moe-ep2", "--expert-parallel", "2", job=QWEN3_MOE_JOB),
    }
    result = subprocess.run(
        [str(bridge_python), str(PROBE), str(NODES * GPUS), *map(str, configs.values())],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=tmp_path,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("BRIDGE-PROBE ")]
    assert result.returncode == 0 and lines, result.stderr[-4000:]
    answer = json.loads(lines[-1].removeprefix("BRIDGE-PROBE "))
    return {"reports": dict(zip(configs, answer["reports"], strict=True)), "refused": answer["refused"]}


def test_megatron_bridge_builds_and_validates_every_rendered_layout(probe: dict[str, Any]) -> None:
    for name, report in probe["reports"].items():
        assert report["errors"] == {}, name
        # Only the recipe's Transformer Engine kernels are switched off for this CPU venv (bridge_probe.py).
        assert set(report["te_only_settings_turned_off"]) <= {
            "transformer_impl",
            "apply_rope_fusion",
            "cross_entropy_loss_fusion",
            "gradient_accumulation_fusion",
            "moe_permute_fusion",
            "optimizer.use_precision_aware_optimizer",
        }, name


def test_the_model_is_our_llama_shape_made_by_megatron_bridges_llama_bridge(probe: dict[str, Any]) -> None:
    model = probe["reports"]["default"]["model"]
    assert model["provider"] == "GPTModelProvider"
    assert {k: model[k] for k in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads")} == {
        "num_layers": 4,
        "hidden_size": 128,
        "ffn_hidden_size": 384,
        "num_attention_heads": 8,
    }
    assert (model["num_query_groups"], model["vocab_size"], model["seq_length"]) == (4, 512, 256)
    # What makes it Llama: Megatron Bridge's mapping of LlamaForCausalLM, not ours.
    assert (model["normalization"], model["gated_linear_unit"], model["position_embedding_type"]) == (
        "RMSNorm",
        True,
        "rope",
    )


@pytest.mark.parametrize(
    ("name", "sizes", "data_parallel"),
    [
        ("default", (1, 1, 1, 1, False), 16),
        ("tp2-cp2", (2, 1, 2, 1, True), 4),
        ("pp2", (1, 2, 1, 1, False), 8),
    ],
)
def test_the_parallel_layout_is_exactly_the_rendered_one(
    probe: dict[str, Any], name: str, sizes: tuple[int, int, int, int, bool], data_parallel: int
) -> None:
    # llama3_8b's recipe defaults context parallelism to 2; the job must set every size itself.
    model = probe["reports"][name]["model"]
    assert (model["tensor"], model["pipeline"], model["context"], model["expert"], model["sequence_parallel"]) == sizes
    assert probe["reports"][name]["data_parallel_size"] == data_parallel


def test_the_time_limit_signal_reaches_megatron_bridges_checkpointing_stop(probe: dict[str, Any]) -> None:
    train = probe["reports"]["default"]["train"]
    assert (train["exit_signal_handler"], train["exit_signal"]) == (True, 10)  # SIGUSR1, what the batch script sends
    # No other exit condition: an exit before train_iters is the signal's (bridge_pretrain.stop_of).
    assert (train["exit_duration_in_mins"], train["exit_interval"]) == (None, None)
    assert (train["train_iters"], train["global_batch_size"], train["micro_batch_size"]) == (100, 16, 1)


def test_checkpoints_are_saved_and_resumed_from_the_run_directory(probe: dict[str, Any]) -> None:
    report = probe["reports"]["default"]
    run_dir = Path(report["config"]).parent
    assert report["checkpoint"] == {
        "save": str(run_dir / "checkpoints"),
        "load": str(run_dir / "checkpoints"),
        "save_interval": 20,
        "most_recent_k": 3,
        "ckpt_format": "torch_dist",
        "async_save": False,
    }
    assert report["logger"] == {"tensorboard_dir": str(run_dir / "tensorboard"), "log_interval": 1}


def test_megatron_bridges_dataset_builder_reads_our_bin_idx_and_tokenizer(
    probe: dict[str, Any], demo_data: str
) -> None:
    report = probe["reports"]["default"]
    assert report["dataset"] == {"blend": [[str(Path(demo_data).resolve())], None], "split": "950,50,0"}
    data = report["data"]
    assert data["tokenizer_vocab"] == 512
    # GPTDataset samples of seq_len tokens (labels are the shifted copy), token ids inside the vocabulary.
    assert data["sample_tokens"] == 256 and 0 <= data["sample_max_token"] < 512
    assert data["train_samples"] >= 100 * 16 and data["valid_samples"] > 0


def test_megatron_bridge_blends_a_mixture_sample_for_sample_as_our_loader(
    probe: dict[str, Any], demo_data: str
) -> None:
    report = probe["reports"]["mixture"]
    second = Path(demo_data).parent / "second_text_document"
    paths = [str(Path(demo_data).resolve()), str(second.resolve())]
    assert report["dataset"]["blend"] == [paths, [0.75, 0.25]]
    assert "data" not in report["errors"], report["errors"]
    # megatron-core's BlendedDataset, built by Megatron Bridge's own provider, picks each sample's dataset as
    # training.data.blend does: the FSDP and Megatron backends draw the same shares in the same order.
    ours, _ = BlendIndex([0.75, 0.25]).lookup(np.arange(256))
    assert report["data"]["blend_first_datasets"] == ours.tolist()
    assert probe["reports"]["default"]["data"]["blend_first_datasets"] is None


def test_a_layout_megatron_bridge_refuses_is_a_config_error_not_a_requeue(probe: dict[str, Any]) -> None:
    # Started at a world size of 17 the data-parallel size does not divide the batch: ConfigContainer.validate()
    # refuses before any GPU work, and the job's verdict is a configuration error, never requeued.
    refused = probe["refused"]
    assert refused["exit"] == EXIT_CONFIG_ERROR
    assert refused["status"]["exit_code"] == EXIT_CONFIG_ERROR
    assert refused["status"]["reason"].startswith("configuration error: AssertionError: eval_global_batch_size (16)")


def _hf_vocab(report: dict[str, Any]) -> int:
    hf = Path(report["config"]).parent / "hf" / RECIPE_HF_MODEL_ID / "config.json"
    vocab: int = json.loads(hf.read_text())["vocab_size"]
    return vocab


@pytest.mark.parametrize("name", ["default", "declared-1024", "declared-1000-tp2"])
def test_megatron_bridge_trains_the_declared_vocabulary_not_the_tokenizers(probe: dict[str, Any], name: str) -> None:
    # The recipe's use_tokenizer_vocab_size would size the embedding from the 512-token demo tokenizer; the job
    # turns it off, so setup() keeps the model's vocabulary (the rendered HF config's) and pads nothing, at any TP.
    report = probe["reports"][name]
    assert report["errors"] == {}, name
    vocabulary, declared = report["vocabulary"], _hf_vocab(report)
    assert declared == {"default": 512, "declared-1024": 1024, "declared-1000-tp2": 1000}[name]
    assert (vocabulary["use_tokenizer_vocab_size"], vocabulary["tokenizer_vocab"]) == (False, 512)
    assert (vocabulary["model_vocab"], vocabulary["should_pad_vocab"]) == (declared, False)
    if name != "declared-1000-tp2":  # built in one process: TP 1 only
        assert (vocabulary["embedding_rows"], vocabulary["output_rows"]) == (declared, declared)


def test_the_job_configs_async_save_reaches_megatron_bridge(probe: dict[str, Any]) -> None:
    assert probe["reports"]["declared-1024"]["checkpoint"]["async_save"] is True
    assert probe["reports"]["default"]["checkpoint"]["async_save"] is False


@pytest.mark.parametrize(
    ("name", "fp8_format", "fp8_recipe"),
    [("default", None, None), ("fp8-tensorwise", "hybrid", "tensorwise"), ("mxfp8-b200", "e4m3", "mxfp8")],
)
def test_the_job_configs_float8_recipe_is_megatron_bridges_fp8(
    probe: dict[str, Any], name: str, fp8_format: str | None, fp8_recipe: str | None
) -> None:
    """float8.recipe renders Bridge's mixed-precision preset (launch/bridge.py), which Bridge resolves onto the
    model's TransformerConfig: FP8 GEMMs (hybrid: e4m3 forward, e5m2 gradients; MXFP8 e4m3 throughout) with that
    scaling, bf16 elsewhere."""
    report = probe["reports"][name]
    assert not report["errors"], report["errors"]
    precision = report["precision"]
    assert precision["bf16"] is True
    if fp8_recipe is None:
        assert not precision["fp8"]
    else:
        assert (precision["fp8"], precision["fp8_recipe"]) == (fp8_format, fp8_recipe)


def _shape(report: dict[str, Any]) -> dict[str, Any]:
    keys = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
            "qk_layernorm", "num_moe_experts", "moe_router_topk", "moe_ffn_hidden_size",
            "moe_shared_expert_intermediate_size")  # fmt: skip
    return {key: report["model"][key] for key in keys}


def test_a_qwen3_model_is_our_shape_made_by_megatron_bridges_qwen3_recipe(probe: dict[str, Any]) -> None:
    # Built by Bridge's qwen3_8b recipe from our config.json under the id it asks for (Qwen/Qwen3-8B): per-head
    # q/k norms, heads of 32 in a 64-wide model (Qwen3's head size is its own), no experts.
    report = probe["reports"]["qwen3"]
    shape = _shape(report)
    assert {k: shape[k] for k in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads")} == {
        "num_layers": 2,
        "hidden_size": 64,
        "ffn_hidden_size": 192,
        "num_attention_heads": 4,
    }
    assert (shape["num_query_groups"], shape["kv_channels"], shape["qk_layernorm"]) == (2, 32, True)
    assert shape["num_moe_experts"] is None
    assert report["model"]["share_embeddings_and_output_weights"] is True  # qwen3-tiny ties them
    assert (Path(report["config"]).parent / "hf" / "Qwen" / "Qwen3-8B" / "config.json").is_file()


def test_a_qwen3_moe_model_has_our_experts_split_by_the_jobs_expert_parallel(probe: dict[str, Any]) -> None:
    # Bridge's Qwen3-30B-A3B recipe on our qwen3-moe-tiny: 4 routed experts of width 32, top 2, no shared expert,
    # split over --expert-parallel 2 by Megatron Core's all-to-all dispatcher; data parallel stays 16.
    report = probe["reports"]["qwen3-moe-ep2"]
    assert report["errors"] == {}
    shape = _shape(report)
    assert (shape["num_layers"], shape["hidden_size"], shape["kv_channels"], shape["qk_layernorm"]) == (2, 64, 32, True)
    assert (shape["num_moe_experts"], shape["moe_router_topk"], shape["moe_ffn_hidden_size"]) == (4, 2, 32)
    assert shape["moe_shared_expert_intermediate_size"] is None
    model = report["model"]
    assert (model["expert"], model["expert_tensor"], model["moe_token_dispatcher_type"]) == (2, 1, "alltoall")
    assert report["data_parallel_size"] == 16
    assert (Path(report["config"]).parent / "hf" / "Qwen" / "Qwen3-30B-A3B" / "config.json").is_file()
