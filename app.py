#!/usr/bin/env python3
"""CDK entry point: load the deployment spec (`-c spec=path.yaml`, default: the embedded one) and wire the stacks."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from spec import SpecError, load_spec
from spec.cli import report
from spec.phase_two import example_warning
from stacks.jsii_node import silence_node_version_banner

if TYPE_CHECKING:
    from aws_cdk import App


def main(app: App | None = None) -> None:
    """`app`: the CDK CLI's (None: made here, with the CLI's context); the tests pass their own."""
    # Importing aws_cdk starts jsii's Node.js runtime: its banner variables must be set first.
    silence_node_version_banner()
    from aws_cdk import App

    from stacks.assemble import assemble

    app = app or App()
    try:
        spec = load_spec(app.node.try_get_context("spec"))
    except SpecError as error:
        sys.exit(report(error))
    warning = example_warning(spec)
    if warning:
        print(warning, file=sys.stderr)
    deployment = assemble(app, spec)
    for stack, why in deployment.skipped.items():
        print(f"note: {stack} stack not synthesized: {why}", file=sys.stderr)
    app.synth()


if __name__ == "__main__":
    main()
