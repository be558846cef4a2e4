"""--model as a path: real config.json files of several families (tests/planner/hf_configs, sources in
SOURCES.md there) read into the planner's shape, and checked against the model transformers builds from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.job import PlanError
from planner.job_config import read_job
from planner.model_source import args_from_config_json, dataset_vocab_size, is_job_yaml, read_config_json, resolve_model
from training.models.params import count_parameters
from training.models.registry import MODEL_CONFIGS

CONFIGS = Path(__file__).parent / "hf_configs"
DENSE = [
    "meta-llama--Meta-Llama-3.1-8B",
    "meta-llama--Meta-Llama-3.1-70B",
    "meta-llama--Meta-Llama-3.1-405B",
    "Qwen--Qwen3-1.7B",
    "Qwen--Qwen3-8B",
    "Qwen--Qwen3-32B",
    "Qwen--Qwen2.5-1.5B",
    "Qwen--Qwen2.5-72B",
]


def _config(name: str) -> dict[str, Any]:
    return json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8"))


def _transformers_parameter_count(config: dict[str, Any]) -> int:
    """Parameters of the model transformers builds from the config, on the meta device (no memory, no download).
    Tied weights are one parameter to torch, as to us."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    fields = {k: v for k, v in config.items() if k not in ("model_type", "architectures", "transformers_version")}
    hf_config = transformers.AutoConfig.for_model(config["model_type"], **fields)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", DENSE)
def test_parameter_count_is_the_one_transformers_builds(name: str) -> None:
    config = _config(name)
    ours = count_parameters(read_config_json(CONFIGS / f"{name}.json")).total
    assert ours == _transformers_parameter_count(config), name


def test_the_shape_is_read_field_by_field() -> None:
    args = read_config_json(CONFIGS / "meta-llama--Meta-Llama-3.1-405B.json")
    assert (args.dim, args.n_layers, args.n_heads, args.kv_heads, args.ffn_dim) == (16384, 126, 128, 8, 53248)
    assert (args.vocab_size, args.max_seq_len, args.tie_embeddings) == (128256, 131072, False)
    assert args.attention_head_dim is None and not args.qk_norm


def test_qwen3_keeps_its_head_size_apart_from_hidden_over_heads() -> None:
    """Qwen3-32B: 64 heads of 128 over a 5120 hidden size (not 80 each), per-head q/k norms."""
    args = read_config_json(CONFIGS / "Qwen--Qwen3-32B.json")
    assert (args.head_dim, args.attention_dim, args.qk_norm) == (128, 8192, True)
    assert read_config_json(CONFIGS / "Qwen--Qwen3-8B.json").attention_head_dim is None  # 4096 / 32 spelled out


def test_qwen2_has_biases_on_q_k_v_only() -> None:
    args = read_config_json(CONFIGS / "Qwen--Qwen2.5-72B.json")
    assert args.qkv_bias and not args.qk_norm and args.attention_head_dim is None


def test_llama3_8b_config_matches_the_registry_shape() -> None:
    ours = read_config_json(CONFIGS / "meta-llama--Meta-Llama-3.1-8B.json")
    assert count_parameters(ours).total == count_parameters(MODEL_CONFIGS["llama3-8b"]).total


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [("mistralai--Mixtral-8x7B-v0.1", 46.7, 12.9), ("Qwen--Qwen3-30B-A3B", 30.5, 3.3)],
)
def test_mixture_of_experts_counts_total_and_active_parameters(name: str, total: float, active: float) -> None:
    """The model cards' sizes (Mixtral 8x7B: 46.7 B total, 12.9 B active; Qwen3-30B-A3B: 30.5 B, 3.3 B)."""
    counts = count_parameters(read_config_json(CONFIGS / f"{name}.json"))
    assert round(counts.total / 1e9, 1) == total
    assert abs(counts.active / 1e9 - active) < 0.06  # Qwen's 3.3 B is 3.35 B rounded down


@pytest.mark.parametrize("name", ["mistralai--Mixtral-8x7B-v0.1", "Qwen--Qwen3-30B-A3B"])
def test_mixture_of_experts_total_is_the_one_transformers_builds(name: str) -> None:
    config = _config(name)
    assert count_parameters(read_config_json(CONFIGS / f"{name}.json")).total == _transformers_parameter_count(config)


def test_a_mixture_of_experts_reads_as_the_trainers_moe_shape() -> None:
    mixtral = read_config_json(CONFIGS / "mistralai--Mixtral-8x7B-v0.1.json")
    assert (mixtral.flavor, mixtral.n_experts, mixtral.experts_per_token, mixtral.expert_width) == (
        "mixtral",
        8,
        2,
        14336,
    )
    assert count_parameters(mixtral).total == count_parameters(MODEL_CONFIGS["mixtral-8x7b"]).total
    qwen = read_config_json(CONFIGS / "Qwen--Qwen3-30B-A3B.json")
    assert (qwen.flavor, qwen.n_experts, qwen.experts_per_token, qwen.expert_width, qwen.qk_norm) == (
        "qwen3",
        128,
        8,
        768,
        True,
    )


@pytest.mark.parametrize(
    ("change", "key", "value"),
    [
        ({"model_type": "deepseek_v3", "n_routed_experts": 256}, "n_routed_experts", 256),
        ({"model_type": "dbrx", "moe_num_experts": 16}, "moe_num_experts", 16),
    ],
)
def test_other_mixtures_of_experts_are_refused_naming_the_key(change: dict, key: str, value: int) -> None:
    config = {k: v for k, v in _config("mistralai--Mixtral-8x7B-v0.1").items() if k != "num_local_experts"}
    with pytest.raises(PlanError) as caught:
        args_from_config_json(config | change, "moe.json")
    message = str(caught.value)
    assert f"{key}: {value}" in message and "mixture of experts of a kind not modelled" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("name", "change", "key"),
    [
        ("mistralai--Mixtral-8x7B-v0.1", {"sliding_window": 4096}, "sliding_window"),
        ("Qwen--Qwen3-30B-A3B", {"mlp_only_layers": [0, 1]}, "mlp_only_layers"),
        ("Qwen--Qwen3-30B-A3B", {"decoder_sparse_step": 2}, "decoder_sparse_step"),
    ],
)
def test_moe_layouts_not_modelled_are_refused_naming_the_key(name: str, change: dict, key: str) -> None:
    with pytest.raises(PlanError, match=rf"{key}: .* is not modelled"):
        args_from_config_json(_config(name) | change, "moe.json")


def test_encoder_decoder_and_encoder_only_configs_are_refused() -> None:
    transformers = pytest.importorskip("transformers")
    t5 = transformers.T5Config().to_dict()
    with pytest.raises(PlanError, match="is_encoder_decoder: True is not a decoder-only model"):
        args_from_config_json(t5, "t5.json")
    bert = transformers.BertConfig().to_dict() | {"architectures": ["BertForMaskedLM"]}
    with pytest.raises(PlanError, match=r"architectures: \['BertForMaskedLM'\] is not a causal"):
        args_from_config_json(bert, "bert.json")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"attention_bias": True}, "attention_bias: True is not modelled"),
        ({"hidden_act": "gelu"}, "hidden_act: 'gelu' is not modelled"),
        ({"model_type": "gemma2"}, "model_type: 'gemma2' is not one of llama, mistral, qwen2, qwen3"),
        ({"use_sliding_window": True}, "use_sliding_window: True is not modelled"),
    ],
)
def test_what_would_make_the_plan_wrong_is_refused(change: dict[str, Any], expected: str) -> None:
    with pytest.raises(PlanError, match=expected):
        args_from_config_json(_config("Qwen--Qwen3-8B") | change, "x.json")


def test_a_missing_shape_key_is_named() -> None:
    config = _config("meta-llama--Meta-Llama-3.1-70B")
    del config["intermediate_size"]
    with pytest.raises(PlanError, match="intermediate_size: None is required"):
        args_from_config_json(config)


def test_resolve_takes_a_name_a_config_or_a_directory_and_a_job_yaml_goes_to_job_config(tmp_path: Path) -> None:
    assert resolve_model("llama3-8b", MODEL_CONFIGS) is MODEL_CONFIGS["llama3-8b"]
    path = CONFIGS / "Qwen--Qwen3-8B.json"
    (tmp_path / "config.json").write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert resolve_model(str(path), MODEL_CONFIGS) == resolve_model(str(tmp_path), MODEL_CONFIGS)
    job_yaml = Path(__file__).resolve().parents[2] / "training/configs/llama3-8b.yaml"
    assert is_job_yaml(str(job_yaml)) and not is_job_yaml(str(path))
    assert read_job(job_yaml)[1] == MODEL_CONFIGS["llama3-8b"]


def test_unknown_model_and_unreadable_yaml_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="'llama9' is neither a known model"):
        resolve_model("llama9", MODEL_CONFIGS)
    repo = Path(__file__).resolve().parents[2]
    with pytest.raises(PlanError, match=r"model\.vocab_size: 'data' needs a dataset"):
        read_job(repo / "training/configs/tiny.yaml")
    broken = tmp_path / "config.json"
    broken.write_text("{", encoding="utf-8")
    with pytest.raises(PlanError, match="is not JSON"):
        resolve_model(str(broken), MODEL_CONFIGS)


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"model_type": "llama", "name": "caf\u00e9"}, ensure_ascii=False).encode("latin-1"),
        json.dumps({"model_type": "llama"}).encode("utf-16"),
        bytes(range(256)),
    ],
    ids=["latin-1", "utf-16", "binary"],
)
def test_llm_plan_model_config_json_that_is_not_utf8_is_one_line_naming_the_file(
    tmp_path: Path, content: bytes
) -> None:
    from planner.plan import main
    from tests.bad_input_checks import assert_clear_refusal, run_main

    path = tmp_path / "config.json"
    path.write_bytes(content)
    argv = ["--model", str(path), "--instance", "p5.48xlarge", "--nodes", "1", "--seq", "8192", "--micro-batch", "1"]
    outcome = run_main(main, argv)
    assert_clear_refusal(outcome, str(path))
    assert "is not UTF-8 text" in outcome.stderr


def test_a_vocab_from_data_job_reads_the_datasets_manifest_as_llm_submit_does(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "d.manifest.json").write_text(json.dumps({"vocab_size": 4096}), encoding="utf-8")
    _, args = read_job(repo / "training/configs/tiny.yaml", data_vocab_size=dataset_vocab_size(str(tmp_path / "d")))
    assert args.vocab_size == 4096
    with pytest.raises(PlanError, match=r"^--data-prefix: '.*nope' has no readable manifest with a vocab_size"):
        dataset_vocab_size(str(tmp_path / "nope"))
