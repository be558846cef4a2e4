"""A ParallelCluster build-image config for a Neuron AMI (for trn1 queues without internet egress).

Nodes with no route to the internet cannot reach Neuron's apt/yum and pip repositories, so the pinned
packages must already be in the AMI. `pcluster build-image` bakes them in once, in a build subnet
that does have egress:

    python -m cluster.image_config SPEC.yaml --parent-image ami-... --component-uri s3://.../neuron.sh > image.yaml
    python -m cluster.image_config SPEC.yaml --component --nxdt-wheelhouse s3://.../nxdt/2.26.1/ > neuron.sh
    pcluster build-image --image-id llm-neuron-2-26-1 --image-configuration image.yaml

(upload neuron.sh to the component URI; the NxDT wheelhouse is `make nxdt-wheelhouse`, synced to that
prefix) and the AMI id goes into `cluster.neuron.custom_ami`. cluster/bootstrap/neuron-image.yaml is this
output for spec/examples/trn1-neuron.yaml (a test keeps them equal).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

from spec.cli import OneLineParser, user_errors
from spec.cli_types import ami_id, s3_uri
from spec.errors import UserError
from spec.load import load_spec
from spec.model import DeploymentSpec
from spec.platform.neuron import neuron_pins, nxdt_stack

BOOTSTRAP_DIR = Path(__file__).resolve().parent / "bootstrap"
NEURON_INSTALL_SCRIPT = BOOTSTRAP_DIR / "neuron_install.sh"
NXDT_INSTALL_SCRIPT = BOOTSTRAP_DIR / "nxdt_install.sh"
PLACEHOLDER_PARENT_IMAGE = "ami-00000000000000000"
PLACEHOLDER_COMPONENT_URI = "s3://REPLACE-ME-assets-bucket/bootstrap/neuron_component.sh"


def image_id(spec: DeploymentSpec) -> str:
    assert spec.cluster is not None and spec.cluster.neuron is not None
    return f"{spec.name}-neuron-{spec.cluster.neuron.sdk_version.replace('.', '-')}"


def build_image_config(
    spec: DeploymentSpec,
    *,
    parent_image: str = PLACEHOLDER_PARENT_IMAGE,
    component_uri: str = PLACEHOLDER_COMPONENT_URI,
    build_instance_type: str = "trn1.2xlarge",
) -> dict[str, Any]:
    """The build-image config; parent_image should be a ParallelCluster AMI for the spec's OS."""
    if spec.cluster is None or spec.cluster.neuron is None:
        raise ValueError("cluster.neuron: None is required to build a Neuron image")
    return {
        "Image": {
            "Name": image_id(spec),
            "RootVolume": {"Size": 200, "Encrypted": True},
            "Tags": [
                {"Key": "deployment", "Value": spec.name},
                {"Key": "neuron-sdk", "Value": spec.cluster.neuron.sdk_version},
            ],
        },
        "Build": {
            "InstanceType": build_instance_type,
            "ParentImage": parent_image,
            "Components": [{"Type": "script", "Value": component_uri}],
            "UpdateOsPackages": {"Enabled": False},  # the kernel must stay the one aws-neuronx-dkms builds for
            "Imds": {"ImdsSupport": "v2.0"},
        },
    }


def render_component(spec: DeploymentSpec, nxdt_wheelhouse: str | None = None) -> str:
    """neuron_install.sh with the spec's pins set (Image Builder runs script components without arguments),
    then, given the S3 prefix of `make nxdt-wheelhouse`, nxdt_install.sh from it into the same venv."""
    assert spec.cluster is not None
    if spec.cluster.neuron is None:
        raise ValueError("cluster.neuron: None is required to build a Neuron image")
    pins = ",".join(f"{name}={version}" for name, version in neuron_pins(spec.cluster.neuron).items())
    if nxdt_wheelhouse is not None:
        nxdt_stack(spec.cluster.neuron)  # a release without an NxDT stack fails here, not in the image build
        if not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/(?:[^\s'\\]+/)?", nxdt_wheelhouse):
            raise ValueError(
                f"--nxdt-wheelhouse must be an S3 prefix such as s3://bucket/nxdt/2.26.1/, not {nxdt_wheelhouse!r}"
            )
    body = NEURON_INSTALL_SCRIPT.read_text()
    shebang, _, rest = body.partition("\n")
    header = f"# Rendered by cluster.image_config for Neuron SDK {spec.cluster.neuron.sdk_version}.\n"
    component = f"{shebang}\n{header}NEURON_PINS=${{NEURON_PINS:-{pins}}}\n{rest}"
    if nxdt_wheelhouse is None:
        return component
    nxdt = NXDT_INSTALL_SCRIPT.read_text()
    return (
        f"{component}\n# The NxDT stack, from its wheelhouse (cluster/bootstrap/nxdt_install.sh).\n"
        f'nxdt_script="$(mktemp)"\ncat >"$nxdt_script" <<\'NXDT_INSTALL\'\n{nxdt}NXDT_INSTALL\n'
        f'NXDT_WHEELHOUSE=\'{nxdt_wheelhouse}\' NEURON_VENV="$NEURON_VENV" bash "$nxdt_script"\n'
        'rm -f "$nxdt_script"\n'
    )


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description="Print the Neuron AMI build-image config (or its component).")
    parser.add_argument("spec", help="a spec with a cluster.neuron section")
    # The placeholders stay defaults (not run through the types): they are meant to be replaced.
    parser.add_argument("--parent-image", type=ami_id, help="ParallelCluster AMI id to start from")
    parser.add_argument("--component-uri", type=s3_uri, help="S3 URI of the rendered component")
    parser.add_argument("--build-instance-type", default="trn1.2xlarge")
    parser.add_argument("--component", action="store_true", help="print the install script component instead")
    parser.add_argument(
        "--nxdt-wheelhouse", type=s3_uri, help="S3 prefix of make nxdt-wheelhouse; the component installs it"
    )
    args = parser.parse_args(argv)
    try:
        spec = load_spec(args.spec)
        if args.component:
            print(render_component(spec, args.nxdt_wheelhouse), end="")
        else:
            config = build_image_config(
                spec,
                parent_image=args.parent_image or PLACEHOLDER_PARENT_IMAGE,
                component_uri=args.component_uri or PLACEHOLDER_COMPONENT_URI,
                build_instance_type=args.build_instance_type,
            )
            print(yaml.safe_dump(config, sort_keys=False), end="")
    except (ValueError, KeyError) as error:
        raise UserError(error.args[0] if isinstance(error, KeyError) else str(error)) from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
