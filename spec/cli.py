"""The one CLI contract: a UserError (spec.errors) becomes `error: <line>` on stderr, one per problem, and
exit status 2, the status argparse gives a bad option. Every `main` of the repo is wrapped in user_errors.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, ParamSpec

from spec.errors import UserError

if TYPE_CHECKING:
    from spec.model import DeploymentSpec

EXIT_USAGE = 2
_P = ParamSpec("_P")
# The head-node bootstrap exports it (/etc/profile.d/llm-training.sh): the spec the cluster was deployed from.
SPEC_ENV = "LLM_TRAINING_SPEC"


def load_command_spec(option: Path | None, error: type[UserError]) -> DeploymentSpec:
    """The spec a command works on: its --spec, else $LLM_TRAINING_SPEC (the head node's), else spec/default.yaml.
    One that does not load raises `error` with one line naming --spec."""
    from spec.errors import SpecError
    from spec.load import load_spec  # spec.load imports the model, which the CLI contract does not need

    try:
        return load_spec(option or os.environ.get(SPEC_ENV) or None)
    except SpecError as problem:
        raise error(f"--spec: {str(problem).splitlines()[0]}") from None


def report(error: UserError) -> int:
    """Print the error the contract's way and return the exit status."""
    for line in str(error).splitlines() or [type(error).__name__]:
        print(f"error: {line}", file=sys.stderr)
    return EXIT_USAGE


def user_errors(main: Callable[_P, int | None]) -> Callable[_P, int]:
    """Wrap a CLI's main: its UserErrors are reported (exit 2), its return value is the exit status."""

    @functools.wraps(main)
    def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> int:
        try:
            return main(*args, **kwargs) or 0
        except UserError as error:
            return report(error)

    return wrapped


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line (`<prog>: error: <message>`, exit 2) instead of the whole usage block:
    every command's parser, so a mistyped option reads like any other bad input. Subparsers inherit it."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")
