"""The training state's memory check: the arithmetic, the host's memory, and a real job refused before it
materializes a model the host cannot hold."""

import json
from pathlib import Path

import pytest
import torch

from tests.training.jobs import run_training, tiny_job, write_job
from training.config import ConfigError
from training.parallel.state_memory import (
    DeviceMemory,
    check_state_fits,
    device_memory,
    host_available_bytes,
    local_world_size,
    state_bytes_per_rank,
)
from training.signals import EXIT_CONFIG_ERROR, EXIT_STATUS_FILE

GIB = 1 << 30


def test_sixteen_bytes_a_parameter_split_over_the_shards() -> None:
    assert state_bytes_per_rank(8_030_261_248, 16) == 8_030_261_248
    assert state_bytes_per_rank(10, 3) == 54  # rounded up: no rank holds less than its share


def test_a_state_too_big_is_one_line_naming_the_model_and_both_figures() -> None:
    with pytest.raises(ConfigError) as caught:
        check_state_fits("model.name: 'llama3-8b'", 8_030_261_248, 16, DeviceMemory(3 * GIB, "a note"), "cpu")
    (line,) = str(caught.value).splitlines()
    assert line.startswith("config: model.name: 'llama3-8b' does not fit: its training state (8.03B parameters x 16")
    assert "sharded over 16 ranks needs 7.5 GiB per rank, more than this cpu rank has (3.0 GiB: a note)" in line
    check_state_fits("model.name: 'tiny'", 10_000_000, 1, DeviceMemory(GIB, "a note"), "cpu")  # fits: no error


def test_a_frozen_base_counts_its_weights_only() -> None:
    # Llama 2 70B with LoRA on one p5 node: 8 ranks of 80 GiB. Trained in full it needs 128.5 GiB a rank.
    base, adapters = 68_976_648_192, 207_093_760
    total = base + adapters
    assert state_bytes_per_rank(total, 8, frozen=base, frozen_bytes=2) == -(-(adapters * 16 + base * 2) // 8)
    p5 = DeviceMemory(80 * GIB, "NVIDIA H100 80GB HBM3 total memory")
    check_state_fits("model.name: 'llama2-70b'", total, 8, p5, "cuda", frozen=base, frozen_bytes=2)  # fits
    with pytest.raises(ConfigError) as caught:
        check_state_fits("model.name: 'llama2-70b'", total, 8, p5, "cuda")
    assert "(69.18B parameters x 16 bytes" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        check_state_fits("model.name: 'llama2-70b'", total, 1, p5, "cuda", frozen=base, frozen_bytes=2)
    assert "0.21B parameters x 16 bytes: fp32 weights, gradients and AdamW moments; 68.98B frozen x 2 bytes)" in str(
        caught.value
    )


def test_the_hosts_available_memory_is_shared_by_the_nodes_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   16777216 kB\n")
    assert host_available_bytes(meminfo) == 16 * GIB
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert local_world_size() == 8
    memory = device_memory(torch.device("cpu"), 8)
    assert memory.bytes == host_available_bytes() // 8
    assert memory.source.endswith("GiB available on this host / 8 ranks on this node")


def test_a_model_the_host_cannot_hold_stops_before_its_weights_exist(demo_data_prefix: str, tmp_path: Path) -> None:
    """llama3-8b's shape on the demo data: 128 GB of state for one CPU rank. Without the check the process would
    allocate its 32 GB of fp32 weights first."""
    job = tiny_job(demo_data_prefix)
    job["model"] = {"name": "llama3-8b", "vocab_size": "data"}
    config = write_job(tmp_path / "job.yaml", job)
    result = run_training(config, tmp_path / "run", ranks=1)
    assert result.returncode == EXIT_CONFIG_ERROR, result.stdout[-2000:] + result.stderr[-2000:]
    status = json.loads((tmp_path / "run" / EXIT_STATUS_FILE).read_text())
    assert status["reason"].startswith("config: model.name: 'llama3-8b' does not fit: its training state (")
    assert "more than this cpu rank has" in status["reason"]
