"""Operator cases: the role `<name>-operator` (policies/operator.py) opens sessions on this cluster's nodes, ends its
own, and reaches none of the datasets; with cluster.users, only through the run-as document (each session as its
caller's own account), never Session Manager's default shell (ssm-user, a sudoer)."""

from __future__ import annotations

from policies.cluster_nodes import CLUSTER_TAG
from policies.operator import SHELL_DOCUMENT, run_as_document_name, runs_as_users
from policies.verify.harness.layers import IDENTITY
from policies.verify.harness.model import ApiRequest, Principal
from policies.verify.matrix.cases.common import no_dataset_reads
from policies.verify.matrix.model import Case, MatrixContext, implicit
from spec import DeploymentSpec
from spec.model import OPERATOR_ROLE

# The caller ids of two people who assumed the operator role (aws:userid of an assumed role: role id, session name).
OPERATOR_USERID = "AROAOPERATOREXAMPLE01:alice"
OTHER_USERID = "AROAOPERATOREXAMPLE01:bob"
SESSION_TAG = "ssm:resourceTag/aws:ssmmessages:session-id"


def operator_cases(spec: DeploymentSpec, context: MatrixContext) -> list[Case]:
    """Only when the identity stack creates the role (perimeter.operator_roles names it)."""
    if not spec.creates_operator_role:
        return []
    region, compute = spec.region, spec.accounts.compute
    operator = Principal(
        "operator role", spec.operator_role_arn, spec.organization_id, role=spec.role_name(OPERATOR_ROLE)
    )
    instance = f"arn:aws:ec2:{region}:{compute}:instance/i-0123456789abcdef0"
    session = f"arn:aws:ssm:{region}:{compute}:session/alice-0123456789abcdef0"

    def start(cluster: str) -> ApiRequest:
        # From the operator's workstation (no VPC endpoint), on an instance carrying ParallelCluster's tag.
        return ApiRequest(
            operator,
            "ssm:StartSession",
            instance,
            compute,
            None,
            "instance",
            ((f"ssm:resourceTag/{CLUSTER_TAG}", cluster),),
        )

    def end(started_by: str) -> ApiRequest:
        context = (("aws:userid", OPERATOR_USERID), (SESSION_TAG, started_by))
        return ApiRequest(operator, "ssm:TerminateSession", session, compute, None, "session", context)

    def document(name: str) -> ApiRequest:
        arn = f"arn:aws:ssm:{region}:{compute}:document/{name}"
        return ApiRequest(operator, "ssm:StartSession", arn, compute, None, "document")

    shell = run_as_document_name(spec) if runs_as_users(spec) else SHELL_DOCUMENT
    cases = [
        Case(
            "operator/session-on-a-cluster-node",
            "operators",
            "the operator role opens an SSM session on a node of this cluster",
            start(spec.name),
            {},
            why="the way in for people: no SSH, no bastion",
        ),
        Case(
            "operator/session-on-another-instance",
            "operators",
            "the operator role opens an SSM session on an instance of another cluster",
            start("another-cluster"),
            implicit(IDENTITY),
            why="the role reaches this cluster's nodes only (ParallelCluster's cluster-name tag)",
        ),
        Case(
            "operator/session-document",
            "operators",
            f"the operator role's session runs Session Manager's shell document {shell}",
            document(shell),
            {},
            why="a session needs its document as well as its instance"
            + ("; with cluster.users, the run-as one: the caller's own account" if shell != SHELL_DOCUMENT else ""),
        ),
        Case(
            "operator/end-own-session",
            "operators",
            "an operator ends a session it started",
            end(OPERATOR_USERID),
            {},
            why="sessions are ended by the one who started them",
        ),
        Case(
            "operator/end-another-callers-session",
            "operators",
            "an operator ends a session someone else started",
            end(OTHER_USERID),
            implicit(IDENTITY),
            why="another person's session is theirs (aws:ssmmessages:session-id)",
        ),
    ]
    if runs_as_users(spec):
        cases.append(
            Case(
                "operator/default-shell-document",
                "operators",
                f"with cluster.users, the operator role's session runs Session Manager's default {SHELL_DOCUMENT}",
                document(SHELL_DOCUMENT),
                implicit(IDENTITY),
                why="the default shell runs as ssm-user, one sudoer for everyone: sessions run as their caller",
            )
        )
    cases += no_dataset_reads(
        spec,
        operator,
        "operator",
        "operators",
        "the operator role",
        "a shell on a node is not a grant: the datasets are the node roles' alone",
    )
    return cases
