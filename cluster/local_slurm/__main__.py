"""python -m cluster.local_slurm up|down|status|wait [--state-dir DIR]"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from cluster.local_slurm.harness import DEFAULT_STATE_DIR, LocalSlurm, LocalSlurmError
from cluster.local_slurm.install import InstallError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cluster.local_slurm",
        description="A real SLURM cluster (slurmctld + two slurmd) on this host, for tests and the demo.",
    )
    parser.add_argument("command", choices=("up", "down", "status", "wait"))
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(os.environ.get("LOCAL_SLURM_DIR", DEFAULT_STATE_DIR)),
        help="where config, spool, logs and pid files live (default: $LOCAL_SLURM_DIR or .local-slurm/)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the nodes (up, wait)")
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error(f"--timeout: {args.timeout} must be positive")
    try:
        cluster = LocalSlurm(args.state_dir)
        if args.command == "up":
            cluster.up(args.timeout)
            print(f"local SLURM cluster up: nodes {', '.join(cluster.nodes)} in partition 'local'")
            print(f"use it with: export SLURM_CONF={cluster.conf_path}   (or: source {cluster.state_dir}/env.sh)")
        elif args.command == "down":
            cluster.down()
            print(f"local SLURM cluster down ({cluster.state_dir})")
        elif args.command == "wait":
            cluster.wait_idle(args.timeout)
            print("all nodes idle")
        else:
            status = cluster.status()
            print(json.dumps(status, indent=2))
            return 0 if status["up"] else 3
    except (LocalSlurmError, InstallError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
