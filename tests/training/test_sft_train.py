"""A tiny SFT run: `data.kind: sft` on the demo instruction set, torchrun with 2 gloo ranks on the CPU."""

from pathlib import Path

import pytest

from tests.training.jobs import records, run_training, tiny_job, write_job
from training.config import ConfigError, parse_job_config
from training.sft.demo_instructions import demo_instructions_path
from training.sft.prepare import prepare_sft

STEPS = 24


@pytest.fixture(scope="module")
def sft_prefix(demo_data_prefix: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo instruction set, tokenized with the demo pretraining data's tokenizer."""
    tokenizer = Path(demo_data_prefix.removesuffix("_text_document") + "_tokenizer.json")
    out = tmp_path_factory.mktemp("sft") / "demo"
    return str(prepare_sft([demo_instructions_path()], out, tokenizer_path=tokenizer).tokens_prefix)


def test_held_out_sft_loss_goes_down_on_two_ranks(sft_prefix: str, tmp_path: Path) -> None:
    job = tiny_job(
        sft_prefix,
        data={"kind": "sft", "seq_len": 256, "validation_fraction": 0.05, "global_batch_size": 8},
        train={"max_steps": STEPS, "eval_every": STEPS // 2, "eval_batches": 2},
        model={"max_seq_len": 256},
        checkpoint={"every": "off"},
    )
    result = run_training(write_job(tmp_path / "sft.yaml", job), tmp_path / "run", ranks=2)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    validation = [r["val_loss"] for r in records(tmp_path / "run", "validation")]
    assert len(validation) == 3 and validation[-1] < validation[0] - 0.5, validation
    print("held-out SFT loss by evaluation:", validation)


def test_data_kind_is_pretrain_or_sft() -> None:
    job = tiny_job("x_sft_tokens", data={"kind": "chat"})
    with pytest.raises(ConfigError, match=r"data\.kind"):
        parse_job_config(job)
    assert parse_job_config(tiny_job("x_text_document")).data.kind == "pretrain"
