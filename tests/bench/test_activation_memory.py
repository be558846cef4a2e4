"""The planner's activation model against what autograd actually saves for one block (bench/activation_memory.py)."""

import re
from pathlib import Path

import pytest

from bench.activation_memory import main, measured_block_bytes_per_token
from planner.memory import block_activation_bytes_per_token
from training.models.args import ModelArgs
from training.models.registry import get_model_args

REPO = Path(__file__).resolve().parents[2]
SMALL_LLAMA = ModelArgs(flavor="llama", dim=64, n_layers=2, n_heads=8, ffn_dim=160, vocab_size=128, n_kv_heads=2)
SMALL_NEOX = ModelArgs(flavor="neox", dim=64, n_layers=2, n_heads=4, ffn_dim=256, vocab_size=128, rotary_pct=0.25)


@pytest.mark.parametrize("args", [SMALL_LLAMA, SMALL_NEOX, get_model_args("1b")], ids=["llama", "neox", "1b"])
def test_planner_counts_the_bytes_a_block_saves_for_backward(args: ModelArgs) -> None:
    assert block_activation_bytes_per_token(args, "none", "flash") == measured_block_bytes_per_token(args, seq=64)


def test_the_1b_figures_in_the_config_and_docs_are_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    command = "python -m bench.activation_memory --model 1b --instance p5.48xlarge --nodes 1 --seq 4096 --batch 4"
    assert main(command.split()[3:]) == 0
    out = capsys.readouterr().out
    measured = re.search(r"block activations ([\d,]+) bytes/token measured", out)
    verdict = re.search(r"activations ([\d.]+) GiB measured .*; ([\d.]+) GiB per device of 80.0: fits", out)
    assert measured and verdict, out
    config, doc = (REPO / "training/configs/1b.yaml").read_text(), (REPO / "docs/training.md").read_text()
    for text in (config, doc):
        assert command in text and f"{measured[1]} bytes per token per block" in text
        assert f"{verdict[1]} GiB" in text and f"{verdict[2]} GiB per" in text


def test_the_command_prints_the_measurement_and_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model", "125m", "--seq", "1024", "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "bytes/token measured" in out and ": fits\n" in out
