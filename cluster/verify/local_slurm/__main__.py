"""python -m cluster.verify.local_slurm up|down|status|wait [--state-dir DIR]"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cluster.accounting import sacctmgr_script
from cluster.verify.local_slurm.harness import DEFAULT_STATE_DIR, LocalSlurm, LocalSlurmError
from cluster.verify.local_slurm.install import InstallError
from spec.accounting import AccountingSpec
from spec.cli import OneLineParser, user_errors


def _accounting(path: Path) -> AccountingSpec:
    from spec import SpecError, load_spec

    try:
        spec = load_spec(path)
    except SpecError as error:
        raise LocalSlurmError(f"--accounting: {str(error).splitlines()[0]}") from None
    if spec.cluster is None or not spec.cluster.accounting.enabled:
        raise LocalSlurmError(f"--accounting: {path} has no cluster.accounting with enabled: true")
    return spec.cluster.accounting


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m cluster.verify.local_slurm",
        description="A real SLURM cluster (slurmctld + two slurmd) on this host, for tests and the demo.",
    )
    parser.add_argument("command", choices=("up", "down", "status", "wait"))
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(os.environ.get("LOCAL_SLURM_DIR", DEFAULT_STATE_DIR)),
        help="where config, spool, logs and pid files live (default: $LOCAL_SLURM_DIR or .local-slurm/)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the nodes (up, wait)")
    parser.add_argument(
        "--accounting",
        type=Path,
        metavar="SPEC",
        help="up: also run slurmdbd on a MariaDB of its own, with this spec's cluster.accounting (its sacctmgr "
        "script applied), so sacct, sacctmgr, sshare and llm-report answer",
    )
    parser.add_argument(
        "--gpus-per-node",
        type=int,
        default=0,
        help="up: declare this many stand-in GPUs per node (GRES gpu, no devices), so jobs can request them and "
        "accounting counts them (AllocTRES gres/gpu, llm-report's GPU-hours, QoS limits on gres/gpu)",
    )
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error(f"--timeout: {args.timeout} must be positive")
    if args.gpus_per_node < 0:
        parser.error(f"--gpus-per-node: {args.gpus_per_node} must be 0 or more")
    try:
        accounting = _accounting(args.accounting) if args.accounting is not None else None
        cluster = LocalSlurm(args.state_dir, accounting=accounting, gpus_per_node=args.gpus_per_node)
        if args.command == "up":
            cluster.up(args.timeout)
            if accounting is not None:
                apply = subprocess.run(
                    ["bash", "-c", sacctmgr_script(accounting)], env=cluster.env(), capture_output=True, text=True
                )
                if apply.returncode != 0:
                    last = (apply.stderr.strip().splitlines() or ["no output"])[-1]
                    raise LocalSlurmError(f"the sacctmgr script of --accounting failed: {last}")
                print("accounting: slurmdbd on its own MariaDB; accounts, users and QoS from the spec")
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
