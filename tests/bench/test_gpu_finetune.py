from pathlib import Path

import pytest

from bench.gpu_finetune import job, median_after, parse_args
from training.config import parse_job_config


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_both_runs_are_valid_job_configs_that_differ_only_in_the_finetune_mode(mode: str) -> None:
    args = parse_args(["--micro-batch", "2", "--seq-len", "1024", "--steps", "9"])
    config = parse_job_config(job(args, Path("/d/x_text_document"), Path("/base"), Path("/run"), mode))
    assert config.init_from == "/base" and config.finetune is not None and config.finetune.mode == mode
    assert (config.data.seq_len, config.data.micro_batch_size, config.data.global_batch_size) == (1024, 2, 2)
    assert config.train.max_steps == 9 and config.checkpoint.every == "off"
    lora = config.finetune.lora_settings
    assert (lora is None) == (mode == "full")
    if lora is not None:
        assert (lora.rank, lora.alpha, len(lora.target_modules)) == (16, 32.0, 7)


def test_the_median_leaves_out_the_warm_up_and_memory_is_the_highest_after_it() -> None:
    rows = [(1, 10.0, None, 50.0), (2, 100.0, None, 20.0), (3, 300.0, None, 22.0), (4, 200.0, None, None)]
    assert median_after(rows, warmup=1) == (200.0, 22.0)
    with pytest.raises(SystemExit, match="no step after --warmup 4"):
        median_after(rows, warmup=4)


def test_bad_arguments_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--steps", "5", "--warmup", "5"])
    assert "--warmup: 5 must be in [0, --steps 5)" in capsys.readouterr().err
