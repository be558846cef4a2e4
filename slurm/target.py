"""Where a job runs: the SLURM partition and what its nodes have, from the deployment spec's cluster section
(queue -> instance type -> accelerators, EFA, shared storage, container image, Neuron SDK) or from the
explicit local profile (the CPU cluster of `python -m cluster.verify.local_slurm`, whose node is
spec.platform.instances.LOCAL_INSTANCE).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurm.backends import BACKENDS, TrainingBackend, resolve_backend
from slurm.errors import SubmitError
from spec import DeploymentSpec
from spec.cluster import NeuronSpec
from spec.platform.instances import LOCAL_INSTANCE, InstanceFacts, UnknownInstanceType, instance_facts

LOCAL_PARTITION = "local"


@dataclass(frozen=True)
class Target:
    partition: str
    queue: str
    instance: InstanceFacts
    efa: bool
    shared_dir: str | None  # the cluster's shared file system (/fsx); None on the local cluster
    container_image: str | None = None
    # The spec's cluster.containers.nemo_framework (spec.containers.FRAMEWORKS) for the nemo backend.
    nemo_framework: str | None = None
    pyxis: bool = False
    neuron: NeuronSpec | None = None
    local: bool = False
    # The backend the job runs (slurm.backends): --backend resolved by the spec's container framework.
    backend: TrainingBackend = field(default_factory=lambda: BACKENDS["fsdp"])
    # s3://<access point ARN>/<output prefix>: where every job copies its checkpoints (spec data.checkpoint_replica).
    checkpoint_replica: str | None = None

    @property
    def workers_per_node(self) -> int:
        """One process per GPU, per NeuronCore, or one per CPU node."""
        return max(1, self.instance.workers_per_node)

    @property
    def devices_per_node(self) -> int:
        """Memory domains the model states are sharded over: GPUs, Trainium chips, or the CPU node itself."""
        return max(1, self.instance.accelerators_per_node)

    @property
    def gpus_per_node(self) -> int:
        """The GPUs a job asks Slurm for: every NVIDIA GPU of the node, the GRES ParallelCluster declares for it
        (cluster/slurm_naming.json, gpu_request). 0 on Trainium (no GRES) and on the local CPU cluster."""
        return self.instance.accelerators_per_node if self.instance.accelerator == "gpu" and not self.local else 0

    def whole_node_directives(self) -> list[tuple[str, str | None]]:
        """`--exclusive` (every CPU, accelerator and EFA interface) plus the node's GPUs, so that Slurm accounts
        them (sacct's AllocTRES gres/gpu, QoS limits on gres/gpu): --exclusive alone allocates no GRES.
        The local cluster's nodes are shared CPU slots: nothing."""
        if self.local:
            return []
        directives: list[tuple[str, str | None]] = [("exclusive", None)]
        if self.gpus_per_node:
            directives.append(("gpus-per-node", str(self.gpus_per_node)))
        return directives

    @property
    def device_memory_gib(self) -> float:
        if self.instance.accelerator == "none":
            return self.instance.memory_gib
        return self.instance.accelerator_memory_gib


def local_target() -> Target:
    return Target(
        partition=LOCAL_PARTITION,
        queue=LOCAL_PARTITION,
        instance=LOCAL_INSTANCE,
        efa=False,
        shared_dir=None,
        local=True,
    )


def resolve_target(spec: DeploymentSpec, backend: str, queue_name: str | None, partition: str | None) -> Target:
    """The queue's target for `--backend backend`; `partition` overrides only the SLURM partition the script is
    sent to."""
    cluster = spec.cluster
    running = resolve_backend(backend, cluster.containers.nemo_framework if cluster is not None else None)
    if cluster is None:
        raise SubmitError(f"--spec: spec {spec.name!r} has no cluster section (add one, or use --local)")
    wanted = running.accelerator
    if queue_name is None:
        matching = [q for q in cluster.queues if _accelerator(q.instance_type) == wanted]
        if not matching:
            known = ", ".join(f"{q.name} ({q.instance_type})" for q in cluster.queues)
            raise SubmitError(f"--queue: no {wanted} queue in the spec for --backend {backend} (queues: {known})")
        queue = matching[0]
    else:
        try:
            queue = cluster.queue(queue_name)
        except KeyError as error:
            raise SubmitError(f"--queue: {error.args[0]}") from None
    facts = _facts(queue.instance_type)
    if facts.accelerator != wanted:
        raise SubmitError(
            f"--queue: {queue.name!r} runs {facts.name} ({facts.accelerator} accelerators); "
            f"--backend {backend} needs a {wanted} queue"
        )
    running.check_target(cluster, facts, queue.name)
    return Target(
        partition=partition or queue.name,
        queue=queue.name,
        instance=facts,
        efa=queue.efa_enabled(facts.efa_capable),
        shared_dir=cluster.fsx.mount_dir if cluster.fsx is not None else None,
        container_image=cluster.containers.nemo_image if running.entry_point else None,
        nemo_framework=cluster.containers.nemo_framework if running.entry_point else None,
        pyxis=cluster.containers.pyxis,
        neuron=cluster.neuron,
        backend=running,
        checkpoint_replica=_checkpoint_replica(spec),
    )


def _checkpoint_replica(spec: DeploymentSpec) -> str | None:
    dataset = spec.checkpoint_dataset
    if dataset is None or dataset.output_prefix is None:
        return None
    return f"s3://{spec.access_point_arn(dataset)}/{dataset.output_prefix}"


def _facts(instance_type: str) -> InstanceFacts:
    try:
        return instance_facts(instance_type)
    except UnknownInstanceType as error:
        raise SubmitError(f"--queue: {error}") from None


def _accelerator(instance_type: str) -> str:
    try:
        return instance_facts(instance_type).accelerator
    except UnknownInstanceType:
        return "unknown"
