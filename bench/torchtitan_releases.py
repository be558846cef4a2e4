"""The torchtitan releases bench/gpu_vs_torchtitan.py can compare against, and which one a machine's torch runs.

The lent GPU machines carry torch 2.11 and cannot fetch another (a CUDA torch is several GB), so the comparison takes
the newest release that torch supports instead of failing: 0.3.0 imports an FSDP API that torch 2.12 added; 0.2.2's
release pinned a torch 2.10 nightly (its docs/release.md practice) and runs on 2.11.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class TorchtitanRelease:
    version: str
    min_torch: tuple[int, int]
    requirements: Path  # the pinned closure for --wheels, less the machine's torch and triton
    # (module, attribute) the release imports at start-up, checked before a run; None where the version says enough
    required_api: tuple[str, str] | None
    # How the run is configured: 0.3.0 loads a Python config registry (bench/torchtitan_config.py), 0.2.2 a TOML job
    # (bench/torchtitan_v0_2_job.py)
    config_style: str
    # Whether its Llama 3 ties the output projection to the embedding (ours follows, so both train the same model)
    tied_embeddings: bool


RELEASES: tuple[TorchtitanRelease, ...] = (  # newest first
    TorchtitanRelease(
        version="0.3.0",
        min_torch=(2, 12),
        requirements=BENCH / "gpu-bench-requirements-torchtitan-0.3.0.txt",
        # torchtitan/distributed/full_dtensor.py imports it; on torch 2.11.0+cu130 that is an ImportError at start-up
        required_api=("torch.distributed.fsdp", "DataParallelMeshDims"),
        config_style="registry",
        tied_embeddings=True,
    ),
    TorchtitanRelease(
        version="0.2.2",
        min_torch=(2, 10),
        requirements=BENCH / "gpu-bench-requirements-torchtitan-0.2.2.txt",
        required_api=None,
        config_style="toml",
        tied_embeddings=False,
    ),
)


def torch_version_tuple(torch_version: str) -> tuple[int, int]:
    major, minor = torch_version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def release_problem(release: TorchtitanRelease, torch_version: str, fsdp_module: object) -> str | None:
    """Why this torch cannot run `release`, in one line, or None when it can."""
    if torch_version_tuple(torch_version) < release.min_torch:
        need = ".".join(str(part) for part in release.min_torch)
        return f"torch: {torch_version} is older than {need}, which torchtitan {release.version} needs"
    if release.required_api is not None:
        module, name = release.required_api
        if not hasattr(fsdp_module, name):
            return (
                f"torch: {torch_version} has no {module}.{name}, which torchtitan {release.version} imports at start-up"
            )
    return None


def release_named(version: str) -> TorchtitanRelease:
    for release in RELEASES:
        if release.version == version:
            return release
    known = ", ".join(release.version for release in RELEASES)
    raise ValueError(f"--torchtitan: {version!r} is not a release this comparison is written for ({known})")


def newest_release_for(torch_version: str, fsdp_module: object) -> TorchtitanRelease | None:
    """The newest release this torch runs, or None when it runs none of them."""
    for release in RELEASES:
        if release_problem(release, torch_version, fsdp_module) is None:
            return release
    return None
