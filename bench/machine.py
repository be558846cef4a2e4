"""What the numbers were measured on: CPU, cores, memory, OS, software versions and the commit."""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Machine:
    date: str
    cpu_model: str
    cores: int
    memory_gib: float
    os: str
    kernel: str
    python: str
    torch: str
    numpy: str
    commit: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def cpu_model(cpuinfo: str) -> str:
    """The first 'model name' in /proc/cpuinfo text."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return platform.processor() or "unknown"


def memory_gib(meminfo: str) -> float:
    """MemTotal from /proc/meminfo text, in GiB."""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / (1 << 20), 1)
    return 0.0


def os_name(os_release: str) -> str:
    for line in os_release.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return platform.system()


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return ""


def commit() -> str:
    """HEAD, with '+changes' when tracked files differ from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=REPO, check=False).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}+changes" if dirty else head


def describe() -> Machine:
    import numpy
    import torch

    return Machine(
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        cpu_model=cpu_model(_read("/proc/cpuinfo")),
        cores=os.cpu_count() or 0,
        memory_gib=memory_gib(_read("/proc/meminfo")),
        os=os_name(_read("/etc/os-release")),
        kernel=platform.release(),
        python=platform.python_version(),
        torch=torch.__version__,
        numpy=numpy.__version__,
        commit=commit(),
    )
