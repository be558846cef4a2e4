"""Builds every stack of a deployment spec into an app. app.py and the tests both call this."""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import App, Environment, Stack, Tags
from cdk_nag import AwsSolutionsChecks

from spec import DeploymentSpec
from stacks.artifacts_stack import ArtifactsStack
from stacks.cluster_stack import ClusterStack
from stacks.data_stack import DataStack
from stacks.identity_stack import IdentityStack
from stacks.network_stack import NetworkStack
from stacks.notebook_stack import NotebookStack
from stacks.observability_stack import ObservabilityStack


@dataclass
class Deployment:
    stacks: dict[str, Stack] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # stack key -> why it was not built


def assemble(app: App, spec: DeploymentSpec, nag: bool = True) -> Deployment:
    names = spec.stack_names
    compute = Environment(account=spec.accounts.compute, region=spec.region)
    data = Environment(account=spec.accounts.data, region=spec.region)
    deployment = Deployment()
    # The spec names the AZ; pre-seeding the context keeps synth from looking AZs up in the account.
    for env in (compute, data):
        app.node.set_context(
            f"availability-zones:account={env.account}:region={env.region}", [spec.network.availability_zone]
        )

    network = NetworkStack(app, names["network"], spec, env=compute, description=f"{spec.name}: compute VPC")
    deployment.stacks["network"] = network
    identity = IdentityStack(app, names["identity"], spec, env=compute, description=f"{spec.name}: compute roles")
    deployment.stacks["identity"] = identity
    if spec.network.vpc_id is None:
        deployment.skipped["data"] = (
            f"network.vpc_id is not set: deploy {names['network']} first, copy its VpcId output into the spec, "
            "then synthesize again (two-phase deploy)"
        )
    else:
        deployment.stacks["data"] = DataStack(
            app, names["data"], spec, env=data, description=f"{spec.name}: datasets and access points"
        )
    if spec.notebook.enabled:
        notebook = NotebookStack(
            app,
            names["notebook"],
            spec,
            network.network.compute_subnets[0],
            network.security_groups.notebook,
            env=compute,
            description=f"{spec.name}: VPC-only SageMaker notebook",
        )
        notebook.add_stack_dependency(identity, "the notebook assumes the notebook role by name")
        deployment.stacks["notebook"] = notebook

    if spec.cluster is not None:
        artifacts = ArtifactsStack(
            app,
            names["artifacts"],
            spec,
            env=compute,
            description=f"{spec.name}: the artifacts the nodes install from (wheelhouse, exporters, NxDT)",
        )
        artifacts.add_stack_dependency(identity, "its read policies name the node roles")
        deployment.stacks["artifacts"] = artifacts
        cluster = ClusterStack(
            app,
            names["cluster"],
            spec,
            network,
            env=compute,
            description=f"{spec.name}: ParallelCluster (SLURM) for training",
        )
        cluster.add_stack_dependency(identity, "the cluster's nodes run with the identity stack's roles")
        cluster.add_stack_dependency(artifacts, "the nodes install from the artifacts bucket at boot")
        deployment.stacks["cluster"] = cluster
        if spec.cluster.observability.managed_prometheus:
            observability = ObservabilityStack(
                app,
                names["observability"],
                spec,
                network,
                env=compute,
                description=f"{spec.name}: the cluster's metrics (Managed Prometheus, optional Managed Grafana)",
            )
            observability.add_stack_dependency(identity, "the head node's metrics policy names its role")
            cluster.add_stack_dependency(observability, "the head node reads the remote-write URL when it boots")
            deployment.stacks["observability"] = observability

    for stack in deployment.stacks.values():
        Tags.of(stack).add("deployment", spec.name)
    if nag:
        add_nag_packs(app, spec)
    return deployment


def add_nag_packs(app: App, spec: DeploymentSpec) -> None:
    """AWS Solutions and the data-perimeter pack as validation plugins: a finding fails synth."""
    from aws_cdk import Validations

    from stacks.nag.data_perimeter import DataPerimeterChecks

    Validations.of(app).add_plugins(AwsSolutionsChecks(app), DataPerimeterChecks(app, spec))
