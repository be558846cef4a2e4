"""Validate configs with aws-parallelcluster's own marshmallow schemas. Runs under .pcluster-venv's Python.

stdin: JSON {"kind": "cluster" | "image", "name": str, "config": {...}}, or a list of such objects.
stdout: JSON list, one {"name": str, "errors": {...} | null} per input (errors as marshmallow reports them).
Exit status 0 even when configs are invalid; non-zero only when this script itself fails.

Offline (tests/cluster/test_pcluster_schema.py runs it in a network namespace with no interface): the schema
checks every key, type and allowed value; of ParallelCluster's validators only OFFLINE_VALIDATORS (on the Slurm settings and each shared
storage) and the instance-type/OS check (queue_failures) run. The others
it registers are skipped: most ask AWS (instance types, AMIs, subnets, security groups, capacity reservations,
IAM, S3, key pairs, FSx), and the repo's own rules (spec.platform.validators) cover the ones that matter offline.
"""

import json
import os
import sys
from typing import Any

# The schema reads the region and builds boto3 clients lazily; offline.refuse_aws_calls() answers or refuses the
# one call loading makes (the capacity reservations' prefetch), before it leaves the process.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "offline-validation")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "offline-validation")

import offline  # type: ignore[import-not-found]  # this folder's offline.py (sys.path[0] when run as a script)
from marshmallow import ValidationError
from pcluster.schemas.cluster_schema import ClusterSchema
from pcluster.schemas.imagebuilder_schema import ImageBuilderSchema
from pcluster.validators.common import FailureLevel, ValidatorContext
from pcluster.validators.ec2_validators import InstanceTypeOSCompatibleValidator

# ParallelCluster's own validators that need no AWS call, by the resource that registers them: the custom
# Slurm settings deny-lists (global, and accounting ones when a Database is set), the database URI check, and the
# FSx for Lustre backup options (retention, start time, tags: PERSISTENT only, not on S3-linked file systems).
OFFLINE_VALIDATORS = {
    "CustomSlurmSettingsValidator",
    "CustomSlurmNodeNamesValidator",
    "DatabaseUriValidator",
    "FsxBackupOptionsValidator",
}


def offline_failures(resource: Any) -> list[str]:
    """Error messages of the resource's offline validators, as ParallelCluster registers them."""
    resource._validators.clear()
    resource._register_validators(ValidatorContext())
    messages: list[str] = []
    for validator_class, arguments in resource._validators:
        if validator_class.__name__ not in OFFLINE_VALIDATORS:
            continue
        for failure in validator_class().execute(**arguments):
            if failure.level == FailureLevel.ERROR:
                messages.append(f"{validator_class.__name__}: {failure.message}")
    return messages


def slurm_settings_failures(config: Any) -> dict[str, Any] | None:
    settings = getattr(config.scheduling, "settings", None)
    if settings is None:
        return None
    messages = offline_failures(settings)
    if settings.database is not None:
        messages += offline_failures(settings.database)
    return {"Scheduling": {"SlurmSettings": messages}} if messages else None


def storage_failures(config: Any) -> dict[str, Any] | None:
    """The offline validators of each shared storage (FSx for Lustre's backup options), by its index."""
    failures = {str(index): offline_failures(storage) for index, storage in enumerate(config.shared_storage or [])}
    failures = {index: messages for index, messages in failures.items() if messages}
    return {"SharedStorage": failures} if failures else None


def queue_failures(config: Any) -> dict[str, Any] | None:
    """ParallelCluster's instance-type/OS check (offline: it reads only its own tables, e.g. p6e-gb200 and p6-b300's
    supported OSes), run on every compute resource's instance types as SlurmClusterConfig registers it."""
    messages: list[str] = []
    for queue in config.scheduling.queues:
        for resource in queue.compute_resources:
            for instance_type in resource.instance_types:
                for failure in InstanceTypeOSCompatibleValidator().execute(
                    instance_type=instance_type, os=config.image.os
                ):
                    if failure.level == FailureLevel.ERROR:
                        messages.append(f"InstanceTypeOSCompatibleValidator: {failure.message}")
    return {"Scheduling": {"SlurmQueues": messages}} if messages else None


def validate(item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("kind", "cluster")
    schema = ClusterSchema(cluster_name=item["name"]) if kind == "cluster" else ImageBuilderSchema()
    try:
        loaded = schema.load(item["config"])
    except ValidationError as error:
        return {"name": item["name"], "errors": error.messages}
    if kind != "cluster":
        return {"name": item["name"], "errors": None}
    errors = slurm_settings_failures(loaded) or queue_failures(loaded) or storage_failures(loaded)
    return {"name": item["name"], "errors": errors}


def main() -> None:
    offline.refuse_aws_calls()
    request = json.load(sys.stdin)
    items = request if isinstance(request, list) else [request]
    json.dump([validate(item) for item in items], sys.stdout, indent=1, sort_keys=True, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
