"""The sbatch scripts of each backend: directives, settings and environment, assembled from launch/jobs/.

Each backend of slurm.backends.BACKENDS has a Renderer here (RENDERERS, under the same name): it adds its script(s)
and the configs they read (written into the run directory) to a Rendered, and says which model-parallel layout
those scripts give the job, which the planner times. A script's body is launch/jobs/<--backend option>.sh.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from launch import lease
from launch.bridge import CONFIG_NAME as BRIDGE_CONFIG_NAME
from launch.bridge import bridge_config, bridge_hf_config, hf_config_path
from launch.capacity_block import parse_ends_at
from launch.liveness import heartbeat_bounds
from launch.nemo import nemo_config
from launch.neuron import default_parallelism, nxdt_config
from launch.nxdt_contract import finetune_refusal
from launch.options import SubmitOptions
from launch.vocab import TOKENIZER_FILE, check_vocabulary, tokenizer_rows
from slurm import netenv
from slurm.errors import SubmitError
from slurm.render import SettingValue, assemble
from slurm.submission import parse_time
from slurm.target import Target
from spec.containers import pyxis_image
from training.checkpoint.replica_location import REPLICA_ENV, ReplicaError, replica_url
from training.config import JobConfig
from training.models.args import ModelArgs
from training.parallel.dims import ParallelDims
from training.signals import (
    EXIT_CHECKPOINT_FAILED,
    EXIT_CONFIG_ERROR,
    EXIT_HANG,
    EXIT_LOSS_GUARD,
    EXIT_NOT_OWNED,
    EXIT_REQUEUE,
    EXIT_STATUS_FILE,
)

# The static bash parts of every job script (common.sh and one body per backend).
JOBS_DIR = Path(__file__).resolve().parent / "jobs"
NO_REQUEUE_CODES = (EXIT_CONFIG_ERROR, EXIT_LOSS_GUARD, EXIT_CHECKPOINT_FAILED, EXIT_NOT_OWNED)


@dataclass(frozen=True)
class JobScript:
    name: str  # e.g. "fsdp", "neuron-compile"
    path: Path
    text: str
    depends_on: str | None = None  # name of the script whose job must succeed first


@dataclass
class Rendered:
    scripts: list[JobScript]
    files: dict[Path, str] = field(default_factory=dict)  # configs written into the run directory
    copies: dict[Path, Path] = field(default_factory=dict)  # destination -> source
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class JobInputs:
    """What every backend builds from: the resolved target, job config and paths."""

    target: Target
    job: JobConfig
    model: ModelArgs
    manifest: dict[str, Any] | None
    data_prefix: str
    run_dir: Path
    job_name: str
    workdir: Path
    command_line: str
    # The planner's estimate as the job's comment (planner.report's format); sacct keeps it for llm-report.
    plan_comment: str | None = None

    @property
    def script_base(self) -> Path:
        return self.run_dir.parent / self.run_dir.name


def _directives(
    options: SubmitOptions,
    target: Target,
    job_name: str,
    run_dir: Path,
    tasks_per_node: int,
    requeue: bool,
    comment: str | None = None,
) -> list[tuple[str, str | None]]:
    directives: list[tuple[str, str | None]] = [
        ("job-name", job_name),
        ("partition", target.partition),
        ("nodes", str(options.nodes)),
        ("ntasks-per-node", str(tasks_per_node)),
    ]
    directives += target.whole_node_directives()
    if options.time:
        directives.append(("time", options.time))
    directives += [("output", str(run_dir / "logs" / "%x-%j.out")), ("open-mode", "append")]
    if requeue:
        directives += [("requeue", None), ("signal", f"B:USR1@{options.resolved_signal_lead}")]
    else:
        directives.append(("no-requeue", None))
    if comment:
        directives.append(("comment", comment))
    return directives


def _common_settings(
    options: SubmitOptions, run_dir: Path, stop_signal: str, status_file: str, checkpoints_on_stop: bool = True
) -> dict[str, SettingValue]:
    return {
        "RUN_DIR": str(run_dir),
        "MAX_REQUEUES": options.max_requeues,
        "STEP_STOP_SIGNAL": stop_signal,
        "STEP_CHECKPOINTS_ON_STOP": int(checkpoints_on_stop),
        "EXIT_REQUEUE": EXIT_REQUEUE,
        "NO_REQUEUE_CODES": " ".join(str(code) for code in NO_REQUEUE_CODES),
        "EXIT_STATUS_FILE": status_file,
        "EXIT_HANG": EXIT_HANG,
        "PYTHON": options.python,
        # One job per run directory (launch/lease.py, run by path: stdlib only).
        "LEASE_TOOL": str(options.workdir.resolve() / "launch" / "lease.py"),
        "EXIT_LEASE_HELD": lease.EXIT_HELD,
        "LEASE_HEARTBEAT_S": lease.HEARTBEAT_S,
        # The run directory must be the job user's (training/checkpoint/ownership.py, run by path: stdlib only).
        "OWNERSHIP_TOOL": str(options.workdir.resolve() / "training" / "checkpoint" / "ownership.py"),
        "EXIT_NOT_OWNED": EXIT_NOT_OWNED,
        # --ends-at: the epoch second a Capacity Block's instances start to terminate ("" without one).
        "ENDS_BY": str(parse_ends_at(options.ends_at)) if options.ends_at else "",
        "TIME_LIMIT_S": parse_time(options.time) if options.time else "",
    }


def _tokenizer_dir(
    options: SubmitOptions, run_dir: Path, manifest: dict[str, Any] | None, rendered: Rendered, model: ModelArgs
) -> str:
    """A Hugging Face tokenizer directory for NeMo/NxDT: --tokenizer, or the dataset's tokenizer.json made into one;
    either no larger than the declared vocabulary (launch.vocab)."""
    if options.tokenizer:
        tokenizer_json = Path(options.tokenizer) / TOKENIZER_FILE
        check_vocabulary(model, tokenizer_rows(tokenizer_json, "--tokenizer"), "--tokenizer", tokenizer_json)
        return options.tokenizer
    tokenizer_file = manifest.get("tokenizer_file") if manifest else None
    data_prefix = options.data_prefix  # a mixture's first dataset: all of them have the same tokenizer
    if not tokenizer_file or data_prefix is None:
        raise SubmitError(
            f"--tokenizer: needed for --backend {options.backend} (a Hugging Face tokenizer directory); the dataset "
            f"manifest {data_prefix}.manifest.json names no tokenizer file"
        )
    source = Path(data_prefix).parent / tokenizer_file
    check_vocabulary(model, tokenizer_rows(source, "--data-prefix"), "--data-prefix", source)
    directory = run_dir / "tokenizer"
    rendered.copies[directory / "tokenizer.json"] = source
    rendered.files[directory / "tokenizer_config.json"] = json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": manifest.get("eod_token") if manifest else None},
        indent=2,
    )
    return str(directory)


def _yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def _container_mounts(shared_dir: str | None, paths: list[Path]) -> str:
    """pyxis --container-mounts: the shared file system, plus any job path outside it."""
    mounts: list[str] = [f"{shared_dir}:{shared_dir}"] if shared_dir else []
    for path in paths:
        if shared_dir and (path == Path(shared_dir) or Path(shared_dir) in path.parents):
            continue
        entry = f"{path}:{path}"
        if entry not in mounts:
            mounts.append(entry)
    return ",".join(mounts)


def _add_script(
    rendered: Rendered,
    options: SubmitOptions,
    inputs: JobInputs,
    name: str,
    settings: dict[str, SettingValue],
    env: dict[str, str],
    requeue: bool = True,
    depends_on: str | None = None,
) -> None:
    backend = name.split("-", 1)[0]
    job_name = inputs.job_name if name == backend else f"{inputs.job_name}-{name.split('-', 1)[1]}"
    # The plan is the training run's: only the training job carries it (a Neuron compile job would count it twice).
    comment = inputs.plan_comment if name in (backend, f"{backend}-train") else None
    text = assemble(
        _directives(options, inputs.target, job_name, inputs.run_dir, 1, requeue=requeue, comment=comment),
        inputs.command_line,
        settings,
        env,
        JOBS_DIR,
        ["common.sh", f"{backend}.sh"],
    )
    rendered.scripts.append(JobScript(name, Path(f"{inputs.script_base}.{name}.sbatch"), text, depends_on))


def _replica_env(target: Target, run_dir: Path) -> dict[str, str]:
    """Where the job copies its committed checkpoints (the spec's data.checkpoint_replica), if anywhere."""
    if target.checkpoint_replica is None:
        return {}
    try:
        return {REPLICA_ENV: replica_url(target.checkpoint_replica, run_dir)}
    except ReplicaError as error:
        raise SubmitError(str(error)) from None


def _replica_watch_settings(options: SubmitOptions, target: Target) -> dict[str, SettingValue]:
    """For a framework's job (common.sh replica_*): its checkpoint layout, and how long the watcher's final pass
    may take once the step has ended (the stop window: a time-limit stop leaves no more)."""
    return {
        "CHECKPOINT_LAYOUT": target.backend.checkpoint_layout,
        "REPLICA_FINAL_PASS_S": options.resolved_signal_lead,
    }


def fsdp_scripts(options: SubmitOptions, inputs: JobInputs, rendered: Rendered) -> None:
    target, run_dir = inputs.target, inputs.run_dir
    env = {**netenv.common_env(), **(netenv.cpu_env() if target.local else {})}
    if target.instance.accelerator == "gpu":
        env.update(netenv.gpu_env(target, options.libfabric_version, options.aws_ofi_nccl_version, options.nccl_debug))
        env.update(netenv.torch_cuda_env())
    env.update(_replica_env(target, run_dir))
    config_path = run_dir / "job-config.yaml"
    rendered.files[config_path] = _yaml(inputs.job.model_dump(mode="json"))
    settings: dict[str, SettingValue] = {
        **_common_settings(options, run_dir, "USR1", str(run_dir / EXIT_STATUS_FILE)),
        "WORKDIR": str(inputs.workdir),
        "TORCHRUN": str(Path(options.python).parent / "torchrun"),
        "NPROC_PER_NODE": target.workers_per_node,
        "JOB_CONFIG": str(config_path),
        # torchrun waits this long for ranks to checkpoint after forwarding a stop signal, then kills them.
        "SHUTDOWN_TIMEOUT_S": options.resolved_signal_lead,
        "LIBRARY_DIRS": list(netenv.EFA_LIBRARY_DIRS) if target.efa and target.instance.accelerator == "gpu" else [],
    }
    _add_script(rendered, options, inputs, "fsdp", settings, env)


def _megatron_layout(options: SubmitOptions) -> ParallelDims:
    return ParallelDims(
        tp=options.tensor_parallel or 1,
        pp=options.pipeline_parallel or 1,
        cp=options.context_parallel or 1,
        ep=options.expert_parallel or 1,
    )


def _megatron_env(options: SubmitOptions, target: Target, run_dir: Path) -> dict[str, str]:
    return {
        **netenv.common_env(),
        **netenv.gpu_env(target, options.libfabric_version, options.aws_ofi_nccl_version, options.nccl_debug),
        **netenv.nemo_env(),
        **_replica_env(target, run_dir),
    }


def nemo2_scripts(options: SubmitOptions, inputs: JobInputs, rendered: Rendered) -> None:
    """NeMo 2 (the nemo-25.07 container): launch/jobs/nemo_pretrain.py runs NeMo's recipe with our overrides."""
    if inputs.job.finetune is not None:
        raise SubmitError(
            f"finetune: needs Megatron Bridge's SFT/PEFT recipes (cluster.containers.nemo_framework "
            f"megatron-bridge-*); the spec's {inputs.target.nemo_framework} has no fine-tuning path here"
        )
    tokenizer = _tokenizer_dir(options, inputs.run_dir, inputs.manifest, rendered, inputs.model)
    config = nemo_config(
        inputs.job, inputs.model, inputs.target, options.nodes, inputs.run_dir, tokenizer, _megatron_layout(options)
    )
    config_path = inputs.run_dir / "nemo-config.yaml"
    rendered.files[config_path] = _yaml(config)
    _add_megatron_script(options, inputs, rendered, config_path, _megatron_env(options, inputs.target, inputs.run_dir))


def bridge_scripts(options: SubmitOptions, inputs: JobInputs, rendered: Rendered) -> None:
    """Megatron Bridge (the default container): launch/jobs/bridge_pretrain.py runs its recipe (or SFT/PEFT)."""
    target, run_dir = inputs.target, inputs.run_dir
    tokenizer = _tokenizer_dir(options, run_dir, inputs.manifest, rendered, inputs.model)
    layout = _megatron_layout(options)
    config = bridge_config(inputs.job, inputs.model, target, options.nodes, run_dir, tokenizer, layout)
    config_path = run_dir / BRIDGE_CONFIG_NAME
    rendered.files[hf_config_path(config)] = json.dumps(bridge_hf_config(inputs.model), indent=2) + "\n"
    rendered.files[config_path] = _yaml(config)
    # The recipe's model comes from the rendered config directory; nothing may try the Hub (no route to it).
    env = {**_megatron_env(options, target, run_dir), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    _add_megatron_script(options, inputs, rendered, config_path, env)


def _add_megatron_script(
    options: SubmitOptions,
    inputs: JobInputs,
    rendered: Rendered,
    config_path: Path,
    env: dict[str, str],
) -> None:
    """nemo.sh in the pyxis container, running the backend's entry point (launch/jobs) on the rendered config."""
    target, run_dir = inputs.target, inputs.run_dir
    entry_point = target.backend.entry_point
    if entry_point is None:
        raise SubmitError(f"--backend: {target.backend.name!r} names no NeMo Framework entry point to run")
    image = options.container_image or target.container_image
    if not image:
        raise SubmitError("--container-image: no image given and the spec names none")
    if image.startswith("/") and not (target.shared_dir and image.startswith(target.shared_dir.rstrip("/") + "/")):
        raise SubmitError(
            f"--container-image: {image} is not on the cluster's shared file system ({target.shared_dir or 'none'}); "
            "every node must read it"
        )
    data_dirs = [Path(prefix).parent for prefix in inputs.job.data.prefixes]
    mounts = _container_mounts(target.shared_dir, [inputs.workdir, run_dir, *data_dirs])
    settings: dict[str, SettingValue] = {
        # The entry point checkpoints on USR1 (NeMo 2: PreemptionCallback; Megatron Bridge: train.exit_signal);
        # rank 0 writes the exit status, every rank an error.
        **_common_settings(options, run_dir, "USR1", str(run_dir / EXIT_STATUS_FILE)),
        "NEMO_ENTRY": entry_point,
        "WORKDIR": str(inputs.workdir),
        "NPROC_PER_NODE": target.workers_per_node,
        "CONTAINER_IMAGE": pyxis_image(image),
        "CONTAINER_MOUNTS": mounts,
        "NEMO_CONFIG": str(config_path),
        **_replica_watch_settings(options, target),
    }
    _add_script(rendered, options, inputs, "nemo", settings, env)


def default_nxdt_dir(shared_dir: str | None) -> str:
    """NxDT's examples/ (training_orchestrator.py, not in its wheel) on shared storage: where docs/jobs.md unpacks
    the mirror's nxdt-examples.tar.gz."""
    return f"{shared_dir or '/fsx'}/neuronx-distributed-training/examples"


def neuron_scripts(options: SubmitOptions, inputs: JobInputs, rendered: Rendered) -> None:
    """A compile job (neuron_parallel_compile over a few steps) and the training job that depends on it."""
    target, run_dir = inputs.target, inputs.run_dir
    tokenizer = _tokenizer_dir(options, run_dir, inputs.manifest, rendered, inputs.model)
    default_tp, default_pp = default_parallelism(inputs.job.model.name)
    tp, pp = options.tensor_parallel or default_tp, options.pipeline_parallel or default_pp
    config = nxdt_config(
        inputs.job, inputs.model, target, options.nodes, run_dir, tokenizer, tp, pp, options.neuron_exec_timeout
    )
    beat_s, stale_s = heartbeat_bounds(options.neuron_exec_timeout)
    config_name = "nxdt-config"
    rendered.files[run_dir / f"{config_name}.yaml"] = _yaml(config)
    env = {**netenv.common_env(), **netenv.neuron_env(target), **_replica_env(target, run_dir)}
    nxdt_dir = options.nxdt_dir or default_nxdt_dir(target.shared_dir)
    # Traced steps: enough for the training graphs and, with a validation pass at the last one, the validation
    # graphs too (NxDT's own compile mode traces 10). They must never leave a checkpoint to resume from.
    compile_overrides = [
        f"trainer.max_steps={options.compile_steps}",
        f"trainer.val_check_interval={options.compile_steps}",
        f"exp_manager.explicit_log_dir={run_dir / 'nxdt-compile'}",
        "exp_manager.create_checkpoint_callback=False",
        "exp_manager.create_tensorboard_logger=False",
        "exp_manager.resume_if_exists=False",
    ]
    train_overrides = [f"exp_manager.explicit_log_dir={run_dir / 'nxdt'}"]
    for mode, overrides in (("compile", compile_overrides), ("train", train_overrides)):
        settings: dict[str, SettingValue] = {
            # NxDT has no stop-signal checkpoint: a time-limit requeue resumes from the last periodic checkpoint.
            **_common_settings(options, run_dir, "TERM", "", checkpoints_on_stop=False),
            "NEURON_MODE": mode,
            "NEURON_VENV": options.neuron_venv,
            "NXDT_DIR": nxdt_dir,
            "NXDT_CONFIG_DIR": str(run_dir),
            "NXDT_CONFIG_NAME": config_name,
            "NXDT_OVERRIDES": overrides,
            "NPROC_PER_NODE": target.workers_per_node,
            "MASTER_PORT": options.master_port,
            "WORKDIR": str(inputs.workdir),
            # Which rank stopped answering when the runtime fails a stuck execution (launch/liveness.py, run by
            # path: stdlib only). The training job only: the compile job traces a few steps and is not requeued.
            "LIVENESS_TOOL": str(options.workdir.resolve() / "launch" / "liveness.py") if mode == "train" else "",
            "LIVENESS_INTERVAL_S": beat_s,
            "LIVENESS_STALE_S": stale_s,
            **_replica_watch_settings(options, target),
        }
        depends = "neuron-compile" if mode == "train" else None
        _add_script(
            rendered, options, inputs, f"neuron-{mode}", settings, env, requeue=mode == "train", depends_on=depends
        )


class Renderer(Protocol):
    """How a backend becomes sbatch scripts (one per slurm.backends.BACKENDS entry, under its name)."""

    def layout(self, options: SubmitOptions, job: JobConfig) -> ParallelDims:
        """The model-parallel layout the scripts give the job (what the planner times)."""
        ...

    def refusal(self, job: JobConfig) -> str | None:
        """Why the backend cannot run this job config at all (one line), checked before anything is planned."""
        ...

    def render(self, options: SubmitOptions, inputs: JobInputs, rendered: Rendered) -> None:
        """Adds the backend's script(s) and the configs they read to `rendered`."""
        ...


@dataclass(frozen=True)
class FlagLayoutRenderer:
    """Scripts laid out as the --tensor/--pipeline/--context-parallel flags say, 1 where left out."""

    render: Callable[[SubmitOptions, JobInputs, Rendered], None]

    def layout(self, options: SubmitOptions, job: JobConfig) -> ParallelDims:
        return ParallelDims(
            tp=options.tensor_parallel or 1, pp=options.pipeline_parallel or 1, cp=options.context_parallel or 1
        )

    def refusal(self, job: JobConfig) -> str | None:
        return None


@dataclass(frozen=True)
class NeuronRenderer:
    render: Callable[[SubmitOptions, JobInputs, Rendered], None] = neuron_scripts

    def layout(self, options: SubmitOptions, job: JobConfig) -> ParallelDims:
        """NxDT's layout when the flags leave it out: AWS's Trainium blog's for the model (launch.neuron)."""
        default_tp, default_pp = default_parallelism(job.model.name)
        tp, pp = options.tensor_parallel or default_tp, options.pipeline_parallel or default_pp
        return ParallelDims(tp=tp, pp=pp, cp=options.context_parallel or 1)

    def refusal(self, job: JobConfig) -> str | None:
        """A finetune: section the recorded NxDT contract cannot render (launch.nxdt_contract)."""
        return finetune_refusal(job.finetune.mode) if job.finetune else None


RENDERERS: dict[str, Renderer] = {
    "fsdp": FlagLayoutRenderer(fsdp_scripts),
    "nemo2": FlagLayoutRenderer(nemo2_scripts),
    "bridge": FlagLayoutRenderer(bridge_scripts),
    "neuron": NeuronRenderer(),
}
