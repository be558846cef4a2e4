"""Guardrail SCPs: what no policy of these two accounts can say, because it is about calls nobody made yet.

The stacks cannot attach an SCP (that takes the organization's management account), so these are
shipped as documents: `python -m policies.guardrails [--spec FILE]` prints them for the organization's
administrators, and the access matrix evaluates them as its `scp` layer (spec perimeter.guardrail_scps).

- A new Internet-origin access point: the bucket policy delegates only to the spec's access point ARNs,
  but an access point that nobody may create is a stronger promise (and covers other buckets too).
- A presigned notebook URL opens the notebook's Jupyter from any browser that holds it: only through
  the VPC's sagemaker.api endpoint (aws:SourceVpce), or at least from the VPC (aws:SourceVpc).
- An SSM session on a node is a shell with the node's credentials, inside the VPC: only the spec's
  operator roles may start one.
"""

from __future__ import annotations

import json
import sys

from policies.documents import PolicyDocument, Statement, document, one_or_list, statement
from spec import DeploymentSpec, load_spec
from spec.cli import OneLineParser, user_errors
from spec.phase_two import example_warning

GUARDRAIL_POLICY_ID = "scp:guardrails"


def _notebook_url_condition(spec: DeploymentSpec) -> dict[str, dict[str, object]]:
    if spec.network.sagemaker_api_endpoint_id is not None:
        return {"StringNotEquals": {"aws:SourceVpce": spec.network.sagemaker_api_endpoint_id}}
    assert spec.network.vpc_id is not None  # guardrail_scps() is only asked once the VPC id is known
    return {"StringNotEquals": {"aws:SourceVpc": spec.network.vpc_id}}


def guardrail_scps(spec: DeploymentSpec) -> PolicyDocument | None:
    """The guardrail SCP for `spec`; None when the spec turns guardrails off."""
    if not spec.perimeter.guardrail_scps:
        return None
    statements: list[Statement] = [
        statement(
            "DenyAccessPointsOutsideVpc",
            "Deny",
            ["s3:CreateAccessPoint"],
            ["*"],
            # A request without the key (which S3 always sets on CreateAccessPoint) is refused as well.
            conditions={"StringNotEquals": {"s3:AccessPointNetworkOrigin": "VPC"}},
        )
    ]
    if spec.notebook.enabled and spec.network.vpc_id is not None:
        statements.append(
            statement(
                "DenyPresignedNotebookUrlsOutsideVpc",
                "Deny",
                ["sagemaker:CreatePresignedNotebookInstanceUrl"],
                [f"arn:aws:sagemaker:{spec.region}:{spec.accounts.compute}:notebook-instance/*"],
                conditions=_notebook_url_condition(spec),
            )
        )
    if spec.perimeter.operator_roles:
        statements.append(
            statement(
                "DenySessionsOnInstancesExceptOperators",
                "Deny",
                ["ssm:StartSession"],
                [f"arn:aws:ec2:{spec.region}:{spec.accounts.compute}:instance/*"],
                conditions={"ArnNotLike": {"aws:PrincipalArn": one_or_list(spec.perimeter.operator_roles)}},
            )
        )
    return document(*statements)


def notes(spec: DeploymentSpec) -> list[str]:
    """What the guardrails leave out for this spec, in words (printed with them)."""
    said = []
    if spec.notebook.enabled and spec.network.sagemaker_api_endpoint_id is None:
        said.append(
            "network.sagemaker_api_endpoint_id is unset: presigned notebook URLs are limited to the VPC "
            "(aws:SourceVpc), not yet to its sagemaker.api endpoint (aws:SourceVpce)"
        )
    if not spec.perimeter.operator_roles:
        said.append("perimeter.operator_roles is empty: SSM sessions on the nodes are left to IAM alone")
    return said


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description="Print the guardrail SCP of a deployment spec (JSON).")
    parser.add_argument("--spec", default=None, help="spec file (default: the embedded default spec)")
    args = parser.parse_args(argv)
    spec = load_spec(args.spec)
    # Synth's warning: an SCP built from the example ids would deny presigned notebook URLs everywhere.
    warning = example_warning(spec)
    if warning:
        print(warning, file=sys.stderr)
    policy = guardrail_scps(spec)
    if policy is None:
        print("perimeter.guardrail_scps is false: no guardrail SCP", file=sys.stderr)
        return 0
    print(json.dumps(policy, indent=2))
    for note in notes(spec):
        print(f"note: {note}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
