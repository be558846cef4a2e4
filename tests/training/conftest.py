"""Fixtures shared by the trainer-side tests: a small real-text dataset and a one-process process group."""

from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from tests.training.jobs import prepare_demo_subset


@pytest.fixture(scope="session")
def demo_data_prefix(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The first documents of the demo corpus (stdlib docstrings) through the real `training.prepare`."""
    return prepare_demo_subset(tmp_path_factory.mktemp("demo-data"))


@pytest.fixture
def process_group() -> Iterator[None]:
    """A one-rank gloo group for in-process FSDP2/DCP tests, on one CPU thread (cores are shared in CI)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()
        torch.set_num_threads(threads)


@pytest.fixture
def one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
