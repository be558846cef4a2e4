"""`python -m stacks.summary [CDK_OUT] [--spec FILE]`: what a synthesized deployment holds, at a glance.

Reads the cloud assembly (manifest and templates) and the spec, and prints the stacks with their
accounts and resource counts, the access points, and who may read and write what.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from spec import DeploymentSpec, load_spec
from spec.cli import OneLineParser, user_errors
from spec.errors import UserError


def read_assembly(cdk_out: Path) -> dict[str, dict[str, Any]]:
    """Stack name -> {"environment": ..., "template": {...}} for every stack in the assembly."""
    manifest_path = cdk_out / "manifest.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{manifest_path}: no cloud assembly here; run `make synth` first")
    manifest = json.loads(manifest_path.read_text())
    stacks = {}
    for name, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        template_file = artifact["properties"]["templateFile"]
        stacks[name] = {
            "environment": artifact.get("environment", ""),
            "template": json.loads((cdk_out / template_file).read_text()),
        }
    return stacks


def render(spec: DeploymentSpec, stacks: dict[str, dict[str, Any]]) -> str:
    lines = [f"Deployment {spec.name} in {spec.region} (organization {spec.organization_id or 'none'})", ""]
    lines.append("Stacks")
    for name, stack in sorted(stacks.items()):
        resources = stack["template"].get("Resources", {})
        counts = Counter(r["Type"].split("::", 1)[-1] for r in resources.values() if r["Type"] != "AWS::CDK::Metadata")
        top = ", ".join(f"{n} {t}" for t, n in counts.most_common(4))
        lines.append(f"  {name:<24} {stack['environment']:<32} {sum(counts.values()):>3} resources ({top})")
    lines += ["", "Access points (VPC origin only: " + (spec.network.vpc_id or "VPC id not set yet") + ")"]
    for dataset in spec.data.datasets:
        lines.append(f"  {dataset.access_point:<28} s3://{spec.data.bucket_name}/{dataset.prefix}")
    lines += ["", "Who may do what (through the access points only)"]
    for dataset in spec.data.datasets:
        for reader in dataset.readers:
            lines.append(f"  {_who(spec, reader):<44} read   {dataset.prefix}")
        for writer in dataset.writers:
            lines.append(f"  {_who(spec, writer):<44} write  {dataset.output_prefix}")
    skipped = [n for n in ("data",) if spec.stack_names[n] not in stacks]
    if skipped:
        lines += ["", f"Not synthesized: {', '.join(skipped)} (set network.vpc_id; see README, two-phase deploy)"]
    return "\n".join(lines)


def _who(spec: DeploymentSpec, ref: str) -> str:
    return spec.role_arn(ref).split(":", 4)[-1]


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("cdk_out", nargs="?", default="cdk.out", type=Path)
    parser.add_argument("--spec", default=None, help="spec file (default: the embedded default spec)")
    args = parser.parse_args(argv)
    try:
        spec = load_spec(args.spec)
        stacks = read_assembly(args.cdk_out)
    except FileNotFoundError as error:
        raise UserError(str(error)) from None
    print(render(spec, stacks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
