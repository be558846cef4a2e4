"""The IAM principals this repo creates, one entry each: where to add one (docs/extending.md).

An entry says where the role lives, whether a deployment of the spec creates it, whom it trusts, the inline
policies its template must attach exactly as its builders produce them, the policies other stacks attach to it by
name, and which family of the access matrix's cases is its own. The verification reads this table and names no
principal itself: the extraction (which stacks' roles, the builders the templates must equal), the drift check, the
report's sections and the matrix's case families. tests/policies/verify/test_principal_coverage.py fails when a role
of the templates has no entry, or an entry lacks its role, its trust, a declared policy or a case allowing and one
denying it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from policies.artifacts import ARTIFACTS_POLICY_NAME, artifacts_read_policy
from policies.documents import PolicyDocument
from policies.identity import identity_policy
from policies.observability import GRAFANA_POLICY_NAME, grafana_trust_policy
from policies.operator import OPERATOR_POLICY_NAME, operator_session_policy, operator_trust_policy
from spec.model import OPERATOR_ROLE, DeploymentSpec

PolicyBuilder = Callable[[DeploymentSpec], PolicyDocument | None]


class RolePolicyBuilder(Protocol):
    """A builder shared by several roles, such as identity_policy(spec, role)."""

    def __call__(self, spec: DeploymentSpec, role: str) -> PolicyDocument | None: ...


def always(spec: DeploymentSpec) -> bool:
    return True


def service_trust(service: str) -> PolicyDocument:
    """A role that one AWS service assumes, as CDK renders `iam.ServicePrincipal(service)`."""
    statement = {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": service}}
    return {"Statement": [statement], "Version": "2012-10-17"}


@dataclass(frozen=True)
class PrincipalEntry:
    key: str  # the role is `<name>-<key>` (spec.role_name)
    stack: str  # the key in spec.stack_names of the stack whose template creates the role
    description: str
    created: Callable[[DeploymentSpec], bool]  # whether a deployment of the spec creates it
    trust: Callable[[DeploymentSpec], PolicyDocument]  # the role's AssumeRolePolicyDocument, exactly
    # Inline policy name -> builder: what the templates must attach exactly (the drift check, and the documents the
    # matrix evaluates for specs that are not synthesized). A builder returning None attaches nothing.
    exact_policies: Mapping[str, PolicyBuilder]
    # Policies built from deploy-time ARNs (not spec-only), attached by its own construct or by other stacks by role
    # name: fnmatch patterns.
    attached_elsewhere: tuple[str, ...] = ()
    # Its own family of matrix cases, "module:function" (a function of the spec and the MatrixContext returning
    # cases), its report section and that section's title; empty where the shared families (dataset grants,
    # platform) cover it.
    matrix_cases: str = ""
    case_group: str = ""
    case_group_title: str = ""
    account: Literal["compute"] = "compute"

    def role_name(self, spec: DeploymentSpec) -> str:
        return spec.role_name(self.key)

    def role_arn(self, spec: DeploymentSpec) -> str:
        return f"arn:aws:iam::{spec.accounts.compute}:role/{self.role_name(spec)}"

    def exact_documents(self, spec: DeploymentSpec) -> dict[str, PolicyDocument]:
        """Policy name -> document of the inline policies the template must attach, as the builders produce them."""
        built = {name: builder(spec) for name, builder in self.exact_policies.items()}
        return {name: document for name, document in built.items() if document is not None}


def for_role(builder: RolePolicyBuilder, key: str) -> PolicyBuilder:
    """A builder shared by several roles, bound to one of them."""
    return functools.partial(builder, role=key)


def builder_name(builder: PolicyBuilder) -> str:
    """`policies.identity.identity_policy`: where a reader finds the builder of a drifting document."""
    function = builder.func if isinstance(builder, functools.partial) else builder
    return f"{function.__module__}.{function.__qualname__}"


def _node_role(key: str, description: str, attached_elsewhere: tuple[str, ...]) -> PrincipalEntry:
    return PrincipalEntry(
        key=key,
        stack="identity",
        description=description,
        created=always,
        trust=lambda spec: service_trust("ec2.amazonaws.com"),
        exact_policies={
            "datasets": for_role(identity_policy, key),
            ARTIFACTS_POLICY_NAME: for_role(artifacts_read_policy, key),
        },
        attached_elsewhere=attached_elsewhere,
    )


PRINCIPALS: tuple[PrincipalEntry, ...] = (
    # The cluster stack attaches ParallelCluster's daemons' needs, the observability stack the head node's metrics.
    _node_role("cluster-node", "ParallelCluster compute nodes (stacks/identity_stack.py)", ("parallelcluster",)),
    _node_role(
        "head-node", "ParallelCluster head node (stacks/identity_stack.py)", ("parallelcluster", "cluster-metrics")
    ),
    PrincipalEntry(
        key="notebook",
        stack="identity",
        description="The SageMaker notebook (stacks/identity_stack.py), when notebook.enabled",
        created=lambda spec: spec.notebook.enabled,
        trust=lambda spec: service_trust("sagemaker.amazonaws.com"),
        exact_policies={"datasets": for_role(identity_policy, "notebook")},
        # CDK's default policy of the role: the notebook's own log group (add_to_policy in the identity stack).
        attached_elsewhere=("NotebookRoleDefaultPolicy*",),
    ),
    PrincipalEntry(
        key=OPERATOR_ROLE,
        stack="identity",
        description="SSM sessions on the cluster's nodes (stacks/parts/operator_role.py), when the spec names it",
        created=lambda spec: spec.creates_operator_role,
        trust=operator_trust_policy,
        exact_policies={OPERATOR_POLICY_NAME: operator_session_policy},
        matrix_cases="policies.verify.matrix.cases.operators:operator_cases",
        case_group="operators",
        case_group_title=(
            "The operator role: SSM sessions on this cluster's nodes, and no dataset (policies/operator.py)"
        ),
    ),
    PrincipalEntry(
        key="grafana",
        stack="observability",
        description="Managed Grafana's workspace role (stacks/parts/managed_grafana.py), when managed_grafana",
        created=lambda spec: spec.cluster is not None and spec.cluster.observability.managed_grafana,
        trust=grafana_trust_policy,
        exact_policies={},
        # It names the Prometheus workspace, whose ARN exists only once CloudFormation made it.
        attached_elsewhere=(GRAFANA_POLICY_NAME,),
        matrix_cases="policies.verify.matrix.cases.grafana:grafana_cases",
        case_group="grafana",
        case_group_title=(
            "The Grafana workspace's role: queries this cluster's metrics, and no dataset (policies/observability.py)"
        ),
    ),
)


def principal(key: str) -> PrincipalEntry:
    for entry in PRINCIPALS:
        if entry.key == key:
            return entry
    raise KeyError(f"no principal {key!r} in policies/principals.py (known: {', '.join(e.key for e in PRINCIPALS)})")


def queue_role_entry(key: str) -> PrincipalEntry:
    """The node role of a queue with allowed_groups (`queue-<queue>`): one per such queue of the spec, so they are
    entries made from the spec rather than rows of PRINCIPALS; the dataset grant cases cover them."""
    entry = _node_role(
        key, f"ParallelCluster compute nodes of queue {key.removeprefix('queue-')}", ("parallelcluster",)
    )
    return replace(entry, created=lambda spec: key in spec.queue_roles)


def created_principals(spec: DeploymentSpec, entries: tuple[PrincipalEntry, ...] = PRINCIPALS) -> list[PrincipalEntry]:
    """The entries a deployment of `spec` creates, in registry order, then each restricted queue's role."""
    return [entry for entry in entries if entry.created(spec)] + [queue_role_entry(key) for key in spec.queue_roles]
