"""Neuron SDK releases whose package versions this repo pins (from the release's package list).

A spec names `cluster.neuron.sdk_version`; for a release listed here the pins come from this table,
for any other release the spec must pin every package itself (`cluster.neuron.packages`).
"""

from __future__ import annotations

from dataclasses import dataclass

from spec.cluster import NEURON_PACKAGES, NeuronSpec
from spec.platform.instances import INSTANCE_TYPES

NEURON_RELEASES: dict[str, dict[str, str]] = {
    # Neuron 2.26.1 (2025-10-29): PyTorch 2.8 through torch-neuronx. Source: the release-content page,
    # https://awsdocs-neuron.readthedocs-hosted.com/en/v2.26.1/release-notes/releasecontent.html
    "2.26.1": {
        "aws-neuronx-dkms": "2.24.7.0",
        "aws-neuronx-runtime-lib": "2.28.23.0",
        "aws-neuronx-collectives": "2.28.27.0",
        "aws-neuronx-tools": "2.26.14.0",
        "torch-neuronx": "2.8.0.2.10.16998",
        "neuronx-cc": "2.21.33363.0",
    },
}

# Neuron 2.28 is the last release with NxD Training (NxDT): 2.29 announced its end, 2.30 put it in maintenance
# (security fixes only), 2.31 dropped it from the DLAMIs, and training moved to native PyTorch on Neuron (TorchNeuron
# with TorchTitan), on Trn2/Trn3 only. Source: aws-neuron/aws-neuron-sdk at 81ce03ae261e12925e53437a0f690478e6366155,
# about-neuron/announcements/neuron2.x/announce-maintenance-nxdt-nxd-core-training.rst,
# announce-no-longer-include-nxdt-dlami.rst and frameworks/torch/pytorch-native-overview.rst. trn1 therefore stays
# on NxDT and at most this release (spec.platform.validators refuses a newer sdk_version for a trn1 queue).
LAST_NXDT_RELEASE: tuple[int, int] = (2, 28)
# Why trn1's pins stay at 2.26.1 and not 2.28.1, the last NxDT release: 2.28.1's package versions are public
# (aws-neuron-sdk 3c46990d, src/helperscripts/n2-manifest.json: dkms 2.26.10.0, runtime-lib 2.30.51.0, collectives
# 2.30.59.0, tools 2.28.23.0, neuronx-cc 2.23.6484.0, neuronx-distributed 0.17.26814, neuronx-distributed-training
# 1.7.0, torch-neuronx 2.7/2.8/2.9.0.2.12.22436), but NxDT 1.7.0's source is not (the aws-neuron/
# neuronx-distributed-training repository ends at 1.6.0, the 2.26.0 release): its own requirements, which torch-neuronx
# build it takes and its config keys cannot be read, so no NxdtStack or contract (launch/nxdt-contract.yaml, 1.6.0)
# can be written for it. The same repository's release-notes/components/nxd-training.rst names 2.31.0 as the last
# release supporting NxDT; its package manifest lists NxDT only up to 2.28.1, which is what is refused above.

# Why a trn2 queue runs no job here yet (the same sources; docs/cluster.md has the whole account): TorchNeuron's
# packages come only from Neuron's own pip index (a closed beta when the sources above were written, beta in 2.33),
# its source is not published where this repo can read it, and it compiles only on Trn2/Trn3 hardware, so no
# renderer can be checked against it as launch/nxdt-contract.yaml checks NxDT's.
TRN2_STACK_REFUSAL = (
    "whose supported training stack is native PyTorch on Neuron (TorchNeuron) with TorchTitan, not the NxDT this "
    "backend renders; TorchNeuron comes only from Neuron's own pip index and compiles only on Trn2/Trn3, so no job "
    "for it is rendered or checked here yet (docs/cluster.md, Trainium)"
)


def _families(stack: str) -> tuple[str, ...]:
    """Instance families whose Trainium chip trains with `stack` (the hardware catalogue's neuron_stack)."""
    families = (f.family for f in INSTANCE_TYPES.values() if f.chip is not None and f.chip.neuron_stack == stack)
    return tuple(dict.fromkeys(families))


TORCHNEURON_FAMILIES: tuple[str, ...] = _families("torchneuron")
NXDT_FAMILIES: tuple[str, ...] = _families("nxdt")

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
            f"Neuron SDK {neuron.sdk_version} has no pins in spec/platform/neuron.py (known: {known}); "
            "set cluster.neuron.packages"
        ) from None


# The NeuronX Distributed Training (NxDT) stack of each release. Sources:
#   Neuron packages: the release-content page of the release,
#     https://awsdocs-neuron.readthedocs-hosted.com/en/v2.26.1/release-notes/releasecontent.html
#     (neuronx_distributed-0.15.22404, neuronx_distributed_training-1.6.0, neuronx-cc-2.21.33363.0,
#     torch-neuronx 2.8.0.2.10.16998, libneuronxla-2.2.12677.0)
#   NxDT's own dependencies: aws-neuron/neuronx-distributed-training at 9169aa03f39efd4eb02da63891a7ed98defb1714
#     ("Neuron SDK Release 2.26.0 changes", src/neuronx_distributed_training/_version.py = 1.6.0; 2.26.1 ships
#     the same 1.6.0): requirements.txt, README.md (slim apex 0.1 wheel from NVIDIA/apex tag 25.07) and
#     install_setup.sh (megatron-core from NVIDIA/Megatron-LM core_r0.10.0, two sed patches of NeMo 2.1.0).
NXDT_SOURCE_COMMIT = "9169aa03f39efd4eb02da63891a7ed98defb1714"


@dataclass(frozen=True)
class SourceBuild:
    """A dependency that has no wheel on any index: the mirror step builds it once from a git tag."""

    name: str
    version: str
    repository: str
    ref: str
    slim_setup: bool = False  # apex: NxDT's README replaces setup.py so no CUDA extension is built


@dataclass(frozen=True)
class NemoPatch:
    """A line NxDT's install_setup.sh removes from NeMo with sed; the node install checks it is gone."""

    path: str  # inside site-packages
    pattern: str  # the text removed or replaced (fixed string)
    replacement: str


@dataclass(frozen=True)
class NxdtStack:
    packages: dict[str, str]  # exact pins, Neuron's pip index or PyPI
    ranges: tuple[str, ...]  # NxDT's requirements.txt entries without an exact pin: fixed by the mirror's lock
    source_builds: tuple[SourceBuild, ...]
    nemo_patches: tuple[NemoPatch, ...]


_NXDT_1_6_0_RANGES = (
    # requirements.txt at NXDT_SOURCE_COMMIT, the entries it does not pin exactly (resolved once, then locked).
    "torchmetrics>=0.4.1rc0,<=0.10.3",
    "wandb",
    "webdataset>=0.1.48,<=0.1.62",
    "pandas",
    "sentencepiece",
    "youtokentome",
    "h5py",
    "ijson",
    "matplotlib>=3.3.2",
    "sacremoses",
    "sacrebleu",
    "einops",
    "faiss-cpu",
    "sentence_transformers>=2.3",
    "nltk>=3.6.5",
    "jieba",
    "ftfy",
    "gdown",
    "inflect",
    "pangu",
    "rapidfuzz",
    "pybind11",
    "ipadic",
    "mecab-python3",
    "regex",
    "python-daemon",
    "huggingface_hub>=0.27.1",
    "numba<=0.60.0",
    "numpy>=1.24.3,<=1.25.2",
    "rouge_score",
    "setuptools>=70.0",
    "s3fs",
)

NXDT_RELEASES: dict[str, NxdtStack] = {
    "2.26.1": NxdtStack(
        packages={
            # Neuron's pip index (release content of 2.26.1)
            "torch-neuronx": "2.8.0.2.10.16998",
            "neuronx-cc": "2.21.33363.0",
            "libneuronxla": "2.2.12677.0",
            "neuronx-distributed": "0.15.22404",
            "neuronx-distributed-training": "1.6.0",
            # NxDT 1.6.0 requirements.txt, exact there
            "nemo-toolkit": "2.1.0",
            "pytorch-lightning": "2.5.0",
            "lightning": "2.5.0",
            "transformers": "4.52.4",
            "pyyaml": "6.0.1",
            "opencc": "1.1.6",
            "protobuf": "3.20.3",
            "datasets": "3.0.0",
            "dill": "0.3.8",
            "requests": "2.32.4",
            "multiprocess": "0.70.16",
            "ml-dtypes": "0.5.0",
            "boto3": "1.35.93",
            "botocore": "1.35.93",
            "s3transfer": "0.10.4",
            # ranges in requirements.txt (hydra-core>=1.3.0, omegaconf>=2.2,<2.3): their last releases in range
            "hydra-core": "1.3.2",
            "omegaconf": "2.2.3",
            # built by the mirror step (source_builds)
            "megatron-core": "0.10.0",
            "apex": "0.1",
        },
        ranges=_NXDT_1_6_0_RANGES,
        source_builds=(
            SourceBuild("megatron-core", "0.10.0", "https://github.com/NVIDIA/Megatron-LM.git", "core_r0.10.0"),
            SourceBuild("apex", "0.1", "https://github.com/NVIDIA/apex.git", "25.07", slim_setup=True),
        ),
        nemo_patches=(
            # Transformer Engine (which Neuron lacks) is reached through this call.
            NemoPatch("nemo/collections/nlp/models/nlp_model.py", "get_megatron_pretrained_bert_models()", "[]"),
            # The checkpoint path may be an S3 URI, which the local file-system check refuses.
            NemoPatch(
                "nemo/utils/callbacks/nemo_model_checkpoint.py", " and self._fs.exists(ckpt_to_dir(filepath))", ""
            ),
        ),
    ),
}


def nxdt_stack(neuron: NeuronSpec) -> NxdtStack:
    """The release's NxDT stack; KeyError for a release without one, ValueError for a clashing spec pin (one line)."""
    try:
        stack = NXDT_RELEASES[neuron.sdk_version]
    except KeyError:
        known = ", ".join(NXDT_RELEASES)
        raise KeyError(
            f"cluster.neuron.sdk_version: Neuron SDK {neuron.sdk_version} has no NxDT stack in spec/platform/neuron.py "
            f"(known: {known})"
        ) from None
    sdk_pins = neuron_pins(neuron)
    for name in PYTHON_PACKAGES:  # the NxDT stack must run on the compiler and framework the nodes are pinned to
        if stack.packages[name] != sdk_pins[name]:
            raise ValueError(
                f"cluster.neuron.packages: {name}={sdk_pins[name]} differs from Neuron SDK {neuron.sdk_version}'s "
                f"NxDT stack ({name}={stack.packages[name]})"
            )
    return stack


def nxdt_requirements(neuron: NeuronSpec) -> list[str]:
    """requirements.txt lines of the NxDT stack: every named package exactly pinned, then NxDT's ranges."""
    stack = nxdt_stack(neuron)
    return [*(f"{name}=={version}" for name, version in stack.packages.items()), *stack.ranges]
