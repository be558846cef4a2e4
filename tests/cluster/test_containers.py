"""The NeMo image path without internet: the spec's image rules, the ECR pull permission of the GPU nodes, and
the push/import steps (the import script runs for real against stand-ins for `aws` and `enroot`)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from cluster.containers import IMPORT_SCRIPT, import_command, import_environment, main, push_commands
from cluster.verify.local_slurm.install import ensure_shellcheck
from policies.cluster_nodes import compute_node_cluster_policy, container_pull_statements
from spec import SpecError, load_spec, parse_spec
from spec.containers import parse_ecr_image, pyxis_image

REPO = Path(__file__).resolve().parents[2]
DEFAULT = load_spec(None)
ECR = "111111111111.dkr.ecr.us-east-1.amazonaws.com/llm-nemo-efa:26.08-efa1.43.2"
SQSH = "/fsx/containers/llm-nemo-efa-26.08-efa1.43.2.sqsh"


def _with_image(image: str, **containers: str) -> dict:
    data = yaml.safe_load((REPO / "spec" / "default.yaml").read_text())
    data["cluster"]["containers"].update(nemo_image=image, **containers)
    return data


def test_the_default_spec_runs_the_sqsh_on_fsx_and_no_example_names_an_unreachable_registry() -> None:
    assert DEFAULT.cluster is not None and DEFAULT.cluster.containers.nemo_image == SQSH
    for path in sorted((REPO / "spec" / "examples").glob("*.yaml")):
        image = load_spec(path).cluster.containers.nemo_image  # type: ignore[union-attr]
        assert image.endswith(".sqsh") or parse_ecr_image(image) is not None, path


@pytest.mark.parametrize(
    ("image", "extra", "message"),
    [
        ("nvcr.io/nvidia/nemo:25.07", {}, "the cluster's VPC cannot reach nvcr.io"),
        ("nemo:25.07", {}, "the cluster's VPC cannot reach docker.io"),
        (ECR.replace("111111111111", "222222222222"), {}, "is in account 222222222222, not the compute account"),
        (ECR.replace("us-east-1", "us-west-2"), {}, "is in region us-west-2, not the deployment region us-east-1"),
        (ECR, {"ecr_repository": "other"}, "is not in cluster.containers.ecr_repository (other)"),
        ("/home/me/nemo.sqsh", {}, "is not on the shared file system (/fsx)"),
    ],
)
def test_images_the_nodes_cannot_reach_are_refused_with_the_field_named(image: str, extra: dict, message: str) -> None:
    with pytest.raises(SpecError) as error:
        parse_spec(_with_image(image, **extra))
    assert "cluster.containers.nemo_image" in str(error.value) and message in str(error.value)


def test_pyxis_gets_the_registry_before_a_hash() -> None:
    assert pyxis_image(ECR) == "111111111111.dkr.ecr.us-east-1.amazonaws.com#llm-nemo-efa:26.08-efa1.43.2"
    assert pyxis_image(SQSH) == SQSH
    assert pyxis_image("nvcr.io#nvidia/nemo:25.07") == "nvcr.io#nvidia/nemo:25.07"


def test_gpu_nodes_may_pull_only_the_specs_repository() -> None:
    token, pull = container_pull_statements(DEFAULT)
    assert (token["Action"], token["Resource"]) == ("ecr:GetAuthorizationToken", "*")
    assert pull["Resource"] == "arn:aws:ecr:us-east-1:111111111111:repository/llm-nemo-efa"
    assert set(pull["Action"]) == {"ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"}
    statements = compute_node_cluster_policy(DEFAULT, ["arn:aws:s3:::assets/x"])["Statement"]
    assert pull in statements and token in statements


def test_push_builds_from_the_dockerfile_and_pushes_to_the_compute_accounts_ecr() -> None:
    build, create, login, push = push_commands(DEFAULT)
    assert build == [
        "docker",
        "build",
        "--platform",
        "linux/amd64",
        "--tag",
        ECR,
        # The spec's cluster.containers.nemo_framework picks the base and what the build proves imports.
        "--build-arg",
        "NEMO_IMAGE=nvcr.io/nvidia/nemo:26.08",
        "--build-arg",
        "FRAMEWORK_MODULE=megatron.bridge",
        str(REPO / "containers" / "nemo-efa"),
    ]
    assert "--image-tag-mutability IMMUTABLE" in create[2] and "scanOnPush=true" in create[2]
    assert "docker login --username AWS --password-stdin 111111111111.dkr.ecr.us-east-1.amazonaws.com" in login[2]
    assert push == ["docker", "push", ECR]
    dockerfile = (REPO / "containers" / "nemo-efa" / "Dockerfile").read_text()
    assert "ARG NEMO_IMAGE=nvcr.io/nvidia/nemo:26.08" in dockerfile and "ARG EFA_INSTALLER_VERSION=1.43.2" in dockerfile
    assert "/opt/amazon/ofi-nccl/lib" in dockerfile


def test_the_pinned_nemo_2507_choice_builds_from_its_own_container() -> None:
    data = yaml.safe_load((REPO / "spec" / "default.yaml").read_text())
    data["cluster"]["containers"] = {"nemo_framework": "nemo-25.07"}
    spec = parse_spec(data)
    assert spec.cluster is not None
    assert spec.cluster.containers.nemo_image == "/fsx/containers/llm-nemo-efa-25.07.00-efa1.43.2.sqsh"
    build = push_commands(spec)[0]
    assert build[build.index("--tag") + 1].endswith("/llm-nemo-efa:25.07.00-efa1.43.2")
    assert "NEMO_IMAGE=nvcr.io/nvidia/nemo:25.07.00" in build and "FRAMEWORK_MODULE=nemo.collections.llm" in build


def test_import_runs_on_one_gpu_node_and_writes_the_sqsh_atomically(tmp_path: Path) -> None:
    command = import_command(DEFAULT, "gpu")
    assert command[:4] == ["srun", "--partition=gpu", "--nodes=1", "--ntasks=1"]
    script = tmp_path / "import.sh"
    script.write_text("#!/bin/bash\n" + IMPORT_SCRIPT)
    assert subprocess.run([ensure_shellcheck(), str(script)], capture_output=True, check=False).returncode == 0

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(
        '#!/bin/bash\n[[ "$*" == "ecr get-login-password --region us-east-1" ]] && echo TOKEN\n'
    )
    # enroot stand-in: records its credentials file and writes the output it is asked for.
    (bin_dir / "enroot").write_text(
        '#!/bin/bash\ncp "$ENROOT_CONFIG_PATH/.credentials" "$SEEN"\necho "$*" >>"$SEEN"\necho squashfs >"$3"\n'
    )
    for tool in ("aws", "enroot"):
        (bin_dir / tool).chmod(0o755)
    env = {**import_environment(DEFAULT), "OUTPUT": str(tmp_path / "fsx" / "nemo.sqsh"), "SEEN": str(tmp_path / "seen")}
    env["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
    result = subprocess.run(["bash", "-c", IMPORT_SCRIPT], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "fsx" / "nemo.sqsh").read_text() == "squashfs\n"
    assert not (tmp_path / "fsx" / "nemo.sqsh.partial").exists()
    assert (tmp_path / "seen").read_text().splitlines() == [
        "machine 111111111111.dkr.ecr.us-east-1.amazonaws.com login AWS password TOKEN",
        f"import --output {tmp_path}/fsx/nemo.sqsh.partial "
        "docker://111111111111.dkr.ecr.us-east-1.amazonaws.com#llm-nemo-efa:26.08-efa1.43.2",
    ]


def test_cli_dry_run_prints_the_steps_for_the_deployed_spec(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LLM_TRAINING_SPEC", raising=False)
    assert main(["import", "--dry-run"]) == 0
    assert capsys.readouterr().err.startswith("+ srun --partition=gpu --nodes=1")
    # On the head node the deployed spec decides; the trn1 example has no GPU queue to import on.
    monkeypatch.setenv("LLM_TRAINING_SPEC", str(REPO / "spec" / "examples" / "trn1-neuron.yaml"))
    with pytest.raises(SystemExit, match="no GPU queue to import the image on"):
        main(["import", "--dry-run"])


def test_push_runs_every_aws_call_with_the_profile_it_is_given() -> None:
    """`make nemo-image PROFILE=compute` (docs/containers.md): the ECR calls use the compute account's profile."""
    scripts = "\n".join(command[2] for command in push_commands(DEFAULT, profile="compute") if command[0] == "bash")
    calls = re.findall(r"aws ecr [a-z-]+[^|>&\n]*", scripts)
    assert len(calls) == 3 and all("--profile compute" in call for call in calls), calls
    assert "--profile" not in str(push_commands(DEFAULT))  # none given: the environment's credentials
    dry = subprocess.run(
        ["make", "-n", "--no-print-directory", "nemo-image", "SPEC=my.yaml", "PROFILE=compute"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "-m cluster.containers push --spec my.yaml --profile compute" in dry


def test_the_image_carries_lm_eval_at_the_nodes_pin_without_moving_the_frameworks_packages() -> None:
    dockerfile = (REPO / "containers" / "nemo-efa" / "Dockerfile").read_text()
    node_pin = next(
        line for line in (REPO / "requirements-node.txt").read_text().splitlines() if line.startswith("lm-eval==")
    )
    assert f"ARG LM_EVAL_VERSION={node_pin.split('==')[1]}" in dockerfile
    # The image's own packages constrain the install: lm-eval joins NeMo's stack, it never upgrades it.
    assert "pip list --format=freeze > /tmp/image-packages.txt" in dockerfile  # name==version only
    assert '"lm-eval==${LM_EVAL_VERSION}" -c /tmp/image-packages.txt' in dockerfile
    assert "import lm_eval" in dockerfile
