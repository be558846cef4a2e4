import torch

from training.metrics.memory import memory_gib


def test_cpu_memory_is_the_resident_set() -> None:
    before = memory_gib(torch.device("cpu"))
    block = torch.ones(64 * 1024 * 1024 // 4)  # 64 MiB, touched
    after = memory_gib(torch.device("cpu"))
    assert 0.0 < before < 64.0
    assert after - before > 0.04
    del block
