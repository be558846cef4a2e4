"""Which backends can train a model family (the family descriptor's gaps, training/models/family.py): llm-plan does
not plan a backend llm-submit would refuse for the model."""

from __future__ import annotations

from planner.job import PlanError
from slurm.backends import TrainingBackend
from training.models.families import family_named


def backend_family_gap(backend: TrainingBackend, flavor: str) -> str | None:
    """Why `backend` cannot train the `flavor` family; None: it can (the FSDP trainer builds every family)."""
    family = family_named(flavor)
    if backend.name == "neuron":
        return family.neuron_gap
    if backend.name == "nemo2":
        return family.megatron_gap
    if backend.name == "bridge" and family.bridge_recipe is None:
        return family.bridge_gap or family.megatron_gap or "no Megatron Bridge recipe is named for the family"
    return None


def refuse_backend_family(backend_option: str, backend: TrainingBackend, flavor: str) -> None:
    gap = backend_family_gap(backend, flavor)
    if gap is not None:
        raise PlanError(
            "--backend", backend_option, f"cannot train model flavor {flavor!r} ({gap}); plan it with --backend fsdp"
        )
