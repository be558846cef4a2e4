"""Rules that relate several fields of a parsed spec, sections included: each section's schema checks its own fields,
and every rule that needs the whole spec lives here, so no section imports the model. Each returns SpecProblems
with exact paths."""

from __future__ import annotations

import re
from collections.abc import Iterator

from spec.accounting import accounting_problems
from spec.containers import parse_ecr_image
from spec.errors import SpecProblem
from spec.model import BUILTIN_ROLES, QUEUE_ROLE_PREFIX, DeploymentSpec, database_availability_zones, is_queue_role
from spec.regions import DYNAMODB_PREFIX_LISTS, S3_PREFIX_LISTS
from spec.users import users_problems

_ROLE_ACCOUNT_RE = re.compile(r"^arn:aws:iam::(\d{12}):role/")
_KMS_ARN_RE = re.compile(r"^arn:aws:kms:([a-z0-9-]+):(\d{12}):key/")


def cross_field_problems(spec: DeploymentSpec) -> list[SpecProblem]:
    return [
        *_accounts(spec),
        *_network(spec),
        *_perimeter(spec),
        *_encryption(spec),
        *_bucket(spec),
        *_datasets(spec),
        *_checkpoint_replica(spec),
        *_cluster(spec),
        *_allowed_groups(spec),
        *container_problems(spec),
        *(accounting_problems(spec.cluster.accounting) if spec.cluster is not None else ()),
        *(
            users_problems(spec.cluster.users, spec.cluster.groups, spec.cluster.accounting)
            if spec.cluster is not None
            else ()
        ),
        *accounting_network_problems(spec),
    ]


def _accounts(spec: DeploymentSpec) -> Iterator[SpecProblem]:
    if spec.accounts.compute == spec.accounts.data:
        yield SpecProblem(
            "accounts.data",
            "equals accounts.compute; the data account must be separate from the compute account",
            spec.accounts.data,
        )


def _network(spec: DeploymentSpec) -> Iterator[SpecProblem]:
    net = spec.network
    az_region = net.availability_zone[:-1]
    if az_region != spec.region:
        yield SpecProblem(
            "network.availability_zone", f"is not in the deployment region {spec.region}", net.availability_zone
        )
    if net.s3_prefix_list_id is None and spec.region not in S3_PREFIX_LISTS:
        yield SpecProblem(
            "network.s3_prefix_list_id",
            f"is required: region {spec.region} is not in the pinned table (spec/regions.py)",
            None,
        )
    if spec.cluster is not None and net.dynamodb_prefix_list_id is None and spec.region not in DYNAMODB_PREFIX_LISTS:
        yield SpecProblem(
            "network.dynamodb_prefix_list_id",
            f"is required with a cluster: region {spec.region} is not in the pinned table (spec/regions.py)",
            None,
        )
    if net.mode == "existing":
        if net.existing is None:
            yield SpecProblem("network.existing", "is required when network.mode is 'existing'", None)
        if net.vpc_id is None:
            yield SpecProblem("network.vpc_id", "is required when network.mode is 'existing'", None)
        if net.existing is not None and len(net.existing.route_table_ids) != len(net.existing.subnet_ids):
            yield SpecProblem(
                "network.existing.route_table_ids",
                f"must list one route table per subnet ({len(net.existing.subnet_ids)} subnets)",
                net.existing.route_table_ids,
            )
        if net.internet_egress != "none":
            yield SpecProblem(
                "network.internet_egress",
                "must be 'none' when network.mode is 'existing' (the landing zone owns egress)",
                net.internet_egress,
            )
    elif net.existing is not None:
        yield SpecProblem("network.existing", "is only read when network.mode is 'existing'", "set")


def _perimeter(spec: DeploymentSpec) -> Iterator[SpecProblem]:
    if spec.perimeter.organization_bound and spec.organization_id is None:
        yield SpecProblem(
            "organization_id",
            "is required because perimeter.organization_bound is true (set it, or turn the perimeter off)",
            None,
        )


def _encryption(spec: DeploymentSpec) -> Iterator[SpecProblem]:
    arn = spec.data.encryption.kms_key_arn
    if arn is None:
        return
    match = _KMS_ARN_RE.match(arn)
    assert match is not None  # the field pattern already holds
    region, account = match.groups()
    if account != spec.accounts.data:
        yield SpecProblem(
            "data.encryption.kms_key_arn", f"is in account {account}, not the data account {spec.accounts.data}", arn
        )
    if region != spec.region:
        yield SpecProblem("data.encryption.kms_key_arn", f"is in region {region}; S3 needs a key in {spec.region}", arn)


def _bucket(spec: DeploymentSpec) -> Iterator[SpecProblem]:
    if len(spec.data.log_bucket_name) > 63:
        yield SpecProblem(
            "data.bucket_name",
            "is too long: the access-log bucket '<name>-logs' must fit in 63 characters (use at most 58)",
            spec.data.bucket_name,
        )


def _datasets(spec: DeploymentSpec) -> Iterator[SpecProblem]:
    datasets = spec.data.datasets
    seen_names: dict[str, int] = {}
    seen_access_points: dict[str, int] = {}
    for i, dataset in enumerate(datasets):
        path = f"data.datasets[{i}]"
        if dataset.name in seen_names:
            yield SpecProblem(
                f"{path}.name", f"duplicates data.datasets[{seen_names[dataset.name]}].name", dataset.name
            )
        seen_names.setdefault(dataset.name, i)
        if dataset.access_point in seen_access_points:
            first = seen_access_points[dataset.access_point]
            yield SpecProblem(
                f"{path}.access_point", f"duplicates data.datasets[{first}].access_point", dataset.access_point
            )
        seen_access_points.setdefault(dataset.access_point, i)
        for j in range(i):
            other = datasets[j]
            if dataset.prefix.startswith(other.prefix) or other.prefix.startswith(dataset.prefix):
                yield SpecProblem(
                    f"{path}.prefix",
                    f"overlaps data.datasets[{j}].prefix {other.prefix!r}; one grant would reach the other's data",
                    dataset.prefix,
                )
        if not dataset.readers and not dataset.writers:
            yield SpecProblem(f"{path}.readers", "is empty and so is writers: the dataset would grant nobody", [])
        if dataset.writers and dataset.output_prefix is None:
            yield SpecProblem(f"{path}.output_prefix", "is required when writers are set", None)
        if dataset.output_prefix is not None and not dataset.output_prefix.startswith(dataset.prefix):
            yield SpecProblem(
                f"{path}.output_prefix", f"must lie inside the dataset prefix {dataset.prefix!r}", dataset.output_prefix
            )
        for field in ("readers", "writers"):
            refs: list[str] = getattr(dataset, field)
            seen_refs: set[str] = set()
            for k, ref in enumerate(refs):
                ref_path = f"{path}.{field}[{k}]"
                if ref in seen_refs:
                    yield SpecProblem(ref_path, "is listed twice", ref)
                seen_refs.add(ref)
                yield from _role_ref_problems(spec, ref_path, ref)


def _checkpoint_replica(spec: DeploymentSpec) -> Iterator[SpecProblem]:
    name = spec.data.checkpoint_replica
    if name is None:
        return
    dataset = spec.checkpoint_dataset
    if dataset is None:
        names = ", ".join(d.name for d in spec.data.datasets)
        yield SpecProblem("data.checkpoint_replica", f"names no dataset (datasets: {names})", name)
        return
    for field in ("readers", "writers"):
        if "cluster-node" not in getattr(dataset, field):
            yield SpecProblem(
                "data.checkpoint_replica",
                f"names dataset {name!r}, whose {field} lack cluster-node: jobs upload and restore checkpoints there",
                name,
            )


def _role_ref_problems(spec: DeploymentSpec, path: str, ref: str) -> Iterator[SpecProblem]:
    if ref in BUILTIN_ROLES:
        if ref == "notebook" and not spec.notebook.enabled:
            yield SpecProblem(path, "names the notebook role, but notebook.enabled is false", ref)
        return
    if is_queue_role(ref):
        yield from _queue_role_problems(spec, path, ref)
        return
    match = _ROLE_ACCOUNT_RE.match(ref)
    assert match is not None  # the field validator already holds
    account = match.group(1)
    if account != spec.accounts.compute:
        yield SpecProblem(
            path, f"is a role of account {account}, not of the compute account {spec.accounts.compute}", ref
        )


def _queue_role_problems(spec: DeploymentSpec, path: str, ref: str) -> Iterator[SpecProblem]:
    queues = spec.cluster.queues if spec.cluster is not None else []
    name = ref.removeprefix(QUEUE_ROLE_PREFIX)
    queue = next((q for q in queues if q.name == name), None)
    if queue is None:
        yield SpecProblem(
            path, f"names no queue of cluster.queues (queues: {', '.join(q.name for q in queues) or 'none'})", ref
        )
    elif not queue.allowed_groups:
        yield SpecProblem(
            path,
            f"is the role of queue {name}, which is open to every user: give the queue allowed_groups, or name "
            "cluster-node",
            ref,
        )


def _allowed_groups(spec: DeploymentSpec) -> Iterator[SpecProblem]:
    if spec.cluster is None:
        return
    declared = sorted(group.name for group in spec.cluster.groups)
    for i, queue in enumerate(spec.cluster.queues):
        for j, group in enumerate(queue.allowed_groups):
            path = f"cluster.queues[{i}].allowed_groups[{j}]"
            if group not in declared:
                yield SpecProblem(path, f"is not a declared group (declared: {', '.join(declared) or 'none'})", group)
            elif group in queue.allowed_groups[:j]:
                yield SpecProblem(path, "is listed twice", group)


def _cluster(spec: DeploymentSpec) -> list[SpecProblem]:
    if spec.cluster is None:
        return []
    # Imported here: spec.platform.validators imports spec modules, and spec must stay importable on its own.
    from spec.platform.validators import spec_problems

    return spec_problems(
        spec.cluster, availability_zone=spec.network.availability_zone, internet_egress=spec.network.internet_egress
    )


def container_problems(spec: DeploymentSpec) -> Iterator[SpecProblem]:
    """The image must be the compute account's, in the deployment region, or a .sqsh on the cluster's FSx."""
    cluster = spec.cluster
    if cluster is None or not cluster.containers.pyxis:
        return
    containers = cluster.containers
    image = containers.nemo_image
    ecr = parse_ecr_image(image)
    path = "cluster.containers.nemo_image"
    if ecr is not None:
        if ecr.account != spec.accounts.compute:
            yield SpecProblem(
                path, f"is in account {ecr.account}, not the compute account {spec.accounts.compute}", image
            )
        if ecr.region != spec.region:
            yield SpecProblem(path, f"is in region {ecr.region}, not the deployment region {spec.region}", image)
        if ecr.repository != containers.ecr_repository:
            yield SpecProblem(
                path,
                f"is not in cluster.containers.ecr_repository ({containers.ecr_repository}): the nodes may pull only that",
                image,
            )
        return
    # Without a shared file system the cluster may still train without NeMo: launch.submit refuses a NeMo job.
    if cluster.fsx is not None and not image.startswith(cluster.fsx.mount_dir.rstrip("/") + "/"):
        yield SpecProblem(
            path, f"is not on the shared file system ({cluster.fsx.mount_dir}): every node reads it", image
        )


def accounting_network_problems(spec: DeploymentSpec) -> Iterator[SpecProblem]:
    """Where the database lives: two subnets in two AZs of the deployment's region."""
    if spec.cluster is None or not spec.cluster.accounting.enabled:
        return
    database = spec.cluster.accounting.database
    path = "cluster.accounting.database"
    if spec.network.mode == "existing":
        if database.second_availability_zone is not None:
            yield SpecProblem(
                f"{path}.second_availability_zone",
                "applies to network.mode create; with an existing network give subnet_ids",
                database.second_availability_zone,
            )
        if not database.subnet_ids or len(set(database.subnet_ids)) < 2:
            yield SpecProblem(
                f"{path}.subnet_ids",
                "needs two or more subnets in two AZs with network.mode existing (RDS subnet groups span two AZs)",
                database.subnet_ids,
            )
        return
    if database.subnet_ids is not None:
        yield SpecProblem(
            f"{path}.subnet_ids",
            "applies to network.mode existing; the network stack creates them",
            database.subnet_ids,
        )
    first, second = database_availability_zones(spec)
    if second == first:
        yield SpecProblem(f"{path}.second_availability_zone", "must differ from network.availability_zone", second)
    elif second[:-1] != spec.region:
        yield SpecProblem(f"{path}.second_availability_zone", f"is not in the deployment region {spec.region}", second)
