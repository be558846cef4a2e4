"""`llm-prepare-cluster`: prepare a large corpus on the cluster, as a Slurm job array over input shards.

    llm-prepare-cluster --input DIR_OR_FILES... --output-prefix OUT --tokenizer tokenizer.json --shards N
        [--queue Q | --local] [--spec SPEC.yaml] [--workers N] [--time HH:MM:SS] [--dry-run] ...

Writes the plan (OUT_shards/plan.json: each shard a run of whole input files of about equal bytes), then submits
an array job with one task per shard still incomplete (training.prepare_shards shard), each writing
OUT_shards/shard-NNNNN_text_document.{bin,idx,manifest.json}, and a merge job that runs only once every task
succeeded (afterok; cancelled if any fails) and writes OUT_text_document: the bytes `llm-prepare` writes from all
the inputs in one process. Submitting the same command again redoes only the shards whose manifest is missing or
does not verify. Prints the merge job's id first: `llm-follow --job ID --run-dir OUT_shards` shows each shard's
progress and ETA, and names any shard that failed.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from slurm.errors import SubmitError
from slurm.render import SettingValue, assemble
from slurm.submission import REPO_ROOT, SPEC_ENV, check_sbatch_args, load_command_spec, sbatch, submit_env
from slurm.target import LOCAL_PARTITION
from spec.cli import OneLineParser, user_errors
from spec.cli_types import output_prefix
from spec.platform.instances import UnknownInstanceType, instance_facts
from training.data.errors import DataError
from training.data.manifest import sha256_file
from training.data.shard_plan import PLAN_NAME, ShardPlan, incomplete_shards, split_inputs, write_plan
from training.data.sources import resolve_inputs
from training.data.tokenizer import find_eod, load_tokenizer
from training.prepare_shards import DEFAULT_PROGRESS_EVERY_S

JOBS_DIR = Path(__file__).resolve().parent / "jobs"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="llm-prepare-cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--input", nargs="+", required=True, metavar="PATH", help=".jsonl/.json/.txt files or dirs")
    parser.add_argument("--output-prefix", required=True, type=output_prefix, metavar="OUT")
    parser.add_argument("--tokenizer", required=True, type=Path, help="HF tokenizer.json every shard uses")
    parser.add_argument("--shards", required=True, type=int, help="array tasks: runs of whole input files")
    parser.add_argument("--text-field", default="text", help="JSONL field holding the document text")
    parser.add_argument("--eod-token", help="end-of-document token (default: the first of the usual ones present)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--queue", help="queue of the spec (default: its first CPU queue, else its first queue)")
    where.add_argument("--local", action="store_true", help="the local CPU cluster (cluster.verify.local_slurm)")
    parser.add_argument(
        "--spec", type=Path, help=f"deployment spec YAML (default: ${SPEC_ENV}, else spec/default.yaml)"
    )
    parser.add_argument("--workers", type=int, help="tokenizer processes per task (default: the node's cores)")
    parser.add_argument("--time", help="time limit of each task [D-]HH:MM:SS (default: the partition's)")
    parser.add_argument(
        "--progress-every", type=float, default=DEFAULT_PROGRESS_EVERY_S, metavar="SECONDS", help="progress lines"
    )
    parser.add_argument("--python", default=sys.executable, help="python of the training env on the nodes")
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT, help="the repository on shared storage")
    parser.add_argument("--sbatch-arg", dest="sbatch_args", action="append", default=[], metavar="ARG")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and scripts; submit nothing")
    return parser


def partition_of(args: argparse.Namespace) -> tuple[str, bool]:
    """The partition the tasks run on, and whether they take whole nodes: the named queue, else the spec's first
    queue without accelerators (a CPU queue), else its first queue (the GPU or Trainium nodes' cores)."""
    if args.local:
        return LOCAL_PARTITION, False
    spec = load_command_spec(args.spec)
    if spec.cluster is None:
        raise SubmitError(f"--spec: spec {spec.name!r} has no cluster section (add one, or use --local)")
    queues = spec.cluster.queues
    if args.queue is not None:
        try:
            return spec.cluster.queue(args.queue).name, True
        except KeyError as error:
            raise SubmitError(f"--queue: {error.args[0]}") from None
    for queue in queues:
        try:
            if instance_facts(queue.instance_type).accelerator == "none":
                return queue.name, True
        except UnknownInstanceType:
            continue
    return queues[0].name, True


def make_plan(args: argparse.Namespace) -> ShardPlan:
    try:
        tokenizer = load_tokenizer(args.tokenizer)
        find_eod(tokenizer, args.eod_token, source="--eod-token" if args.eod_token else str(args.tokenizer))
        files = [path.resolve() for path in resolve_inputs(args.input)]
        shards = split_inputs(files, args.shards)
    except DataError as error:
        raise SubmitError(str(error)) from None
    return ShardPlan(
        output_prefix=str(Path(args.output_prefix).resolve()),
        tokenizer=str(Path(args.tokenizer).resolve()),
        tokenizer_sha256=sha256_file(args.tokenizer),
        text_field=args.text_field,
        eod_token=args.eod_token,
        shards=shards,
    )


def render(
    args: argparse.Namespace, plan: ShardPlan, partition: str, whole_node: bool, command_line: str
) -> tuple[str, str]:
    """The array task's script and the merge job's."""
    logs = plan.directory / "logs"
    node: list[tuple[str, str | None]] = [("partition", partition), ("nodes", "1"), ("ntasks", "1")]
    if args.time:
        node.append(("time", args.time))
    # A task tokenizes on every core of its node; the merge is one process bound by the file system's throughput.
    task_node = [*node, ("exclusive", None)] if whole_node else node
    common: dict[str, SettingValue] = {
        "PLAN": str(plan.directory / PLAN_NAME),
        "PYTHON": args.python,
        "WORKDIR": str(Path(args.workdir).resolve()),
    }
    shard = assemble(
        [
            ("job-name", f"prepare-{plan.directory.name}"),
            *task_node,
            ("output", str(logs / "prepare-%A-shard-%a.out")),
            ("no-requeue", None),
        ],
        command_line,
        {**common, "WORKERS": args.workers or "", "PROGRESS_EVERY_S": args.progress_every},
        {},
        JOBS_DIR,
        ["prepare_shard.sh"],
    )
    merge = assemble(
        [
            ("job-name", f"merge-{plan.directory.name}"),
            *node,
            ("output", str(logs / "prepare-%j-merge.out")),
            ("no-requeue", None),
        ],
        command_line,
        common,
        {},
        JOBS_DIR,
        ["prepare_merge.sh"],
    )
    return shard, merge


def check_options(args: argparse.Namespace) -> None:
    check_sbatch_args(args.sbatch_args)
    if args.shards < 1:
        raise SubmitError(f"--shards: {args.shards} must be at least 1")
    if args.workers is not None and args.workers < 1:
        raise SubmitError(f"--workers: {args.workers} must be at least 1")
    if not args.progress_every > 0:
        raise SubmitError(f"--progress-every: {args.progress_every} must be positive")
    if not args.tokenizer.is_file():
        raise SubmitError(f"--tokenizer: {str(args.tokenizer)!r} is not a file")


@user_errors
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_options(args)
    command_line = "llm-prepare-cluster " + shlex.join(sys.argv[1:] if argv is None else argv)
    partition, whole_node = partition_of(args)
    plan = make_plan(args)
    shard_text, merge_text = render(args, plan, partition, whole_node, command_line)
    if args.dry_run:
        print(plan.to_json() + shard_text + "\n" + merge_text)
        return 0
    try:
        write_plan(plan)
    except DataError as error:
        raise SubmitError(str(error)) from None
    todo = sorted(incomplete_shards(plan))
    (plan.directory / "logs").mkdir(exist_ok=True)
    shard_script, merge_script = plan.directory / "prepare-shard.sbatch", plan.directory / "prepare-merge.sbatch"
    env = submit_env(args.local)
    array_job = None
    if todo:
        shard_script.write_text(shard_text, encoding="utf-8")
        array_job = sbatch(shard_script, None, env, [*args.sbatch_args, f"--array={','.join(map(str, todo))}"])
    merge_script.write_text(merge_text, encoding="utf-8")
    merge_job = sbatch(merge_script, array_job, env, list(args.sbatch_args))
    print(f"{merge_job} {merge_script}")
    if array_job is not None:
        print(f"{array_job} {shard_script} (shards {', '.join(map(str, todo))} of {len(plan.shards)})")
    done = len(plan.shards) - len(todo)
    print(
        f"{done} of {len(plan.shards)} shards already complete; follow with: "
        f"llm-follow --job {merge_job} --run-dir {plan.directory}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
