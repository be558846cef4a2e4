"""Run one of our commands up to its argument parser and no further: `python parse_only.py MODULE[:FUNC] ARGS...`.

argparse's parse_args / parse_known_args are wrapped so that the command's own (outermost) parse, once it succeeds,
exits 0 with a marker on stderr; a refused argument exits 2 with argparse's own message, as the real command would
(parse_args refuses leftovers after its inner parse_known_args). A command that returns
or fails before parsing anything is a finding (it does not parse its arguments with argparse)."""

from __future__ import annotations

import argparse
import importlib
import runpy
import sys
from typing import Any

MARKER = "runbook: arguments parsed"


class _Parsed(SystemExit):
    pass


def _intercept() -> None:
    real_parse_args = argparse.ArgumentParser.parse_args
    real_parse_known_args = argparse.ArgumentParser.parse_known_args
    depth = [0]  # parse_args calls parse_known_args, then refuses leftovers: only the outermost call decides

    def done(parser: argparse.ArgumentParser) -> None:
        if depth[0] == 0 and not getattr(parser, "_runbook_sub", False):
            print(f"{MARKER}: {parser.prog}", file=sys.stderr)
            raise _Parsed(0)

    def parse_args(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        depth[0] += 1
        try:
            result = real_parse_args(self, *args, **kwargs)
        finally:
            depth[0] -= 1
        done(self)
        return result

    def parse_known_args(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        depth[0] += 1
        try:
            result = real_parse_known_args(self, *args, **kwargs)
        finally:
            depth[0] -= 1
        done(self)
        return result

    real_add_subparsers = argparse.ArgumentParser.add_subparsers

    def add_subparsers(self: argparse.ArgumentParser, **kwargs: Any) -> Any:
        action = real_add_subparsers(self, **kwargs)
        real_add_parser = action.add_parser

        def add_parser(name: str, **inner: Any) -> argparse.ArgumentParser:
            parser = real_add_parser(name, **inner)
            parser._runbook_sub = True  # type: ignore[attr-defined]
            return parser

        action.add_parser = add_parser  # type: ignore[method-assign]
        return action

    argparse.ArgumentParser.parse_args = parse_args  # type: ignore[method-assign]
    argparse.ArgumentParser.parse_known_args = parse_known_args  # type: ignore[method-assign]
    argparse.ArgumentParser.add_subparsers = add_subparsers  # type: ignore[method-assign]


def main() -> int:
    target, args = sys.argv[1], sys.argv[2:]
    _intercept()
    module, _, func = target.partition(":")
    try:
        if func:
            sys.argv = [module, *args]
            getattr(importlib.import_module(module), func)()
        elif module.endswith(".py"):
            sys.argv = [module, *args]
            runpy.run_path(module, run_name="__main__")
        else:
            sys.argv = [module, *args]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except _Parsed:
        return 0
    print(f"runbook: {target} ended without parsing its arguments with argparse", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
