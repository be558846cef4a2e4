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


def test_the_docs_unpack_nxdt_examples_where_the_neuron_jobs_look_for_them(tmp_path: Path) -> None:
    """docs/jobs.md's block, as the head node's user runs it: it copies the tarball the mirror step packs from the one
    object of the NxDT folder the head-node role may read, creates the folder and unpacks the launcher into the
    default --nxdt-dir. Run here with /fsx in a scratch directory and the copied tarball put in place."""
    import subprocess
    import sys

    from launch.scripts import default_nxdt_dir
    from policies.artifacts import objects_read_by
    from spec.artifacts import NXDT_EXAMPLES, artifact_locations

    text = (Path(__file__).resolve().parents[2] / "docs" / "jobs.md").read_text()
    blocks = [b for b in re.findall(r"```bash head-node\n(.*?)```", text, flags=re.S) if NXDT_EXAMPLES in b]
    assert len(blocks) == 1, "docs/jobs.md: one head-node block unpacks nxdt-examples.tar.gz"
    lines = [line.strip() for line in blocks[0].splitlines()]
    (copy,) = [line for line in lines if line.startswith("aws s3 cp ")]
    copied = re.fullmatch(r'aws s3 cp "s3://\$BUCKET/(\S+)" (\S+)/ --region us-east-1', copy)
    assert copied is not None
    spec = load_spec(TRN1_SPEC)
    nxdt = artifact_locations(spec).nxdt_wheelhouse
    assert nxdt is not None and copied.group(1) == nxdt.prefix + NXDT_EXAMPLES
    assert ("NxdtExamples", nxdt.object_arn(NXDT_EXAMPLES)) in objects_read_by(spec, "head-node")

    checkout = tmp_path / "src" / "neuronx-distributed-training"
    (checkout / "examples" / "conf").mkdir(parents=True)
    (checkout / "examples" / "training_orchestrator.py").write_text("# NxDT's launcher\n")
    tar = examples_commands(tmp_path / "src", tmp_path / "out")[-1]
    (tmp_path / "out").mkdir()
    subprocess.run(tar, check=True)
    fsx = tmp_path / "fsx"
    home = tmp_path / "llm-training"
    (home / ".venv" / "bin").mkdir(parents=True)
    (home / ".venv" / "bin" / "python").symlink_to(sys.executable)
    after_copy = lines[lines.index(copy) + 1 :]
    before_copy = [line for line in lines[: lines.index(copy)] if not line.startswith("BUCKET=")]
    script = "\n".join([*before_copy, f'cp {tmp_path}/out/{NXDT_EXAMPLES} "{copied.group(2)}/"', *after_copy])
    subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script.replace("/fsx/", f"{fsx}/")],
        env={"PATH": "/usr/bin:/bin", "LLM_TRAINING_HOME": str(home)},
        check=True,
    )
    launcher = Path(default_nxdt_dir(str(fsx))) / "training_orchestrator.py"
    assert launcher.read_text() == "# NxDT's launcher\n"
