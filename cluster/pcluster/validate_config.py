"""Validate configs with aws-parallelcluster's own marshmallow schemas. Runs under .pcluster-venv's Python.

stdin: JSON {"kind": "cluster" | "image", "name": str, "config": {...}}, or a list of such objects.
stdout: JSON list, one {"name": str, "errors": {...} | null} per input (errors as marshmallow reports them).
Exit status 0 even when configs are invalid; non-zero only when this script itself fails.
"""

import json
import os
import sys
from typing import Any

# The schema reads the region and builds boto3 clients lazily; nothing here calls AWS.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "offline-validation")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "offline-validation")

from marshmallow import ValidationError
from pcluster.schemas.cluster_schema import ClusterSchema
from pcluster.schemas.imagebuilder_schema import ImageBuilderSchema


def validate(item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("kind", "cluster")
    schema = ClusterSchema(cluster_name=item["name"]) if kind == "cluster" else ImageBuilderSchema()
    try:
        schema.load(item["config"])
    except ValidationError as error:
        return {"name": item["name"], "errors": error.messages}
    return {"name": item["name"], "errors": None}


def main() -> None:
    request = json.load(sys.stdin)
    items = request if isinstance(request, list) else [request]
    json.dump([validate(item) for item in items], sys.stdout, indent=1, sort_keys=True, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
