"""Memory per device in GiB: peak allocated (and reserved) on GPU since the last reset, resident set size on CPU."""

from __future__ import annotations

import os

import torch

_GIB = float(1 << 30)


def memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / _GIB
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            resident_pages = int(statm.read().split()[1])
        return resident_pages * os.sysconf("SC_PAGE_SIZE") / _GIB
    except (OSError, ValueError, IndexError):
        return float("nan")


def reserved_gib(device: torch.device) -> float:
    """Peak bytes the CUDA caching allocator reserved (what torchtitan reports as memory); NaN on a CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_reserved(device) / _GIB
    return float("nan")


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
