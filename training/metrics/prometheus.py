"""The training job's own metrics on a Prometheus endpoint, served by rank 0 (the head node's agent scrapes it).

Gauges are set at the logging interval from the record the logger writes anyway, so the step pays nothing extra;
the HTTP server is prometheus_client's own thread. A port already taken (two jobs on one node) is logged and the
job goes on without the endpoint: metrics must never stop training.

A job shorter than a few scrape intervals would end before its last values were scraped (or before any were), so
rank 0 can hold the endpoint open at the end until a scraper has taken the final values: `final_scrape_s`, from
metrics.prometheus_final_scrape_s or $LLM_TRAINER_FINAL_SCRAPE_S, bounds that wait (0: no wait).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, start_http_server

log = logging.getLogger("training")

PORT_ENV = "LLM_TRAINER_METRICS_PORT"  # overrides metrics.prometheus_port (local runs, tests)
FINAL_SCRAPE_ENV = "LLM_TRAINER_FINAL_SCRAPE_S"  # overrides metrics.prometheus_final_scrape_s (the demo's watch)
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


def resolve_final_scrape(configured: float, environ: Mapping[str, str] = os.environ) -> float:
    value = environ.get(FINAL_SCRAPE_ENV, "").strip()
    if not value:
        return configured
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"{FINAL_SCRAPE_ENV}: {value!r} is not a number of seconds >= 0 (0: no wait)")
    return seconds


class ScrapeCounter:
    """Counts the scrapes that have started (a collector's collect() runs once per scrape) and lets a thread wait
    for a number of them. Registered first, so a counted scrape reads the gauges after it was counted."""

    def __init__(self) -> None:
        self._started = 0
        self._changed = threading.Condition()

    def collect(self) -> Iterator[Any]:
        with self._changed:
            self._started += 1
            self._changed.notify_all()
        return iter(())

    @property
    def started(self) -> int:
        with self._changed:
            return self._started

    def wait_for(self, count: int, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._started >= count, timeout_s)


class PrometheusMetrics:
    """Rank 0's gauges and their HTTP endpoint; every method is a no-op when disabled."""

    def __init__(
        self,
        *,
        enabled: bool,
        port: int | None,
        address: str,
        labels: Mapping[str, str],
        final_scrape_s: float = 0.0,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.scrapes = ScrapeCounter()
        self.registry.register(self.scrapes)
        self._final_scrape_s = final_scrape_s
        self._scrapes_at_last_value = 0
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
        self._scrapes_at_last_value = self.scrapes.started

    def observe_checkpoint(self, step: int, committed_at: float) -> None:
        self._checkpoint_step.labels(**self._labels).set(step)
        self._checkpoint_time.labels(**self._labels).set(committed_at)
        self._last_checkpoint = committed_at
        self._scrapes_at_last_value = self.scrapes.started

    def wait_for_final_scrape(self) -> bool:
        """Until the last values have been scraped, at most final_scrape_s. A scraper takes one target a scrape at
        a time, so the start of a second scrape after the last values proves the first one's answer was taken."""
        if self._server is None or self._final_scrape_s <= 0:
            return False
        wanted = self._scrapes_at_last_value + 2
        if self.scrapes.wait_for(wanted, self._final_scrape_s):
            log.info("metrics endpoint: the last values were scraped")
            return True
        log.warning("metrics endpoint: no scrape took the last values within %.0f s; closing", self._final_scrape_s)
        return False

    def close(self) -> None:
        self.wait_for_final_scrape()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
