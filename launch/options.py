"""What `python -m launch.submit` was asked for, as one typed value: launch/submit.py builds it from its
command line; the renderers (launch/scripts.py) read it. Defaults live in the parser only."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from pathlib import Path


@dataclass(frozen=True)
class SubmitOptions:
    backend: str
    model: Path  # the job config YAML
    nodes: int
    data_prefix: str | None  # None: the job YAML's data.datasets (a mixture)
    run_dir: Path
    queue: str | None
    local: bool
    spec: Path | None
    partition: str | None
    time: str | None  # [D-]HH:MM:SS
    job_name: str | None
    max_steps: int | None
    checkpoint_every: int | str | None
    max_requeues: int
    signal_lead: int | None  # seconds before the time limit that SLURM sends USR1; None: derived (launch.signal_lead)
    ends_at: str | None  # a Capacity Block's end, ISO 8601: the job's time limit ends before EC2 ends its instances
    python: str  # the training env's python on the nodes
    workdir: Path  # the repository on shared storage
    tensor_parallel: int | None
    pipeline_parallel: int | None
    context_parallel: int | None
    expert_parallel: int | None
    tokenizer: str | None
    container_image: str | None
    neuron_venv: str
    nxdt_dir: str | None
    compile_steps: int
    neuron_exec_timeout: int
    master_port: int
    nccl_debug: str
    libfabric_version: str
    aws_ofi_nccl_version: str
    sbatch_args: tuple[str, ...]
    dry_run: bool

    @property
    def resolved_signal_lead(self) -> int:
        """The lead the scripts carry: launch.submit.render() sets it (given and checked, or derived) first."""
        if self.signal_lead is None:
            raise TypeError("signal_lead is resolved by launch.submit.render() before the scripts are built")
        return self.signal_lead

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> SubmitOptions:
        """Every field from the parser's namespace, which must hold exactly these names."""
        values = vars(args)
        names = {f.name for f in fields(cls)}
        if set(values) != names:
            raise TypeError(f"the parser's options {sorted(set(values) ^ names)} do not match SubmitOptions")
        return cls(**{**values, "sbatch_args": tuple(values["sbatch_args"])})
