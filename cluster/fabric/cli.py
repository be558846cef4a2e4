"""`python -m cluster.fabric render|check`: render (and submit) the fabric check job for a queue, or judge a run.

    python -m cluster.fabric render --queue Q --nodes N [--spec SPEC] [--output DIR] [--dry-run] ...
    python -m cluster.fabric check --tool all_reduce_perf|nccom-test --instance-type T --nodes N --output FILE
        --before DIR --after DIR [--iters N] [--min-fraction F] [--test-exit-code RC] [--nccl-debug-dir DIR]

render prints `<job id> <script>` after submitting (or the script with --dry-run); check prints its report and
exits 0 (passed) or 1 (failed). Bad arguments exit 2 with one line naming the argument and the value.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from cluster.fabric.check import CheckInputs, evaluate, read_transports
from cluster.fabric.counters import NodeSample, SampleError, read_samples
from cluster.fabric.parsers import NCCL_TESTS, NCCOM_TEST, PARSERS
from cluster.fabric.render import SRUN_MPI_PLUGINS, FabricJob, render_script
from cluster.fabric.thresholds import NVLINK_GB_PER_S_PER_GPU, FabricError, busbw_threshold, check_nodes
from slurm import netenv
from slurm.backends import default_backend
from slurm.errors import SubmitError
from slurm.submission import REPO_ROOT, SPEC_ENV, check_sbatch_args, load_command_spec, parse_time, sbatch
from slurm.target import Target, resolve_target
from spec.cli import OneLineParser, user_errors
from spec.cli_types import output_directory
from spec.platform.instances import UnknownInstanceType, instance_facts

RESULTS_SUBDIR = "fabric-checks"
EXIT_FAILED = 1
EXIT_USAGE = 2
# What check_nodes enforces, on both subcommands: two or more over EFA, or one GPU node's NVLink on its own.
NODES_HELP = (
    f"nodes tested together: at least 2 (EFA between them); 1 checks the NVLink of {', '.join(NVLINK_GB_PER_S_PER_GPU)}"
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m cluster.fabric",
        description="EFA fabric check: an all-reduce benchmark across nodes, judged by bus bandwidth and counters.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    render = commands.add_parser("render", help="render the check's sbatch script for a queue and submit it")
    render.add_argument("--queue", required=True, help="queue from the spec's cluster section")
    render.add_argument("--nodes", required=True, type=int, help=NODES_HELP)
    render.add_argument(
        "--spec", type=Path, help=f"deployment spec YAML (default: ${SPEC_ENV}, else spec/default.yaml)"
    )
    render.add_argument(
        "--output",
        type=output_directory,
        help=f"script, logs and results, on shared storage (default: <fsx>/{RESULTS_SUBDIR})",
    )
    render.add_argument("--partition", help="send the script to this partition instead of the queue's")
    render.add_argument("--time", help="time limit [D-]HH:MM:SS (default: the partition's)")
    render.add_argument(
        "--mpi", default="pmix", help=f"srun --mpi plugin for nccl-tests ({', '.join(SRUN_MPI_PLUGINS)})"
    )
    render.add_argument("--nccl-debug", default="INFO", help="NCCL_DEBUG (INFO lets the check read the transport)")
    render.add_argument("--min-fraction", type=float, help="busbw floor as a share of line rate (default: the type's)")
    render.add_argument("--python", default=sys.executable, help="python with this repository's requirements")
    render.add_argument("--workdir", type=Path, default=REPO_ROOT, help="this repository, readable on every node")
    render.add_argument("--libfabric-version", default=netenv.DEFAULT_LIBFABRIC)
    render.add_argument("--aws-ofi-nccl-version", default=netenv.DEFAULT_AWS_OFI_NCCL)
    render.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG", help="extra sbatch option")
    render.add_argument("--dry-run", action="store_true", help="print the script; write and submit nothing")

    check = commands.add_parser("check", help="judge a finished test: busbw, EFA counters, error counters")
    check.add_argument("--tool", required=True, choices=tuple(PARSERS))
    check.add_argument("--instance-type", required=True)
    check.add_argument("--nodes", required=True, type=int, help=NODES_HELP)
    check.add_argument("--output", required=True, type=Path, help="the test's output")
    check.add_argument("--before", required=True, type=Path, help="counter samples taken before the test")
    check.add_argument("--after", required=True, type=Path, help="counter samples taken after the test")
    check.add_argument("--iters", type=int, help="timed iterations per size (nccl-tests prints its own)")
    check.add_argument("--min-fraction", type=float)
    check.add_argument("--test-exit-code", type=int, default=0)
    check.add_argument("--nccl-debug-dir", type=Path, help="per-rank NCCL_DEBUG_FILE logs")
    return parser


def _target(args: argparse.Namespace) -> Target:
    spec = load_command_spec(args.spec, FabricError)
    if spec.cluster is None:
        raise FabricError(f"--spec: spec {spec.name!r} has no cluster section")
    try:
        queue = spec.cluster.queue(args.queue)
        facts = instance_facts(queue.instance_type)
    except (KeyError, UnknownInstanceType) as error:
        raise FabricError(f"--queue: {error.args[0]}") from None
    backend = default_backend(facts.accelerator)
    if backend is None:
        raise FabricError(f"--queue: {queue.name!r} runs {facts.name}, which has no GPUs or Trainium chips")
    try:
        target = resolve_target(spec, backend.option, queue.name, args.partition)
    except SubmitError as error:
        raise FabricError(str(error)) from None
    if not target.efa:
        raise FabricError(f"--queue: {queue.name!r} has EFA turned off in the spec; the fabric check measures EFA")
    if args.nodes > queue.max_count:
        raise FabricError(
            f"--nodes: {args.nodes} is more than queue {queue.name!r} can start (max_count {queue.max_count})"
        )
    return target


def _job(args: argparse.Namespace, command_line: str) -> FabricJob:
    check_nodes(args.nodes, single_node=True)  # one node: NVLink, refused below for types without it
    if args.mpi not in SRUN_MPI_PLUGINS:
        raise FabricError(f"--mpi: {args.mpi!r} is not one of {', '.join(SRUN_MPI_PLUGINS)}")
    try:
        check_sbatch_args(args.sbatch_arg)
    except SubmitError as error:
        raise FabricError(str(error)) from None
    if args.time:
        try:
            parse_time(args.time)
        except SubmitError as error:
            raise FabricError(str(error)) from None
    target = _target(args)
    busbw_threshold(target.instance, args.nodes, args.min_fraction)  # validates --min-fraction
    if args.output is not None:
        result_root = args.output.resolve()
    elif target.shared_dir:
        result_root = Path(target.shared_dir) / RESULTS_SUBDIR
    else:
        raise FabricError("--output: the spec has no shared file system (cluster.fsx); name a directory all nodes see")
    job = FabricJob(
        target=target,
        nodes=args.nodes,
        result_root=result_root,
        python=args.python,
        workdir=args.workdir.resolve(),
        command_line=command_line,
        time=args.time,
        min_fraction=args.min_fraction,
        srun_mpi=args.mpi,
        nccl_debug=args.nccl_debug,
        libfabric=args.libfabric_version,
        aws_ofi_nccl=args.aws_ofi_nccl_version,
    )
    try:
        render_script(job)  # the env rules (netenv) reject bad versions and debug levels here
    except SubmitError as error:
        raise FabricError(str(error)) from None
    return job


def render_command(args: argparse.Namespace, command_line: str) -> int:
    job = _job(args, command_line)
    text = render_script(job)
    if args.dry_run:
        print(text, end="")
        return 0
    try:
        job.log_dir.mkdir(parents=True, exist_ok=True)
        job.script_path.write_text(text, encoding="utf-8")
        job.script_path.chmod(0o755)
    except OSError as error:
        raise FabricError(
            f"--output: cannot write {str(args.output or job.script_path.parent)!r} ({error.strerror}); pass --output "
            "a directory of yours on shared storage"
        ) from None
    try:
        job_id = sbatch(job.script_path, None, dict(os.environ), args.sbatch_arg)
    except SubmitError as error:
        raise FabricError(str(error)) from None
    print(f"{job_id} {job.script_path}")
    print(f"log: {job.log_dir}/{job.job_name}-{job_id}.out", file=sys.stderr)
    print(f"results: {job.result_root}/{job.job_name}-{job_id}/ (verdict.txt)", file=sys.stderr)
    return 0


def _read_dir(path: Path, option: str) -> dict[str, NodeSample]:
    if not path.is_dir():
        raise FabricError(f"{option}: {str(path)!r} is not a directory")
    try:
        return read_samples(path)
    except SampleError as error:
        raise FabricError(f"{option}: {error}") from None


def check_command(args: argparse.Namespace) -> int:
    try:
        facts = instance_facts(args.instance_type)
    except UnknownInstanceType as error:
        raise FabricError(f"--instance-type: {error}") from None
    threshold = busbw_threshold(facts, args.nodes, args.min_fraction)
    if args.iters is not None and args.iters < 1:
        raise FabricError(f"--iters: {args.iters} must be at least 1")
    if args.tool == NCCOM_TEST and args.iters is None:
        raise FabricError("--iters: nccom-test prints no iteration count; pass the -n the test ran with")
    try:
        text = args.output.read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise FabricError(f"--output: cannot read {str(args.output)!r} ({error.strerror})") from None
    before = _read_dir(args.before, "--before")
    after = _read_dir(args.after, "--after")
    transports = None
    if args.nccl_debug_dir is not None:
        transports = read_transports(sorted(args.nccl_debug_dir.glob("*")) if args.nccl_debug_dir.is_dir() else [])
    verdict = evaluate(
        CheckInputs(
            run=PARSERS[args.tool](text),
            threshold=threshold,
            before=before,
            after=after,
            output_path=str(args.output),
            test_exit_code=args.test_exit_code,
            iterations=args.iters,
            transports=transports,
            expected_ranks=args.nodes * facts.workers_per_node if args.tool == NCCL_TESTS else None,
        )
    )
    print(verdict.render(), end="")
    return 0 if verdict.passed else EXIT_FAILED


@user_errors
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command_line = "python -m cluster.fabric " + shlex.join(sys.argv[1:] if argv is None else argv)
    if args.command == "render":
        return render_command(args, command_line)
    return check_command(args)
