"""Parse pcluster command lines with ParallelCluster's own CLI parser, calling nothing. Runs under .pcluster-venv.

stdin: JSON {"commands": [[arg, ...], ...]} (each without the leading `pcluster`). stdout: JSON list, one entry per
command: null when the parser accepts it, else its error message. File arguments (--cluster-configuration,
--image-configuration) are not read: the parser's file reader is replaced by the identity.
"""

import contextlib
import io
import json
import os
import sys
from typing import Any

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

import pcluster.cli.entrypoint as entrypoint
import pcluster.cli.model
from pcluster.cli.exceptions import ParameterException


def parser() -> Any:
    entrypoint.read_file = lambda _param, path: path
    model = pcluster.cli.model.load_model(pcluster.cli.model.package_spec())
    argument_parser, parser_map = entrypoint.gen_parser(model)
    entrypoint.add_cli_commands(parser_map)
    return argument_parser


def problem(argument_parser: Any, argv: list[str]) -> str | None:
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            args, extra = argument_parser.parse_known_args(argv)
    except SystemExit:
        lines = said.getvalue().strip().splitlines()
        return lines[-1] if lines else "rejected"
    except ParameterException as failure:  # a value that fails the parameter's pattern
        data = failure.args[0] if failure.args else None
        return str(data.get("message")) if isinstance(data, dict) else str(failure)
    if extra and not getattr(args, "expects_extra_args", False):
        return f"unrecognized arguments: {' '.join(extra)}"
    return None


def main() -> None:
    request = json.load(sys.stdin)
    argument_parser = parser()
    json.dump([problem(argument_parser, list(argv)) for argv in request["commands"]], sys.stdout)


if __name__ == "__main__":
    main()
