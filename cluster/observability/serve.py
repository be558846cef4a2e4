"""Serve one collector on its own registry (no process or GC metrics: the node exporter covers the host)."""

from __future__ import annotations

import logging
import signal
import threading

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.registry import Collector


def serve_forever(collector: Collector, address: str, port: int, name: str) -> None:
    logging.basicConfig(level=logging.INFO, format=f"{name}: %(message)s")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, thread = start_http_server(port, addr=address, registry=registry)
    logging.getLogger(name).info("serving /metrics on %s:%d", address, port)
    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    thread.join(timeout=5)
