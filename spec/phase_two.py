"""Phase two of a deploy: `llm-phase-two SPEC.yaml --outputs-file network-outputs.json` (or without the file, from
CloudFormation with the caller's AWS credentials).

The data account's access points must name the compute VPC and its S3 gateway endpoint, and CloudFormation cannot
pass a value from one account to another, so the spec carries them (README, "Why two phases"). Once the network
stack is deployed, this reads its outputs, either the file `npx cdk deploy --outputs-file` writes
({"<stack>": {"<OutputKey>": "<value>"}}) or the stack itself through boto3, writes them into the spec's
`network` section (only those values change: comments and layout stay), validates the result like any spec and
prints the diff. `--dry-run` prints the diff only.

The output names are defined here and used by stacks.network_stack, so the stack and this command cannot drift.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from spec.cli import OneLineParser, user_errors
from spec.cli_types import profile_name
from spec.errors import SpecError, SpecProblem, UserError, not_utf8_text
from spec.load import parse_spec
from spec.model import DeploymentSpec
from spec.yaml_edit import set_scalars
from spec.yaml_file import parse_yaml, read_text

# The network stack's outputs that phase two copies, and the `network` field each one feeds.
VPC_ID_OUTPUT = "VpcId"
S3_GATEWAY_ENDPOINT_OUTPUT = "S3GatewayEndpointId"
SAGEMAKER_API_ENDPOINT_OUTPUT = "SageMakerApiEndpointId"
NETWORK_OUTPUTS: dict[str, str] = {
    VPC_ID_OUTPUT: "vpc_id",
    S3_GATEWAY_ENDPOINT_OUTPUT: "s3_gateway_endpoint_id",
    SAGEMAKER_API_ENDPOINT_OUTPUT: "sagemaker_api_endpoint_id",
}
# Emitted only when the VPC has a sagemaker.api endpoint (the notebook); without it the field is cleared.
OPTIONAL_OUTPUTS = frozenset({SAGEMAKER_API_ENDPOINT_OUTPUT})

# The example values of spec/default.yaml and spec/examples/: they let synth run offline and must never be deployed.
EXAMPLE_ACCOUNTS = ("111111111111", "222222222222")
EXAMPLE_MARK = "# example"  # the comment beside each example id; phase two drops it with the id
EXAMPLE_IDS: dict[str, str] = {
    "vpc_id": "vpc-0123456789abcdef0",
    "s3_gateway_endpoint_id": "vpce-0123456789abcdef0",
    "sagemaker_api_endpoint_id": "vpce-0fedcba9876543210",
}


class OutputsError(UserError):
    """The network stack's outputs cannot be read; one line naming the file or stack and what is wrong."""


def example_warning(spec: DeploymentSpec) -> str | None:
    """One line when the spec still holds the example accounts or phase-two ids, else None."""
    parts = []
    accounts = [a for a in (spec.accounts.compute, spec.accounts.data) if a in EXAMPLE_ACCOUNTS]
    if accounts:
        parts.append(f"the example accounts ({', '.join(accounts)})")
    ids = [f"network.{field}" for field, example in EXAMPLE_IDS.items() if getattr(spec.network, field) == example]
    if ids:
        parts.append(f"example ids in {', '.join(ids)}")
    if not parts:
        return None
    return (
        f"warning: {spec.name}: the spec holds {' and '.join(parts)}: fine for synth, not for a deploy; put in your "
        "accounts, deploy the network stack, then run llm-phase-two (README, Deploying for real)"
    )


def read_outputs_file(path: Path, stack: str) -> dict[str, str]:
    """The outputs of `stack` in a file written by `npx cdk deploy --outputs-file`."""
    try:
        document = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as failure:
        raise OutputsError(f"--outputs-file: {str(path)!r} cannot be read: {failure.strerror}") from None
    except UnicodeDecodeError as failure:
        raise OutputsError(f"--outputs-file: {str(path)!r} {not_utf8_text(failure)}") from None
    except RecursionError:
        raise OutputsError(f"--outputs-file: {str(path)!r} nests too deeply to be a CDK outputs file") from None
    except json.JSONDecodeError as failure:
        raise OutputsError(
            f"--outputs-file: {str(path)!r} is not JSON (line {failure.lineno}): {failure.msg}"
        ) from None
    if not isinstance(document, dict) or not all(isinstance(v, dict) for v in document.values()):
        raise OutputsError(
            f"--outputs-file: {str(path)!r} is not what `npx cdk deploy --outputs-file` writes "
            '({"<stack>": {"<OutputKey>": "<value>"}})'
        )
    if stack not in document:
        present = ", ".join(sorted(document)) or "none"
        raise OutputsError(
            f"--outputs-file: {str(path)!r} has no stack {stack!r} (it has: {present}); deploy {stack} with "
            "--outputs-file"
        )
    return {str(key): str(value) for key, value in document[stack].items()}


def read_stack_outputs(stack: str, region: str, profile: str | None) -> dict[str, str]:
    """The outputs of the deployed `stack`, read from CloudFormation with the caller's credentials."""
    import boto3
    import botocore.exceptions

    try:
        session = boto3.Session(profile_name=profile, region_name=region)
        if session.get_credentials() is None:
            which = f"--profile: {profile!r} gives" if profile else "no --profile, and the environment gives"
            raise OutputsError(
                f"{which} no AWS credentials; pass the compute account's profile, or --outputs-file with the "
                "file `npx cdk deploy --outputs-file` wrote"
            )
        described = session.client("cloudformation").describe_stacks(StackName=stack)
    except botocore.exceptions.ProfileNotFound:
        raise OutputsError(f"--profile: {profile!r} is not a profile of the AWS CLI's config") from None
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as failure:
        detail = " ".join(str(failure).split())
        raise OutputsError(f"stack {stack!r} in {region}: cannot be described: {detail}") from None
    (description,) = described["Stacks"]
    return {item["OutputKey"]: item["OutputValue"] for item in description.get("Outputs", [])}


def phase_two_values(outputs: Mapping[str, str], stack: str) -> dict[str, str | None]:
    """The `network` fields to set from the network stack's outputs."""
    missing = [name for name in NETWORK_OUTPUTS if name not in outputs and name not in OPTIONAL_OUTPUTS]
    if missing:
        raise OutputsError(
            f"stack {stack!r}: outputs {', '.join(missing)} are missing (it has: {', '.join(sorted(outputs)) or 'none'}); "
            "is it this spec's network stack, deployed?"
        )
    return {field: outputs.get(name) for name, field in NETWORK_OUTPUTS.items()}


def apply_phase_two(text: str, values: Mapping[str, str | None], source: str) -> tuple[str, DeploymentSpec]:
    """The spec text with the values set, and the spec it now is (validated: a bad id fails here)."""
    new_text = set_scalars(text, "network", values, source, drop_mark=EXAMPLE_MARK)
    try:
        document = yaml.safe_load(new_text)
    except yaml.YAMLError:  # set_scalars writes only plain or quoted scalars; kept as one line anyway
        raise SpecError([SpecProblem("<file>", "is not valid YAML after the edit", source)], source) from None
    return new_text, parse_spec(document, source)


def show_diff(old: str, new: str, path: str) -> str:
    return "".join(
        difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}")
    )


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(
        prog="llm-phase-two", description="Write the network stack's outputs (phase two of a deploy) into a spec."
    )
    parser.add_argument("spec", type=Path, help="the deployment spec to update in place")
    parser.add_argument(
        "--outputs-file",
        type=Path,
        help="the JSON `npx cdk deploy --outputs-file` wrote; without it the stack is read from CloudFormation",
    )
    parser.add_argument(
        "--profile", type=profile_name, help="AWS profile of the compute account (without --outputs-file)"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the diff, leave the file as it is")
    args = parser.parse_args(argv)
    path: Path = args.spec
    source = str(path)
    text = read_text(path, "<file>", lambda problems: SpecError(problems, source))
    spec = parse_spec(parse_yaml(text, "<file>", source, lambda problems: SpecError(problems, source)), source)
    stack = spec.stack_names["network"]
    if args.outputs_file is not None:
        outputs = read_outputs_file(args.outputs_file, stack)
        origin = str(args.outputs_file)
    else:
        outputs = read_stack_outputs(stack, spec.region, args.profile)
        origin = f"stack {stack}"
    new_text, _ = apply_phase_two(text, phase_two_values(outputs, stack), source)
    if new_text == text:
        print(f"{source}: the phase-two fields already hold the outputs of {origin}")
        return 0
    print(show_diff(text, new_text, source), end="")
    if args.dry_run:
        print(f"{source}: not written (--dry-run)")
        return 0
    path.write_text(new_text, encoding="utf-8")
    print(f"{source}: written; next: deploy {spec.stack_names['data']} (README, Deploying for real)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
