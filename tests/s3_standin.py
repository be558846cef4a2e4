"""A local S3 stand-in for tests: moto's server (the pinned moto[server]) over real HTTP on a port the OS picks, with
the environment boto3 reads to reach it (`AWS_ENDPOINT_URL_S3`, test credentials). The code under test uses its
ordinary client; nothing in it knows about the stand-in."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from moto.server import ThreadedMotoServer


@contextmanager
def s3_standin() -> Iterator[dict[str, str]]:
    """Yields the environment a process needs to reach the server (set in os.environ meanwhile)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def s3_bucket_standin(bucket: str) -> Iterator[str]:
    """The stand-in with `bucket` made, through the repo's own client (training.stage): yields the endpoint URL."""
    from training.stage import make_client

    with s3_standin() as env:
        make_client("us-east-1", None, 4).create_bucket(Bucket=bucket)
        yield env["AWS_ENDPOINT_URL_S3"]
