"""Print ParallelCluster's update policy for each cluster-config key. Runs under .pcluster-venv's Python.

stdin: JSON {"paths": [..] | null}. stdout: JSON {path: policy name}. Paths use the config's keys with
"[]" for list items, for example "Scheduling.SlurmQueues[].ComputeResources[].MaxCount". A nested
section's own policy is reported under its path too (ParallelCluster applies it when the whole
section is added or removed).
"""

import json
import os
import sys
from typing import Any

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

from marshmallow import fields
from pcluster.schemas.cluster_schema import ClusterSchema


def walk(schema: Any, prefix: str, out: dict[str, Any], seen: set[tuple[str, str]]) -> None:
    for field in schema.fields.values():
        key = field.data_key or field.name
        policy = field.metadata.get("update_policy")
        nested = field
        if isinstance(field, fields.List):
            nested = field.inner
        many = isinstance(field, fields.List) or getattr(field, "many", False)
        path = f"{prefix}.{key}" if prefix else key
        if policy is not None:
            out[path] = policy.name
        if isinstance(nested, fields.Nested):
            child = nested.schema
            child_path = path + ("[]" if many else "")
            marker = (type(child).__name__, child_path)
            if marker not in seen:
                seen.add(marker)
                walk(child, child_path, out, seen)


def main() -> None:
    request = json.load(sys.stdin)
    out: dict[str, Any] = {}
    walk(ClusterSchema(cluster_name="policies"), "", out, set())
    wanted = request.get("paths")
    if wanted:
        out = {path: out.get(path) for path in wanted}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
