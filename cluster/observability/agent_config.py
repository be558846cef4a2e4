"""The head node's Prometheus configuration, rendered from the spec's `cluster.observability` section.

On the cluster Prometheus runs in agent mode (`--enable-feature=agent`): it scrapes, keeps a write-ahead log
and remote-writes to the Amazon Managed Service for Prometheus workspace with SigV4 (the head node role's
credentials); rules and queries live in the workspace. Locally (tests, `make demo`) the same scrape config runs
in a full Prometheus server without remote_write, so PromQL can be asked of it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from cluster.observability.targets import TARGET_FILES
from spec.cli import OneLineParser, user_errors
from spec.observability import ObservabilitySpec

RULES_FILE = Path(__file__).with_name("alerts.yaml")
# https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-<id>/api/v1/remote_write (or a VPC endpoint's
# private DNS name, which is the same name).
_REMOTE_WRITE_RE = re.compile(
    r"^https://aps-workspaces\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com/workspaces/ws-[0-9a-f-]+/api/v1/remote_write$"
)


class AgentConfigError(ValueError):
    """A value the config cannot be rendered from; one line naming it."""


def remote_write_region(url: str) -> str:
    match = _REMOTE_WRITE_RE.match(url)
    if match is None:
        raise AgentConfigError(
            f"remote-write URL {url!r} is not https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>/api/v1/remote_write"
        )
    return match["region"]


def render(
    observability: ObservabilitySpec,
    *,
    cluster_name: str,
    targets_dir: Path,
    slurm_exporter: str | None = None,
    head_node_exporter: str | None = None,
    remote_write_url: str | None = None,
    rule_files: Sequence[Path] = (),
    scrape_interval_seconds: int | None = None,
) -> dict[str, Any]:
    """The prometheus.yml document. `slurm_exporter`/`head_node_exporter` are host:port on the head node
    (default localhost and the spec's ports)."""
    interval = f"{scrape_interval_seconds or observability.scrape_interval_seconds}s"
    ports = observability.ports
    scrape_configs: list[dict[str, Any]] = [
        {
            "job_name": "slurm",
            # Its series are about other nodes: their own `node` label must win over any target label.
            "honor_labels": True,
            "static_configs": [{"targets": [slurm_exporter or f"localhost:{ports.slurm}"]}],
        }
    ]
    for job in TARGET_FILES:
        config: dict[str, Any] = {
            "job_name": job,
            "file_sd_configs": [{"files": [str(targets_dir / f"{job}.json")], "refresh_interval": "1m"}],
        }
        if job == "node":
            config["static_configs"] = [
                {"targets": [head_node_exporter or f"localhost:{ports.node}"], "labels": {"node": "head"}}
            ]
        scrape_configs.append(config)
    document: dict[str, Any] = {
        "global": {
            "scrape_interval": interval,
            "scrape_timeout": f"{min(10, int(interval[:-1]))}s",
            "external_labels": {"cluster": cluster_name},
        },
        "scrape_configs": scrape_configs,
    }
    if rule_files:
        document["rule_files"] = [str(path) for path in rule_files]
    if remote_write_url is not None:
        document["remote_write"] = [
            {
                "url": remote_write_url,
                "sigv4": {"region": remote_write_region(remote_write_url)},
                # AMP's documented settings for a single agent: bigger batches, few shards.
                "queue_config": {"max_samples_per_send": 1000, "max_shards": 200, "capacity": 2500},
            }
        ]
    return document


def dump(document: dict[str, Any]) -> str:
    return "# Rendered by cluster/observability/agent_config.py from the spec; do not edit.\n" + yaml.safe_dump(
        document, sort_keys=False
    )


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    from spec import load_spec

    parser = OneLineParser(prog="python -m cluster.observability.agent_config", description=__doc__)
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--targets-dir", type=Path, required=True)
    parser.add_argument("--remote-write-url", help="the workspace's remote-write URL (from the SSM parameter)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    spec = load_spec(args.spec)
    try:
        document = render(
            spec.observability,
            cluster_name=spec.name,
            targets_dir=args.targets_dir,
            remote_write_url=args.remote_write_url,
        )
    except AgentConfigError as error:
        raise SystemExit(f"agent_config: {error}") from None
    args.out.write_text(dump(document))


if __name__ == "__main__":
    main()
