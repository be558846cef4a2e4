"""The training job's own metrics on a Prometheus endpoint, served by rank 0 (the head node's agent scrapes it).

Gauges are set at the logging interval from the record the logger writes anyway, so the step pays nothing extra;
the HTTP server is prometheus_client's own thread. A port already taken (two jobs on one node) is logged and the
job goes on without the endpoint: metrics must never stop training.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, start_http_server

log = logging.getLogger("training")

PORT_ENV = "LLM_TRAINER_METRICS_PORT"  # overrides metrics.prometheus_port (local runs, tests)
LABELS = ("slurm_job_id", "slurm_job_name", "run")
_GIB = 1 << 30

# Gauge name -> (help, key of the logger's train record, scale).
_FROM_RECORD: dict[str, tuple[str, str, float]] = {
    "llm_train_step": ("Last logged optimizer step.", "step", 1.0),
    "llm_train_loss": ("Training loss at the last logged step.", "loss", 1.0),
    "llm_train_learning_rate": ("Learning rate at the last logged step.", "lr", 1.0),
    "llm_train_grad_norm": ("Gradient norm before clipping.", "grad_norm", 1.0),
    "llm_train_tokens_per_second_per_device": ("Tokens per second per device.", "tokens_per_s", 1.0),
    "llm_train_mfu_ratio": ("Model FLOPs utilisation (0..1) against the device's peak.", "mfu", 1.0),
    "llm_train_step_seconds": ("Wall time of the last logged step.", "step_time_s", 1.0),
    "llm_train_memory_allocated_bytes": ("Peak device memory allocated by tensors.", "mem_gib", _GIB),
    "llm_train_memory_reserved_bytes": ("Device memory held by the caching allocator.", "mem_reserved_gib", _GIB),
}


def job_labels(run_name: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    return {
        "slurm_job_id": environ.get("SLURM_JOB_ID", ""),
        "slurm_job_name": environ.get("SLURM_JOB_NAME", ""),
        "run": run_name,
    }


def resolve_port(configured: int | None, environ: Mapping[str, str] = os.environ) -> int | None:
    value = environ.get(PORT_ENV, "").strip()
    if not value:
        return configured
    if not value.isdigit() or not 0 <= int(value) <= 65535:
        raise ValueError(f"{PORT_ENV}: {value!r} is not a TCP port (0 turns the endpoint off)")
    return int(value) or None


class PrometheusMetrics:
    """Rank 0's gauges and their HTTP endpoint; every method is a no-op when disabled."""

    def __init__(self, *, enabled: bool, port: int | None, address: str, labels: Mapping[str, str]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.port: int | None = None
        self._server: Any = None
        self._labels = dict(labels)
        self._gauges = {
            name: Gauge(name, help_text, LABELS, registry=self.registry).labels(**self._labels)
            for name, (help_text, _, _) in _FROM_RECORD.items()
        }
        self._tokens = Gauge(
            "llm_train_tokens_per_second", "Tokens per second, the whole job.", LABELS, registry=self.registry
        ).labels(**self._labels)
        self._world = Gauge("llm_train_world_size", "Ranks in the job.", LABELS, registry=self.registry).labels(
            **self._labels
        )
        # Labelled on the first checkpoint: before it there is no series rather than a misleading 0.
        self._checkpoint_step = Gauge(
            "llm_train_last_checkpoint_step", "Step of the last committed checkpoint.", LABELS, registry=self.registry
        )
        self._checkpoint_time = Gauge(
            "llm_train_last_checkpoint_timestamp_seconds",
            "Unix time the last checkpoint was committed (or, after a resume, when the resumed one was).",
            LABELS,
            registry=self.registry,
        )
        self._checkpoint_age = Gauge(
            "llm_train_checkpoint_age_seconds",
            "Seconds since the last committed checkpoint, computed at scrape time.",
            LABELS,
            registry=self.registry,
        ).labels(**self._labels)
        self._last_checkpoint: float | None = None
        self._started = time.time()
        self._checkpoint_age.set_function(self._age)
        if not enabled or port is None:
            return
        try:
            self._server, _ = start_http_server(port, addr=address, registry=self.registry)
        except OSError as error:
            log.warning(
                "metrics endpoint: cannot listen on %s:%d (%s); training goes on without it", address, port, error
            )
            return
        self.port = self._server.server_port
        log.info("metrics endpoint: http://%s:%d/metrics", address, self.port)

    def _age(self) -> float:
        return time.time() - (self._last_checkpoint if self._last_checkpoint is not None else self._started)

    def observe_step(self, record: Mapping[str, Any], world_size: int) -> None:
        for name, (_, key, scale) in _FROM_RECORD.items():
            value = record.get(key)
            if isinstance(value, (int, float)):
                self._gauges[name].set(float(value) * scale)
        self._tokens.set(float(record.get("tokens_per_s", 0.0)) * world_size)
        self._world.set(world_size)

    def observe_checkpoint(self, step: int, committed_at: float) -> None:
        self._checkpoint_step.labels(**self._labels).set(step)
        self._checkpoint_time.labels(**self._labels).set(committed_at)
        self._last_checkpoint = committed_at

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
