"""Rank 0's Prometheus endpoint: its gauges, and a taken port that only logs (metrics never stop a job)."""

from __future__ import annotations

import logging
import socket
import threading
import urllib.request

import pytest

from training.metrics.prometheus import PrometheusMetrics, resolve_final_scrape, resolve_port

pytestmark = pytest.mark.scrape


def test_the_trainer_endpoint_serves_its_gauges_and_a_taken_port_only_logs(caplog: pytest.LogCaptureFixture) -> None:
    labels = {"slurm_job_id": "7", "slurm_job_name": "fsdp-run", "run": "run"}
    metrics = PrometheusMetrics(enabled=True, port=0, address="127.0.0.1", labels=labels)
    try:
        assert metrics.port is not None
        before = urllib.request.urlopen(f"http://127.0.0.1:{metrics.port}/metrics").read().decode()
        assert "llm_train_last_checkpoint_step{" not in before  # no checkpoint yet: no series, not a 0
        metrics.observe_step({"step": 3, "loss": 2.5, "tokens_per_s": 100.0, "mem_gib": 1.0}, world_size=2)
        metrics.observe_checkpoint(2, 1000.0)
        body = urllib.request.urlopen(f"http://127.0.0.1:{metrics.port}/metrics").read().decode()
        assert 'llm_train_tokens_per_second{run="run",slurm_job_id="7",slurm_job_name="fsdp-run"} 200.0' in body
        assert (
            'llm_train_memory_allocated_bytes{run="run",slurm_job_id="7",slurm_job_name="fsdp-run"} 1.073741824e+09'
            in body
        )
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            with caplog.at_level(logging.WARNING, logger="training"):
                second = PrometheusMetrics(
                    enabled=True, port=taken.getsockname()[1], address="127.0.0.1", labels=labels
                )
            assert second.port is None and "training goes on without it" in caplog.text
            second.observe_step({"step": 1, "loss": 1.0, "tokens_per_s": 1.0}, world_size=1)
    finally:
        metrics.close()


def test_the_port_comes_from_the_environment_for_local_runs_and_a_bad_one_is_named() -> None:
    assert resolve_port(9500, {}) == 9500
    assert resolve_port(9500, {"LLM_TRAINER_METRICS_PORT": "9601"}) == 9601
    assert resolve_port(9500, {"LLM_TRAINER_METRICS_PORT": "0"}) is None
    with pytest.raises(ValueError, match="LLM_TRAINER_METRICS_PORT: 'http' is not a TCP port"):
        resolve_port(9500, {"LLM_TRAINER_METRICS_PORT": "http"})


def _scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()


def test_the_endpoint_stays_open_until_a_scraper_has_taken_the_last_values() -> None:
    labels = {"slurm_job_id": "7", "slurm_job_name": "fsdp-run", "run": "run"}
    metrics = PrometheusMetrics(enabled=True, port=0, address="127.0.0.1", labels=labels, final_scrape_s=600)
    assert metrics.port is not None
    port = metrics.port
    _scrape(port)  # before the last values: does not count
    metrics.observe_step({"step": 9, "loss": 2.0, "tokens_per_s": 50.0}, world_size=2)
    bodies: list[str] = []
    scraper = threading.Thread(target=lambda: bodies.extend(_scrape(port) for _ in range(2)))
    waiting = threading.Thread(target=metrics.close)
    waiting.start()
    assert waiting.is_alive()  # open until two scrapes after the last values have started
    scraper.start()
    scraper.join()
    waiting.join()
    assert 'llm_train_step{run="run",slurm_job_id="7",slurm_job_name="fsdp-run"} 9.0' in bodies[0]
    with pytest.raises(OSError):
        _scrape(port)  # closed once the last values were taken


def test_without_a_scraper_the_end_is_bounded_and_without_a_bound_it_does_not_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    labels = {"slurm_job_id": "", "slurm_job_name": "", "run": "run"}
    unwatched = PrometheusMetrics(enabled=True, port=0, address="127.0.0.1", labels=labels, final_scrape_s=0.05)
    unwatched.observe_step({"step": 1, "loss": 1.0, "tokens_per_s": 1.0}, world_size=1)
    with caplog.at_level(logging.WARNING, logger="training"):
        assert unwatched.wait_for_final_scrape() is False
    assert "no scrape took the last values within 0 s" in caplog.text
    unwatched.close()
    off = PrometheusMetrics(enabled=True, port=0, address="127.0.0.1", labels=labels)
    assert off.wait_for_final_scrape() is False and off.scrapes.started == 0
    off.close()


def test_the_final_scrape_bound_comes_from_the_environment_and_a_bad_one_is_named() -> None:
    assert resolve_final_scrape(0.0, {}) == 0.0
    assert resolve_final_scrape(0.0, {"LLM_TRAINER_FINAL_SCRAPE_S": "600"}) == 600.0
    for bad in ("soon", "-1", "inf", "nan"):
        with pytest.raises(ValueError, match=f"LLM_TRAINER_FINAL_SCRAPE_S: '{bad}' is not a number of seconds"):
            resolve_final_scrape(0.0, {"LLM_TRAINER_FINAL_SCRAPE_S": bad})
