"""jsii's Node.js runtime prints an 11-line banner on stderr when the Node.js it runs on is past end-of-life,
deprecated or untested; CDK apps start it when they import aws_cdk. The repo's Node.js is pinned where the CDK
CLI runs (make setup), so the banner says nothing the reader can act on per synth: the CDK entry point silences it
here, before the import, so `npx cdk synth` is as quiet as `make synth` (whose Makefile sets the same variables).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import MutableMapping

# jsii reads these when its runtime starts: any value silences the two flags; the end-of-life one is a
# comma-separated list of the Node.js major versions to stay quiet about.
FLAG_VARIABLES = ("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION")
END_OF_LIFE_VARIABLE = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"


def node_major_version(node: str) -> str | None:
    """The major version of the Node.js jsii will start ('20' for v20.20.2); None when it cannot be run."""
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    version = done.stdout.strip().removeprefix("v")
    major = version.split(".", 1)[0]
    return major if done.returncode == 0 and major.isdigit() else None


def silence_node_version_banner(environ: MutableMapping[str, str] | None = None) -> None:
    """Set jsii's silencing variables in `environ` (the process's), keeping whatever the user set."""
    env = os.environ if environ is None else environ
    for name in FLAG_VARIABLES:
        env.setdefault(name, "1")
    major = node_major_version(env.get("JSII_NODE", "node"))
    if major is None:
        return
    quiet = [item.strip() for item in env.get(END_OF_LIFE_VARIABLE, "").split(",") if item.strip()]
    if major not in quiet:
        env[END_OF_LIFE_VARIABLE] = ",".join([*quiet, major])
