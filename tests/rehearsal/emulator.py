"""moto's server as the rehearsal's AWS: started on 127.0.0.1 at a port the OS picks, waited on until it answers,
always stopped; and one IAM user per account for the AWS CLI profiles.

Accounts, moto's way: a request's account is the one whose IAM holds its access key (moto.iam.models.
get_account_id_from), and STS AssumeRole into a role ARN of another account returns a key of that account. So each
profile's user is created with credentials from AssumeRole into that account; the CDK CLI then assumes the bootstrap
roles (cdk-hnb659fds-deploy-role-ACCOUNT-REGION, ...) and lands in the same account.
"""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
RUNNING = re.compile(r"Running on http://127\.0\.0\.1:(\d+)")
# Bounds for a hung system, not estimates: the server starts in about a second.
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30
SEED_KEY = ("rehearsal-seed-key", "rehearsal")  # any key moto does not know (its default account); not key-like
USER = "rehearsal"


@dataclass
class Server:
    endpoint: str
    log: Path
    process: subprocess.Popen[bytes]
    exit_status: int | None = None

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=5) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False


@contextmanager
def moto_server(log: Path) -> Iterator[Server]:
    """The patched moto server (tests/rehearsal/moto_server.py) for the duration of the block."""
    out = log.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.rehearsal.moto_server"],
        cwd=REPO,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    server = Server("", log, process)
    try:

        def port() -> str | None:
            if process.poll() is not None:
                raise AssertionError(f"moto's server exited with {process.returncode}:\n{server.text()}")
            match = RUNNING.search(server.text())
            return match.group(1) if match else None

        server.endpoint = f"http://127.0.0.1:{wait_until(port, 'moto server to print its port', START_TIMEOUT_S)}"
        wait_until(server.answers, f"moto server to answer on {server.endpoint}/moto-api/", START_TIMEOUT_S)
        yield server
    finally:
        process.terminate()
        try:
            server.exit_status = process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            server.exit_status = process.wait()
        out.close()


def session(endpoint: str, key: tuple[str, str, str | None], region: str) -> Any:
    import boto3

    return boto3.Session(
        aws_access_key_id=key[0], aws_secret_access_key=key[1], aws_session_token=key[2], region_name=region
    )


def account_user(endpoint: str, account: str, region: str) -> tuple[str, str]:
    """An access key of a new IAM user of `account` in the emulator."""
    seed = session(endpoint, (*SEED_KEY, None), region)
    credentials = seed.client("sts", endpoint_url=endpoint).assume_role(
        RoleArn=f"arn:aws:iam::{account}:role/{USER}", RoleSessionName=USER
    )["Credentials"]
    admin = session(
        endpoint, (credentials["AccessKeyId"], credentials["SecretAccessKey"], credentials["SessionToken"]), region
    )
    iam = admin.client("iam", endpoint_url=endpoint)
    iam.create_user(UserName=USER)
    key = iam.create_access_key(UserName=USER)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def write_profiles(
    endpoint: str, profiles: dict[str, str], region: str, config: Path, credentials: Path
) -> dict[str, tuple[str, str]]:
    """AWS CLI profiles (name -> account) whose keys belong to those accounts in the emulator, checked with STS;
    each profile's key."""
    config_lines: list[str] = []
    credential_lines: list[str] = []
    keys = {}
    for name, account in profiles.items():
        key_id, secret = keys[name] = account_user(endpoint, account, region)
        whoami = session(endpoint, (key_id, secret, None), region).client("sts", endpoint_url=endpoint)
        seen = whoami.get_caller_identity()["Account"]
        if seen != account:
            raise AssertionError(f"profile {name}: the emulator puts its key in account {seen}, not {account}")
        config_lines += [f"[profile {name}]", f"region = {region}", ""]
        credential_lines += [f"[{name}]", f"aws_access_key_id = {key_id}", f"aws_secret_access_key = {secret}", ""]
    config.write_text("\n".join(config_lines))
    credentials.write_text("\n".join(credential_lines))
    return keys
