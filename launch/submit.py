"""Render and submit a training job to SLURM, the same way on the head node and on the local cluster.

    python -m launch.submit --backend fsdp|nemo|neuron --model CONFIG --nodes N --data-prefix P --run-dir DIR
        [--queue Q | --local] [--spec SPEC.yaml] [--time HH:MM:SS] [--dry-run] ...

The deployment spec picks the node type (queue -> instance type -> accelerators, EFA, shared storage, container
image, Neuron SDK); the job config (the trainer's YAML) picks the model and schedule. The sbatch script is
written beside the run directory (DIR.<backend>.sbatch) and submitted; the job ids are printed one per line as
`<id> <script>`. --dry-run prints the script(s) instead and writes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from launch import lease
from launch.capacity_block import block_time_limit, parse_ends_at
from launch.checkpoint_every import with_planned_interval
from launch.data_fit import check_data_fills_splits, check_mixture_fills_validation
from launch.fit import check_fits, check_global_batch, planned_cost
from launch.float8 import float8_refusal
from launch.neuron import DEFAULT_EXEC_TIMEOUT_S, MIN_EXEC_TIMEOUT_S
from launch.options import SubmitOptions
from launch.run_dir_owner import check_run_dir_owner
from launch.scripts import RENDERERS, JobInputs, Rendered
from launch.signal_lead import job_stop_window, kill_wait_note, resolve_signal_lead
from planner.comment import plan_comment
from slurm import netenv
from slurm.backends import BACKENDS, OPTIONS, TrainingBackend
from slurm.errors import SubmitError
from slurm.submission import REPO_ROOT, SPEC_ENV, check_sbatch_args, load_command_spec, parse_time, sbatch, submit_env
from slurm.target import local_target, resolve_target
from spec.checks import container_problems
from spec.cli import OneLineParser, user_errors
from spec.cli_types import existing_directory, existing_file, output_directory
from spec.containers import ContainersSpec
from spec.errors import problems_from_pydantic
from spec.model import DeploymentSpec
from training.checkpoint.ownership import RUN_DIR_UMASK
from training.config import (
    ConfigError,
    JobConfig,
    check_sequence_fits,
    every_option,
    load_job_config,
    resolve_model_args,
)
from training.models.args import ModelArgs
from training.watchdog import hang_watchdog_note, with_planned_step

_JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m launch.submit",
        description="Render an sbatch script for a training job from the deployment spec and submit it.",
    )
    parser.add_argument(
        "--backend",
        required=True,
        choices=OPTIONS,
        help="nemo: NeMo 2 or Megatron Bridge, as the spec's cluster.containers.nemo_framework says",
    )
    parser.add_argument(
        "--model",
        required=True,
        type=lambda text: Path(existing_file(text)),
        help="the job config YAML (model, data, schedule)",
    )
    parser.add_argument("--nodes", required=True, type=int)
    parser.add_argument(
        "--data-prefix",
        help="dataset prefix: PREFIX.bin and PREFIX.idx (required unless the job YAML lists data.datasets, a mixture)",
    )
    parser.add_argument(
        "--run-dir", required=True, type=output_directory, help="checkpoints, metrics and logs (shared storage)"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--queue", help="queue from the spec's cluster section (default: the first that fits)")
    where.add_argument(
        "--local",
        action="store_true",
        help="the local CPU cluster (python -m cluster.verify.local_slurm): partition 'local', 1 rank per node, gloo",
    )
    parser.add_argument(
        "--spec",
        type=Path,
        help=f"deployment spec YAML (default: ${SPEC_ENV}, which the head node sets, else spec/default.yaml)",
    )
    parser.add_argument("--partition", help="send the script to this partition instead of the queue's")
    parser.add_argument("--time", help="time limit [D-]HH:MM:SS (default: the partition's)")
    parser.add_argument("--job-name", help="default: <backend>-<run dir name>")
    parser.add_argument("--max-steps", type=int, help="override train.max_steps")
    parser.add_argument(
        "--checkpoint-every",
        type=every_option,
        help="override checkpoint.every: steps, or off (default: the job's, else the plan's interval)",
    )
    parser.add_argument("--max-requeues", type=int, default=10, help="requeues before giving up (default 10)")
    parser.add_argument(
        "--signal-lead",
        type=int,
        help="seconds before the time limit that SLURM sends USR1 to checkpoint and requeue (default: the step plus "
        "the checkpoint's write at the spec's storage throughput, at least 300; a shorter one is refused)",
    )
    parser.add_argument(
        "--ends-at",
        help="a Capacity Block's end time, ISO 8601 with a zone (2026-12-01T11:30:00Z): the job's time limit ends "
        "where EC2 starts terminating the block's instances (30 min before), so the stop's checkpoint finishes first",
    )
    parser.add_argument("--python", default=sys.executable, help="python of the training env on the nodes")
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT, help="the repository on shared storage")
    parser.add_argument(
        "--tensor-parallel",
        type=int,
        help="nemo/neuron (neuron default: AWS's Trainium NeoX/Pythia blog's for the model)",
    )
    parser.add_argument("--pipeline-parallel", type=int, help="nemo/neuron")
    parser.add_argument("--context-parallel", type=int, help="nemo: context-parallel size (default 1)")
    parser.add_argument("--expert-parallel", type=int, help="nemo: expert-parallel size (default 1; MoE models only)")
    parser.add_argument(
        "--tokenizer",
        type=lambda text: str(existing_directory(text)),
        help="nemo/neuron: Hugging Face tokenizer directory (default: the dataset's)",
    )
    parser.add_argument("--container-image", help="nemo: image (default: the spec's cluster.containers.nemo_image)")
    parser.add_argument("--neuron-venv", default="/opt/neuron-venv", help="neuron: the Neuron python env on nodes")
    parser.add_argument(
        "--nxdt-dir",
        help="neuron: NeuronX Distributed Training's examples/ (default: <shared>/neuronx-distributed-training/examples)",
    )
    parser.add_argument(
        "--compile-steps", type=int, default=10, help="neuron: steps traced by the compile job, validation included"
    )
    parser.add_argument(
        "--neuron-exec-timeout",
        type=int,
        default=DEFAULT_EXEC_TIMEOUT_S,
        help="neuron: seconds before the runtime fails a stuck execution; a hang ends the job this long after it",
    )
    parser.add_argument("--master-port", type=int, default=41000, help="neuron: rendezvous port (reserved on nodes)")
    parser.add_argument("--nccl-debug", default="WARN", help="NCCL_DEBUG for GPU jobs: WARN, or INFO to see transports")
    parser.add_argument("--libfabric-version", default=netenv.DEFAULT_LIBFABRIC)
    parser.add_argument("--aws-ofi-nccl-version", default=netenv.DEFAULT_AWS_OFI_NCCL)
    parser.add_argument(
        "--sbatch-arg",
        dest="sbatch_args",
        action="append",
        default=[],
        metavar="ARG",
        help="extra sbatch option, repeatable (e.g. --sbatch-arg=--account=ml --sbatch-arg=--qos=big)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the script(s); write and submit nothing")
    return parser


def _positive(value: int | None, option: str) -> None:
    if value is not None and value < 1:
        raise SubmitError(f"{option}: {value} must be at least 1")


def _check_nodes_fit_the_queue(spec: DeploymentSpec, queue_name: str, nodes: int) -> None:
    queue = spec.cluster.queue(queue_name) if spec.cluster is not None else None
    if queue is not None and nodes > queue.max_count:
        raise SubmitError(f"--nodes: {nodes} is more than queue {queue.name!r} can start (max_count {queue.max_count})")


def _check_container_image(spec: DeploymentSpec, image: str) -> None:
    """The spec's own rules for cluster.containers.nemo_image, applied to the flag that overrides it."""
    if spec.cluster is None:
        return
    containers = spec.cluster.containers
    try:
        checked = ContainersSpec.model_validate({**containers.model_dump(), "nemo_image": image})
    except ValidationError as error:
        problem = next(p for p in problems_from_pydantic(error))
        raise SubmitError(f"--container-image: {image!r} {problem.message}") from None
    cluster = spec.cluster.model_copy(update={"containers": checked})
    for problem in container_problems(spec.model_copy(update={"cluster": cluster})):
        raise SubmitError(f"--container-image: {image!r} {problem.message}")


def parse_options(argv: list[str] | None = None) -> SubmitOptions:
    return SubmitOptions.from_namespace(build_parser().parse_args(argv))


def _data_overrides(options: SubmitOptions) -> dict[str, Any]:
    """--data-prefix as data.prefix, or the job YAML's mixture (data.datasets) with each prefix made absolute; each
    dataset's .bin and .idx checked."""
    try:
        job = load_job_config(options.model)
    except ConfigError as error:
        raise SubmitError(f"--model: {str(error).splitlines()[0]}") from None
    mixture = job.data.datasets
    if options.data_prefix is not None:
        if mixture is not None:
            raise SubmitError(
                f"--data-prefix: {options.data_prefix!r}: the job YAML {options.model} lists data.datasets (a "
                "mixture); leave --data-prefix out"
            )
        data_prefix = str(Path(options.data_prefix).resolve())
        _check_data(data_prefix)
        return {"data.prefix": data_prefix}
    if mixture is None:
        raise SubmitError(f"--data-prefix: required: the job YAML {options.model} lists no data.datasets mixture")
    datasets: list[dict[str, Any]] = []
    for position, dataset in enumerate(mixture):
        prefix = str(Path(dataset.prefix).resolve())
        _check_data(prefix, f"--model: data.datasets[{position}].prefix")
        datasets.append({"prefix": prefix, "weight": dataset.weight})
    _check_same_tokenizer([dataset["prefix"] for dataset in datasets])
    return {"data.datasets": datasets}


def _check_same_tokenizer(prefixes: list[str]) -> None:
    """Every dataset of a mixture must hold the ids of one tokenizer (the trainer checks it again at start)."""
    first = _dataset_manifest(prefixes[0]) or {}
    for position, prefix in enumerate(prefixes[1:], start=1):
        manifest = _dataset_manifest(prefix) or {}
        for key in ("tokenizer_sha256", "vocab_size", "eod_id"):
            if manifest.get(key) != first.get(key):
                raise SubmitError(
                    f"--model: data.datasets[{position}].prefix: {prefix}: {key} {manifest.get(key)!r} differs from "
                    f"data.datasets[0]'s {first.get(key)!r}; prepare every dataset of a mixture with one tokenizer"
                )


def _load_job(options: SubmitOptions, data: dict[str, Any], metrics_port: int | None = None) -> JobConfig:
    """The job config with the command line's overrides (`data`: from _data_overrides); on a cluster, rank 0's
    metrics endpoint listens on the spec's cluster.observability.ports.trainer (None: observability off), where the
    head node's agent scrapes."""
    try:
        job = load_job_config(options.model)
        overrides: dict[str, Any] = dict(data)
        if not options.local:
            overrides["metrics.prometheus_port"] = metrics_port
        if options.max_steps is not None:
            overrides["train.max_steps"] = options.max_steps
        if options.checkpoint_every is not None:
            overrides["checkpoint.every"] = options.checkpoint_every
        return job.with_overrides(**overrides)
    except ConfigError as error:
        raise SubmitError(f"--model: {str(error).splitlines()[0]}") from None


def _dataset_manifest(data_prefix: str) -> dict[str, Any] | None:
    path = Path(f"{data_prefix}.manifest.json")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _model_args(job: JobConfig, manifest: dict[str, Any] | None) -> ModelArgs:
    vocab = manifest.get("vocab_size") if manifest else None
    section = job.model
    if section.vocab_size == "data" and vocab is None:
        # Without the manifest the named shape's own vocabulary sizes the estimate.
        section = section.model_copy(update={"vocab_size": None})
    try:
        return resolve_model_args(section, vocab if isinstance(vocab, int) else None)
    except ConfigError as error:
        raise SubmitError(f"--model: {str(error).splitlines()[0]}") from None


def _check_data(data_prefix: str, field: str = "--data-prefix") -> None:
    missing = [suffix for suffix in (".bin", ".idx") if not Path(data_prefix + suffix).is_file()]
    if missing:
        raise SubmitError(f"{field}: {data_prefix!r} has no {' or '.join(missing)} file ({data_prefix}{missing[0]})")


_LAYOUT_FLAGS = (("tp", "tensor_parallel"), ("pp", "pipeline_parallel"), ("cp", "context_parallel"),
                 ("ep", "expert_parallel"))  # fmt: skip


def _check_layout_flags(options: SubmitOptions, backend: TrainingBackend) -> None:
    """A parallelism flag the backend's scripts would not lay out is refused, not dropped (exit 0 without TP)."""
    for dim, field in _LAYOUT_FLAGS:
        value = getattr(options, field)
        if value is not None and value > 1 and dim not in backend.model_parallel:
            flag = "--" + field.replace("_", "-")
            runs = ", ".join(f"--{f.replace('_', '-')}" for d, f in _LAYOUT_FLAGS if d in backend.model_parallel)
            what = f"lays out only {runs}" if runs else "is data parallel only (FSDP2/HSDP over every rank)"
            raise SubmitError(f"{flag}: {value}: backend {backend.option} {what}; leave it out")


def render(options: SubmitOptions, command_line: str) -> Rendered:
    for value, option in (
        (options.nodes, "--nodes"),
        (options.max_steps, "--max-steps"),
        (options.tensor_parallel, "--tensor-parallel"),
        (options.pipeline_parallel, "--pipeline-parallel"),
        (options.context_parallel, "--context-parallel"),
        (options.expert_parallel, "--expert-parallel"),
        (options.compile_steps, "--compile-steps"),
        (options.neuron_exec_timeout, "--neuron-exec-timeout"),
        (options.signal_lead, "--signal-lead"),
    ):
        _positive(value, option)
    check_sbatch_args(options.sbatch_args)
    if options.max_requeues < 0:
        raise SubmitError(f"--max-requeues: {options.max_requeues} must be 0 or more")
    if options.neuron_exec_timeout < MIN_EXEC_TIMEOUT_S:
        raise SubmitError(
            f"--neuron-exec-timeout: {options.neuron_exec_timeout} is under {MIN_EXEC_TIMEOUT_S} s: a live rank's "
            "missed heartbeats could not be told from a stopped one's (launch/liveness.py)"
        )
    if not 1 <= options.master_port <= 65535:
        raise SubmitError(f"--master-port: {options.master_port} is not a TCP port")
    if options.job_name is not None and not _JOB_NAME_RE.match(options.job_name):
        raise SubmitError(f"--job-name: {options.job_name!r} must be letters, digits, '.', '_' or '-'")
    if options.local and not any(b.local_cluster for b in BACKENDS.values() if b.option == options.backend):
        raise SubmitError(
            f"--local: --backend {options.backend} needs GPU or Trainium nodes; render it for a spec queue and pass "
            "--partition to send the script elsewhere"
        )
    metrics_port = None
    spec = None
    if options.local:
        target = local_target()
    else:
        spec = load_command_spec(options.spec)
        target = resolve_target(spec, options.backend, options.queue, options.partition)
        _check_nodes_fit_the_queue(spec, target.queue, options.nodes)
        if options.container_image is not None:
            _check_container_image(spec, options.container_image)
        observability = spec.observability
        metrics_port = observability.ports.trainer if observability.enabled else None
    if options.partition and options.local:
        target = dataclasses.replace(target, partition=options.partition)
    backend = target.backend  # --backend as the spec's container framework resolves it (slurm.backends)
    _check_layout_flags(options, backend)
    renderer = RENDERERS[backend.name]

    job = _load_job(options, _data_overrides(options), metrics_port)
    data_prefix = job.data.first_prefix  # the tokenizer's: every dataset of a mixture has the same
    options = dataclasses.replace(options, data_prefix=data_prefix)
    manifest = _dataset_manifest(data_prefix)
    model = _model_args(job, manifest)
    try:
        check_sequence_fits(job.data, model)  # the trainer, Megatron Bridge and NxDT would each fail on the nodes
    except ConfigError as error:
        raise SubmitError(f"--model: {options.model}: {str(error).splitlines()[0].removeprefix('config: ')}") from None
    model_name = job.model.name or str(job.model.hf_checkpoint)
    if backend.yaml_layout:  # the others check it with their model-parallel layout
        check_global_batch(job, target.devices_per_node * options.nodes)
    refusal = renderer.refusal(job) or float8_refusal(job, target)
    if refusal:
        raise SubmitError(refusal)
    # Megatron's SFT reads its JSONL (launch.bridge_finetune), not the .bin/.idx splits
    if job.finetune is None or backend.data_splits == "trainer":
        data_parallel = target.devices_per_node * options.nodes
        if job.data.datasets is None:
            check_data_fills_splits(backend.name, job, data_prefix, data_parallel)
        else:
            for position, prefix in enumerate(job.data.prefixes):
                field = f"--model: data.datasets[{position}].prefix"
                check_data_fills_splits(backend.name, job, prefix, data_parallel, field, in_mixture=True)
            check_mixture_fills_validation(backend.name, job, data_parallel)
    notes: list[str] = []
    plan = None
    layout = renderer.layout(options, job)
    if not target.local:
        price = spec.cluster.prices.get(target.instance.name) if spec is not None and spec.cluster else None
        plan = planned_cost(model, target, options.nodes, job, price, backend.name, layout)
        if plan is not None:
            notes.append(
                f"plan: {plan.hours:.1f} h, {plan.usd:,.0f} USD for {plan.steps} steps at backend {plan.backend}'s "
                "speed (llm-report compares)"
            )
        if plan is not None and plan.steps and plan.hours > 0 and backend.name == "fsdp":
            job = with_planned_step(job, plan.hours * 3600 / plan.steps)
            notes.append(hang_watchdog_note(job))

    fsx = spec.cluster.fsx if spec is not None and spec.cluster else None
    window = job_stop_window(job, model, target, options.nodes, backend.name, fsx, layout)
    lead = resolve_signal_lead(options.signal_lead, options.backend, window)
    options = dataclasses.replace(options, signal_lead=lead)
    if window is not None:
        notes.append(f"signal lead: {lead} s (needs {window.summary()})")
    kill_wait = kill_wait_note(window, spec.cluster if spec is not None else None)
    if kill_wait is not None:
        notes.append(kill_wait)
    if options.ends_at is not None:
        # A Capacity Block: the time limit ends where EC2 starts terminating its instances; each attempt trims it
        # again at its start (launch/jobs/common.sh trim_time_limit), as a job may wait in the queue.
        ends_by = parse_ends_at(options.ends_at)
        options = dataclasses.replace(options, time=block_time_limit(ends_by, options.time, lead))
        notes.append(f"capacity block: ends by {options.ends_at}; the job stops and saves by {lead} s before EC2 ends "
                     f"its instances (time limit {options.time})")  # fmt: skip
    if options.time and parse_time(options.time) <= lead:
        raise SubmitError(f"--signal-lead: {lead} s is not shorter than --time {options.time}")
    job, interval_note = with_planned_interval(job, window, target, options.nodes)
    if interval_note is not None:
        notes.append(interval_note)

    run_dir = options.run_dir.resolve()
    job_name = options.job_name or f"{options.backend}-{run_dir.name}"
    workdir = options.workdir.resolve()
    rendered = Rendered(scripts=[], notes=notes)

    renderer.render(
        options,
        JobInputs(
            target,
            job,
            model,
            manifest,
            data_prefix,
            run_dir,
            job_name,
            workdir,
            command_line,
            plan_comment(plan) if plan is not None else None,
        ),
        rendered,
    )
    # After the backend's own layout checks, so a layout it refuses is named in its words first.
    rendered.notes.insert(0, check_fits(job, model, target, options.nodes, backend.name, layout, model_name))
    return rendered


def write(rendered: Rendered) -> None:
    for path, text in rendered.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for destination, source in rendered.copies.items():
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(source, destination)
        except OSError as error:
            raise SubmitError(f"--tokenizer: cannot copy {source}: {error.strerror}") from None
    for script in rendered.scripts:
        script.path.parent.mkdir(parents=True, exist_ok=True)
        script.path.write_text(script.text, encoding="utf-8")
        script.path.chmod(0o750)
    # SLURM opens the log before the script runs: its directory must exist.
    for script in rendered.scripts:
        for line in script.text.splitlines():
            if line.startswith("#SBATCH --output="):
                Path(line.split("=", 1)[1]).parent.mkdir(parents=True, exist_ok=True)


@user_errors
def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    check_run_dir_owner(options.run_dir.resolve())
    command_line = "python -m launch.submit " + shlex.join(sys.argv[1:] if argv is None else argv)
    rendered = render(options, command_line)
    if options.dry_run:
        for script in rendered.scripts:
            print(f"# ===== {script.path} =====")
            print(script.text)
        return 0
    env = submit_env(options.local)
    run_dir = options.run_dir.resolve()
    previous_umask = os.umask(RUN_DIR_UMASK)  # what this writes is the user's alone; the group may read it
    try:
        run_dir.mkdir(parents=True, exist_ok=True)  # 0750, and so is a new /fsx/runs/<user>
        reclaimed = submit_into(options, rendered, run_dir, env)
    finally:
        os.umask(previous_umask)
    if reclaimed:
        print(reclaimed, file=sys.stderr)
    for note in rendered.notes:
        print(note, file=sys.stderr)
    print(f"logs: {options.run_dir.resolve() / 'logs'}/<job name>-<job id>.out", file=sys.stderr)
    return 0


def submit_into(options: SubmitOptions, rendered: Rendered, run_dir: Path, env: dict[str, str]) -> str | None:
    """Writes and submits; returns the note on a reclaimed lease, if any. One job per run directory
    (launch/lease.py): checked, written and recorded under the lease's lock, before anything in the run directory
    is rewritten."""
    ids: dict[str, str] = {}
    with lease.locked(run_dir):
        try:
            reclaimed = lease.check_free(run_dir, states=lambda: lease.slurm_job_states(env))
        except lease.LeaseHeld as held:
            raise SubmitError(str(held)) from None
        write(rendered)
        for script in rendered.scripts:
            dependency = ids[script.depends_on] if script.depends_on else None
            ids[script.name] = sbatch(script.path, dependency, env, list(options.sbatch_args))
            print(f"{ids[script.name]} {script.path}")
        lease.record(run_dir, list(ids.values()))
    return reclaimed


if __name__ == "__main__":
    raise SystemExit(main())
