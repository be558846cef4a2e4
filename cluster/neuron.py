"""Neuron SDK releases whose package versions this repo pins (from the release's package list).

A spec names `cluster.neuron.sdk_version`; for a release listed here the pins come from this table,
for any other release the spec must pin every package itself (`cluster.neuron.packages`).
"""

from __future__ import annotations

from spec.cluster import NEURON_PACKAGES, NeuronSpec

NEURON_RELEASES: dict[str, dict[str, str]] = {
    # Neuron 2.26.1 (2025-10-29): PyTorch 2.8 through torch-neuronx.
    "2.26.1": {
        "aws-neuronx-dkms": "2.24.7.0",
        "aws-neuronx-runtime-lib": "2.28.23.0",
        "aws-neuronx-collectives": "2.28.27.0",
        "aws-neuronx-tools": "2.26.14.0",
        "torch-neuronx": "2.8.0.2.10.16998",
        "neuronx-cc": "2.21.33363.0",
    },
}

SYSTEM_PACKAGES: tuple[str, ...] = NEURON_PACKAGES[:4]  # from Neuron's apt/yum repository
PYTHON_PACKAGES: tuple[str, ...] = NEURON_PACKAGES[4:]  # from Neuron's pip index


def neuron_pins(neuron: NeuronSpec) -> dict[str, str]:
    """Exact versions for every Neuron package; KeyError (one line) when the release is unknown and unpinned."""
    if neuron.packages is not None:
        return dict(neuron.packages)
    try:
        return dict(NEURON_RELEASES[neuron.sdk_version])
    except KeyError:
        known = ", ".join(NEURON_RELEASES)
        raise KeyError(
            f"Neuron SDK {neuron.sdk_version} has no pins in cluster/neuron.py (known: {known}); "
            "set cluster.neuron.packages"
        ) from None
