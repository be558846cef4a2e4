"""The rendered NxDT config against the record of what NxDT's code reads (launch/nxdt-contract.yaml,
facts from neuronx-distributed-training at the recorded commit: its packages cannot be installed here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from launch.neuron import default_parallelism, nxdt_config
from launch.nxdt_contract import RECORD, contract_problems, flatten, load_record
from slurm.target import resolve_target
from spec import load_spec
from training.config import load_job_config
from training.models.registry import get_model_args

REPO = Path(__file__).resolve().parents[2]
TRN1 = resolve_target(load_spec(REPO / "spec" / "examples" / "trn1-neuron.yaml"), "neuron", None, None)
CONFIGS = REPO / "launch" / "jobs" / "configs"


def _render(config: str, model: str | None = None) -> dict:
    job = load_job_config(CONFIGS / f"neuron-{config}.yaml").with_overrides(
        **{"data.prefix": "/fsx/data/wiki_text_document", **({"model.name": model} if model else {})}
    )
    name = model or config
    tp, pp = default_parallelism(job.model.name)
    return nxdt_config(job, get_model_args(name), TRN1, 4, Path(f"/fsx/runs/{name}"), "/fsx/tok", tp, pp)


@pytest.mark.parametrize(("config", "model"), [("pythia-6.9b", None), ("neox-20b", None), ("pythia-6.9b", "llama2-7b")])
def test_rendered_config_has_every_key_nxdt_reads_and_no_other(config: str, model: str | None) -> None:
    assert contract_problems(_render(config, model)) == []


def test_the_tokenizer_has_all_three_file_keys_null_when_unused() -> None:
    # Item 7: MegatronDataModule._build_tokenizer reads model, vocab_file and merge_file directly.
    tokenizer = _render("pythia-6.9b")["data"]["tokenizer"]
    assert tokenizer == {
        "library": "huggingface",
        "type": "/fsx/tok",
        "model": None,
        "vocab_file": None,
        "merge_file": None,
    }


def test_the_rope_base_reaches_nxdt_under_its_own_name() -> None:
    # NxDT's Megatron model reads position_freq_base (default 10000); Llama 2 uses 10000, Llama 3 500000.
    config = _render("pythia-6.9b", "llama2-7b")
    assert config["model"]["position_freq_base"] == get_model_args("llama2-7b").rope_theta


def test_the_record_names_its_source_and_the_check_catches_each_kind_of_mistake() -> None:
    record = load_record()
    assert record["source"]["repository"].endswith("aws-neuron/neuronx-distributed-training")
    assert len(record["source"]["commit"]) == 40
    good = _render("pythia-6.9b")
    broken = yaml.safe_load(yaml.safe_dump(good))
    del broken["data"]["tokenizer"]["merge_file"]
    del broken["exp_manager"]["resume_from_checkpoint"]
    broken["model"]["rotary_base"] = 10000
    broken["model"]["optim"]["sched"]["max_steps"] = 5
    broken["precision"]["type"] = "bf16"
    assert contract_problems(broken) == [
        "exp_manager.resume_from_checkpoint: NxDT reads it without a default; it is missing",
        "data.tokenizer.merge_file: NxDT reads it without a default; it is missing",
        "model.rotary_base: not a key NxDT reads",
        "model.optim.sched.max_steps: NxDT overwrites it (src/neuronx_distributed_training/lightning_modules/model/"
        "base.py:312 replaces it with trainer.max_steps)",
        "precision.type: 'bf16' is not one of bf16SR, fp32, autocast, mixed_precision, mixed_precisionSR, manual",
    ]


def test_every_required_key_is_also_in_nxdts_own_examples() -> None:
    record = load_record()
    assert set(record["required"]) <= set(record["example_keys"]), RECORD
    assert dict(flatten({"a": {"b": None, "c": {}}})) == {"a.b": None, "a.c": {}}
