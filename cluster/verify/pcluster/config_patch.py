"""Run ParallelCluster's own ConfigPatch over config pairs. Runs under .pcluster-venv's Python.

stdin: JSON list of {"name": str, "old": {...}, "new": {...}}.
stdout: JSON list of {"name": str, "changes": [[path, policy, kind, check result], ...]} where kind is
"added"/"removed" for a list item and "changed" otherwise; the check
assumes a running compute fleet and no login nodes (the state `cluster.update_plan` plans for).
"""

import json
import os
import sys
from typing import Any

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

from pcluster.config.config_patch import ConfigPatch


class RunningCluster:
    """The cluster state the checks ask about: compute fleet up, no login nodes, head node running."""

    class _HeadNode:
        state = "running"

    name = "llm-demo"
    head_node_instance = _HeadNode()

    def has_running_capacity(self) -> bool:
        return True

    def has_running_login_nodes(self, pool_name: str | None = None) -> bool:
        return False


def main() -> None:
    out: list[dict[str, Any]] = []
    for item in json.load(sys.stdin):
        patch = ConfigPatch(RunningCluster(), item["old"], item["new"])
        changes = []
        for change in patch.changes:
            result = change.update_policy.check(change, patch)[0]
            path = ".".join([*change.path, change.key])
            kind = "changed"
            if change.is_list:
                kind = "added" if change.old_value is None else "removed" if change.new_value is None else kind
            changes.append([path, change.update_policy.name, kind, result.value])
        out.append({"name": item["name"], "changes": sorted(changes)})
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
