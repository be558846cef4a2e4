"""The job configs shipped in training/configs/ parse, and their shapes and batch sizes fit together."""

from pathlib import Path

import pytest

from training.config import load_job_config, resolve_model_args
from training.models import count_parameters

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "training" / "configs").glob("*.yaml"))


def test_the_demo_and_gpu_examples_are_there() -> None:
    assert {path.stem for path in CONFIGS} >= {"tiny", "1b", "llama3-8b"}


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_is_valid(path: Path) -> None:
    config = load_job_config(path)
    args = resolve_model_args(config.model, data_vocab_size=8000 if config.model.vocab_size == "data" else None)
    assert config.data.seq_len <= args.max_seq_len
    assert config.data.global_batch_size % config.data.micro_batch_size == 0
    if path.stem.startswith("tiny"):
        assert 1_000_000 < count_parameters(args).total < 3_000_000
    if path.stem in ("tiny", "tiny-lora", "tiny-fp8"):  # the CPU demos: fp32 on CPU, bf16 on GPU
        assert config.parallel.mixed_precision == "auto"
    else:
        assert config.parallel.mixed_precision == "bf16"


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_checkpoints_stay_under_the_run_dir(path: Path) -> None:
    # An absolute checkpoint.dir (llama3-8b.yaml had /fsx/checkpoints/llama3-8b, a folder nothing creates) is shared
    # by every run of the config; a relative one lives inside the run directory llm-submit is given.
    assert not Path(load_job_config(path).checkpoint.dir).is_absolute()
