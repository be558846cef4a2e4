"""spec.platform.neuron's release tables and the NxDT wheelhouse step (its rendered commands and files; the
download itself never runs in tests)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cluster.nxdt_wheelhouse import (
    NEURON_PIP_INDEX,
    download_command,
    examples_commands,
    lock_from_wheels,
    main,
    patches_tsv,
    source_build_commands,
)
from spec import load_spec
from spec.cluster import NeuronSpec
from spec.platform.neuron import NEURON_RELEASES, NXDT_RELEASES, neuron_pins, nxdt_requirements, nxdt_stack
from tests.cluster.conftest import ALL_SPECS

TRN1_SPEC = next(p for p in ALL_SPECS if p.name == "trn1-neuron.yaml")
NXDT_NAMES = {
    "neuronx-distributed-training",
    "neuronx-distributed",
    "torch-neuronx",
    "neuronx-cc",
    "nemo-toolkit",
    "pytorch-lightning",
    "lightning",
    "hydra-core",
    "omegaconf",
    "megatron-core",
    "apex",
    "transformers",
}


def test_every_named_package_of_the_nxdt_stack_is_pinned_exactly() -> None:
    neuron = NeuronSpec(sdk_version="2.26.1")
    lines = nxdt_requirements(neuron)
    exact = dict(line.split("==") for line in lines if "==" in line)
    assert set(exact) >= NXDT_NAMES
    assert all(re.fullmatch(r"\d+(\.\d+)+", version) for version in exact.values())
    # 2.26.1's release content: NxD 0.15.22404, NxDT 1.6.0, on the same compiler and framework as the SDK pins.
    assert exact["neuronx-distributed"] == "0.15.22404"
    assert exact["neuronx-distributed-training"] == "1.6.0"
    for name in ("torch-neuronx", "neuronx-cc"):
        assert exact[name] == NEURON_RELEASES["2.26.1"][name]
    # NxDT 1.6.0's install_setup.sh: megatron-core from core_r0.10.0; its README: apex 0.1 from 25.07, slim.
    builds = {b.name: (b.version, b.ref, b.slim_setup) for b in NXDT_RELEASES["2.26.1"].source_builds}
    assert builds == {"megatron-core": ("0.10.0", "core_r0.10.0", False), "apex": ("0.1", "25.07", True)}
    # No name both pinned and left to a range.
    ranged = {re.split(r"[=<>!~ ]", line, maxsplit=1)[0].replace("_", "-") for line in lines if "==" not in line}
    assert not ranged & set(exact)


def test_unknown_release_is_a_one_line_error_naming_the_field() -> None:
    with pytest.raises(KeyError) as error:
        nxdt_requirements(NeuronSpec(sdk_version="2.99.0", packages=NEURON_RELEASES["2.26.1"]))
    assert error.value.args[0] == (
        "cluster.neuron.sdk_version: Neuron SDK 2.99.0 has no NxDT stack in spec/platform/neuron.py (known: 2.26.1)"
    )
    with pytest.raises(KeyError) as error:
        neuron_pins(NeuronSpec(sdk_version="2.99.0"))
    assert "set cluster.neuron.packages" in error.value.args[0] and "\n" not in error.value.args[0]


def test_spec_pins_that_clash_with_the_stack_are_refused() -> None:
    packages = {**NEURON_RELEASES["2.26.1"], "neuronx-cc": "2.21.18209.0"}
    with pytest.raises(ValueError, match=r"^cluster.neuron.packages: neuronx-cc=2.21.18209.0 differs"):
        nxdt_stack(NeuronSpec(sdk_version="2.26.1", packages=packages))


def test_rendered_mirror_commands(tmp_path: Path) -> None:
    megatron, apex = NXDT_RELEASES["2.26.1"].source_builds
    out, work = tmp_path / "out", tmp_path / "src"
    assert source_build_commands(megatron, work, out, "python3.11") == [
        ["git", "clone", "--quiet", "--depth", "1", "--branch", "core_r0.10.0", megatron.repository, f"{work}/megatron-core"],
        ["python3.11", "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), f"{work}/megatron-core"],
    ]  # fmt: skip
    assert apex.repository == "https://github.com/NVIDIA/apex.git"
    command = download_command(tmp_path / "req.txt", out, "python3.11")
    assert command[command.index("--extra-index-url") + 1] == NEURON_PIP_INDEX
    assert command[3] == "wheel"  # sdist-only dependencies become wheels on the mirror, never on the nodes
    clone, checkout, tar = examples_commands(work, out)
    assert clone[-2] == "https://github.com/aws-neuron/neuronx-distributed-training.git"
    assert checkout[-1] == "9169aa03f39efd4eb02da63891a7ed98defb1714"  # NxDT 1.6.0 = Neuron 2.26.0/2.26.1
    assert tar == [
        "tar",
        "-czf",
        f"{out}/nxdt-examples.tar.gz",
        "-C",
        f"{work}/neuronx-distributed-training",
        "examples",
    ]


def test_patches_and_lock_files(tmp_path: Path) -> None:
    rows = [line.split("\t") for line in patches_tsv(NXDT_RELEASES["2.26.1"]).splitlines()[1:]]
    assert rows == [
        ["nemo/collections/nlp/models/nlp_model.py", "get_megatron_pretrained_bert_models()", "[]"],
        ["nemo/utils/callbacks/nemo_model_checkpoint.py", " and self._fs.exists(ckpt_to_dir(filepath))", ""],
    ]
    for name in ("nemo_toolkit-2.1.0-py3-none-any.whl", "Megatron_Core-0.10.0-cp311-cp311-linux_x86_64.whl"):
        (tmp_path / name).touch()
    assert lock_from_wheels(tmp_path) == "megatron-core==0.10.0\nnemo-toolkit==2.1.0\n"
    (tmp_path / "nemo_toolkit-2.0.0-py3-none-any.whl").touch()
    with pytest.raises(ValueError, match="two versions of nemo-toolkit"):
        lock_from_wheels(tmp_path)


def test_mirror_cli_refuses_a_spec_without_neuron(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert load_spec(TRN1_SPEC).cluster.neuron is not None
    assert main([str(ALL_SPECS[0]), "--out", str(tmp_path / "w")]) == 2
    assert capsys.readouterr().err.strip().startswith("error: cluster.neuron: None in ")
    assert not (tmp_path / "w").exists()
