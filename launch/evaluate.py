"""`llm-eval`: render and submit an sbatch job that scores a run's checkpoints with lm-evaluation-harness.

    llm-eval --run-dir RUN [--tasks-dir DIR] [--tasks a,b] [--step N | --all | --every N --after JOB]
        [--queue Q | --local] [--spec SPEC.yaml] [--hf-dir DIR] [--time HH:MM:SS] [--dry-run] ...

The job (launch/jobs/eval.sh, training.evaluate) runs on one node: GPUs when the queue has them. `--every N`
scores every N-th checkpoint of a training job while it trains: a second job that starts once training has started
(`--dependency=after:JOB`), on a node of its own, and ends after training has left the queue (docs/evaluation.md).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import yaml

from launch.bridge import BRIDGE_EXPORT_CODE, RECIPE_HF_MODEL_ID
from launch.bridge import CONFIG_NAME as BRIDGE_CONFIG
from launch.run_dir_owner import check_run_dir_owner
from launch.scripts import _container_mounts
from slurm.errors import SubmitError
from slurm.render import SettingValue, assemble
from slurm.submission import REPO_ROOT, SPEC_ENV, check_sbatch_args, load_command_spec, sbatch, submit_env
from slurm.target import Target, local_target, resolve_target
from spec.cli import OneLineParser, user_errors
from spec.containers import pyxis_image
from training.config import UNSET_EVERY_STEPS
from training.evaluate.errors import EvalError
from training.evaluate.task_data import TASKS_DIR, build_task_data
from training.evaluate.task_files import check_tasks, task_index
from training.signals import EXIT_NOT_OWNED

JOBS_DIR = Path(__file__).resolve().parent / "jobs"
DEFAULT_TASKS = "demo_heldout,demo_choice"
JOB_CONFIG = "job-config.yaml"  # what llm-submit writes into the run directory


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="llm-eval", description=__doc__.splitlines()[0])
    # Directories are checked after parsing (render), as the run's and the tasks' own problems.
    parser.add_argument("--run-dir", required=True, type=Path, help="the training run directory")
    parser.add_argument(
        "--tasks-dir",
        type=Path,
        help="task YAMLs and their data (default: the shipped demo tasks, built into RUN/eval/demo-tasks)",
    )
    parser.add_argument("--tasks", default=DEFAULT_TASKS, help=f"comma-separated task names (default {DEFAULT_TASKS})")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--step", type=int, help="score this committed step (default: the latest)")
    which.add_argument("--all", action="store_true", help="score every committed step")
    which.add_argument("--every", type=int, help="with --after: every N-th checkpoint while the job trains")
    which.add_argument("--hf-dir", type=Path, help="score this HF directory (e.g. Bridge's export)")
    parser.add_argument("--after", help="the training job's id (--every)")
    parser.add_argument("--tokenizer", type=Path, help="tokenizer.json (default: the run's dataset's)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--queue", help="queue from the spec's cluster section (default: the first GPU queue)")
    where.add_argument("--local", action="store_true", help="the local CPU cluster (cluster.verify.local_slurm)")
    parser.add_argument(
        "--spec", type=Path, help=f"deployment spec YAML (default: ${SPEC_ENV}, else spec/default.yaml)"
    )
    parser.add_argument("--partition", help="send the script to this partition instead of the queue's")
    parser.add_argument("--time", help="time limit [D-]HH:MM:SS (default: the partition's)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--limit", type=int, help="documents per task (smoke tests)")
    parser.add_argument("--poll-s", type=int, default=60, help="--every: seconds between looks for new checkpoints")
    parser.add_argument("--python", default=sys.executable, help="python of the training env on the nodes")
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT, help="the repository on shared storage")
    parser.add_argument("--sbatch-arg", dest="sbatch_args", action="append", default=[], metavar="ARG")
    parser.add_argument("--dry-run", action="store_true", help="print the script; write and submit nothing")
    return parser


def _job_config(run_dir: Path) -> dict:
    path = run_dir / JOB_CONFIG
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _tokenizer(args: argparse.Namespace, run_dir: Path) -> Path:
    if args.tokenizer:
        return Path(args.tokenizer).resolve()
    prefix = _job_config(run_dir).get("data", {}).get("prefix")
    manifest = Path(f"{prefix}.manifest.json") if prefix else None
    try:
        name = yaml.safe_load(manifest.read_text(encoding="utf-8"))["tokenizer_file"] if manifest else None
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        name = None
    if not name:
        raise SubmitError(f"--tokenizer: needed; {run_dir / JOB_CONFIG} names no dataset with a tokenizer file")
    return (Path(str(prefix)).parent / name).resolve()


def _every_steps(args: argparse.Namespace, run_dir: Path) -> int:
    config = _job_config(run_dir)
    every = (config.get("checkpoint") or {}).get("every") if config else 0  # no config: not submitted yet
    every = UNSET_EVERY_STEPS if every is None else every  # unset: the trainer's own interval
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:  # 'off': no periodic saves
        raise SubmitError(f"--every: {run_dir / JOB_CONFIG} names no checkpoint.every (submit the training job first)")
    return int(args.every) * every


def _target(args: argparse.Namespace, backend: str = "fsdp") -> Target:
    if args.local:
        return local_target()
    return resolve_target(load_command_spec(args.spec), backend, args.queue, args.partition)


SHIPPED_TASKS = "demo-tasks"  # under RUN/eval: the shipped demo tasks, built from the demo corpus on first use


def shipped_tasks(run_dir: Path, tasks: list[str], dry_run: bool) -> Path:
    """The shipped demo tasks (YAMLs and data, the same bytes every time) in RUN/eval/demo-tasks, built once; a dry
    run builds nothing and checks the names against the shipped YAMLs."""
    target = run_dir / "eval" / SHIPPED_TASKS
    shipped = task_index(TASKS_DIR)
    unknown = [task for task in tasks if task not in shipped]
    if unknown:
        raise SubmitError(
            f"--tasks: {unknown[0]!r} is not a shipped task ({', '.join(sorted(shipped))}); give --tasks-dir with "
            "its YAML (docs/evaluation.md)"
        )
    if not dry_run and not (target / ".complete").is_file():
        build_task_data(target)
        (target / ".complete").touch()
    return target


BRIDGE_EXPORT = "bridge-latest"  # under RUN/export: Megatron Bridge's export of the run's latest checkpoint


def is_bridge_run(args: argparse.Namespace, run_dir: Path) -> bool:
    """A Megatron Bridge run's checkpoints (its bridge-config.yaml beside them), scored through Bridge's export."""
    return not args.hf_dir and (run_dir / BRIDGE_CONFIG).is_file()


def bridge_export_settings(args: argparse.Namespace, run_dir: Path, target: Target) -> dict[str, SettingValue]:
    """For a Megatron Bridge run (its bridge-config.yaml), what the job needs to export the latest checkpoint with
    Bridge's own converter in the NeMo container before scoring it; {} for any other run."""
    if not is_bridge_run(args, run_dir):
        return {}
    if args.step is not None or args.all or args.every is not None:
        raise SubmitError(
            "--step/--all/--every: a Megatron Bridge run is scored at its latest checkpoint (Bridge's export reads "
            "the latest iter_*); leave them out, or export a step yourself and give --hf-dir (docs/jobs.md)"
        )
    # The recipe's model id the run rendered its HF config under (each family's own; older runs: Llama's).
    rendered = yaml.safe_load((run_dir / BRIDGE_CONFIG).read_text()) or {}
    hf_config = run_dir / "hf" / str(rendered.get("hf_model_id", RECIPE_HF_MODEL_ID))
    if not (hf_config / "config.json").is_file():
        raise SubmitError(f"--run-dir: {run_dir} is a Megatron Bridge run without its rendered HF config {hf_config}")
    image = target.container_image
    if not image:
        raise SubmitError("--queue: the spec names no NeMo container image to run Megatron Bridge's export in")
    return {
        "BRIDGE_HF_CONFIG": str(hf_config),
        "BRIDGE_EXPORT_DIR": str(run_dir / "export" / BRIDGE_EXPORT),
        "BRIDGE_EXPORT_CODE": BRIDGE_EXPORT_CODE,
        "CONTAINER_IMAGE": pyxis_image(image),
        "CONTAINER_MOUNTS": _container_mounts(target.shared_dir, [run_dir]),
    }


def render(args: argparse.Namespace, command_line: str) -> tuple[Path, str]:
    for value, option in ((args.step, "--step"), (args.every, "--every"), (args.batch_size, "--batch-size"),
                          (args.limit, "--limit"), (args.poll_s, "--poll-s")):  # fmt: skip
        if value is not None and value < 1:
            raise SubmitError(f"{option}: {value} must be at least 1")
    check_sbatch_args(args.sbatch_args)
    if (args.every is None) != (args.after is None):
        raise SubmitError("--after: --every and --after go together (the training job whose checkpoints to score)")
    if args.after is not None and not args.after.isdigit():
        raise SubmitError(f"--after: {args.after!r} is not a SLURM job id")
    for path, option in ((args.run_dir, "--run-dir"), (args.tasks_dir, "--tasks-dir"), (args.hf_dir, "--hf-dir")):
        if path is not None and not path.is_dir():
            raise SubmitError(f"--{option.lstrip('-')}: {str(path)!r} is not a directory")
    # Its scores and export go there, and the job reads its checkpoints: another user's directory is refused.
    check_run_dir_owner(args.run_dir.resolve())
    if args.tokenizer is not None and not args.tokenizer.is_file():
        raise SubmitError(f"--tokenizer: {str(args.tokenizer)!r} is not a file")
    run_dir = Path(args.run_dir).resolve()
    tasks = [task for task in args.tasks.split(",") if task]
    tasks_dir = Path(args.tasks_dir).resolve() if args.tasks_dir else shipped_tasks(run_dir, tasks, args.dry_run)
    try:
        if args.tasks_dir or not args.dry_run:
            check_tasks(tasks_dir, tasks)
    except EvalError as error:
        raise SubmitError(str(error)) from None
    target = _target(args, "nemo" if is_bridge_run(args, run_dir) else "fsdp")  # nemo: the spec's NeMo image
    gpus = target.devices_per_node if target.instance.accelerator == "gpu" else 1
    # auto: CUDA where the node has it, as the trainer chooses (training/parallel/dist.py)
    device = "auto" if target.instance.accelerator == "gpu" else "cpu"
    if target.instance.accelerator == "neuron":
        raise SubmitError(f"--queue: {target.queue} has Trainium nodes; lm-eval's HF model scores on GPU or CPU")
    eval_args = ["--run-dir", str(run_dir), "--tasks-dir", str(tasks_dir),
                 "--batch-size", str(args.batch_size), "--device", device, "--gpus", str(gpus)]  # fmt: skip
    bridge = bridge_export_settings(args, run_dir, target)
    if bridge:
        eval_args += ["--hf-dir", str(bridge["BRIDGE_EXPORT_DIR"])]
    elif args.hf_dir:
        eval_args += ["--hf-dir", str(Path(args.hf_dir).resolve())]
    else:
        eval_args += ["--tokenizer", str(_tokenizer(args, run_dir))]
        if args.step is not None:
            eval_args += ["--step", str(args.step)]
        elif args.all:
            eval_args.append("--all")
        elif args.every is not None:
            eval_args += ["--every-steps", str(_every_steps(args, run_dir))]
    if args.limit is not None:
        eval_args += ["--limit", str(args.limit)]
    name = f"eval-{run_dir.name}"
    directives: list[tuple[str, str | None]] = [
        ("job-name", name),
        ("partition", args.partition or target.partition),
        ("nodes", "1"),
        ("ntasks-per-node", "1"),
    ]
    directives += target.whole_node_directives()
    if args.time:
        directives.append(("time", args.time))
    directives += [("output", str(run_dir / "logs" / "%x-%j.out")), ("open-mode", "append"), ("no-requeue", None)]
    settings: dict[str, SettingValue] = {
        "RUN_DIR": str(run_dir),
        "MAX_REQUEUES": 0,
        "PYTHON": args.python,
        "WORKDIR": str(Path(args.workdir).resolve()),
        "EVAL_ARGS": eval_args,
        "EVAL_TASKS": ",".join(tasks),  # a string: a comma inside a bash array reads as a mistake
        "TRAIN_JOB": args.after or "",
        "POLL_S": args.poll_s,
        "BRIDGE_HF_CONFIG": "",  # set for a Megatron Bridge run: its export comes first
        # The job checks the run directory's owner again before it reads anything (common.sh check_run_dir_owner).
        "OWNERSHIP_TOOL": str(Path(args.workdir).resolve() / "training" / "checkpoint" / "ownership.py"),
        "EXIT_NOT_OWNED": EXIT_NOT_OWNED,
        **bridge,
    }
    text = assemble(directives, command_line, settings, {}, JOBS_DIR, ["common.sh", "eval.sh"])
    return run_dir.parent / f"{run_dir.name}.eval.sbatch", text


@user_errors
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command_line = "llm-eval " + shlex.join(sys.argv[1:] if argv is None else argv)
    path, text = render(args, command_line)
    if args.dry_run:
        print(text)
        return 0
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    (Path(args.run_dir).resolve() / "logs").mkdir(parents=True, exist_ok=True)
    extra = list(args.sbatch_args) + ([f"--dependency=after:{args.after}"] if args.after else [])
    job = sbatch(path, None, submit_env(args.local), extra)
    print(f"{job} {path}")
    print(f"scores: {Path(args.run_dir).resolve() / 'eval'}/ (scores.md, step-N/results.json)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
