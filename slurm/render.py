"""Assembling an sbatch script: #SBATCH directives, a block of shell-quoted settings, then static bash parts
from a parts directory (launch/jobs/: shared functions and the backend's body). The rendered script is self-contained, so a
pending job is unaffected by later edits to the repository.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")

SettingValue = str | int | float | Sequence[str]


def shell_value(value: SettingValue) -> str:
    """A bash right-hand side: quoted scalars, or a parenthesised array of quoted words."""
    if isinstance(value, str):
        return shlex.quote(value)
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return str(value)
    return "(" + " ".join(shlex.quote(item) for item in value) + ")"


def settings_block(settings: Mapping[str, SettingValue], exported: Mapping[str, str]) -> str:
    """`NAME=value` lines for the script's own settings, `export NAME=value` for the job environment."""
    lines = []
    for name, value in settings.items():
        if not _NAME_RE.match(name):
            raise ValueError(f"setting name {name!r} is not an upper-case shell variable")
        lines.append(f"{name}={shell_value(value)}")
    for name, value in exported.items():
        if not _NAME_RE.match(name):
            raise ValueError(f"environment variable {name!r} is not an upper-case shell variable")
        lines.append(f"export {name}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"


def sbatch_directives(options: Sequence[tuple[str, str | None]]) -> str:
    """`#SBATCH --name=value` (or `#SBATCH --flag` for a None value); SLURM parses these, not bash."""
    lines = []
    for name, value in options:
        if value is not None and any(char in value for char in "\n\r"):
            raise ValueError(f"#SBATCH --{name}: {value!r} cannot span lines")
        lines.append(f"#SBATCH --{name}" if value is None else f"#SBATCH --{name}={value}")
    return "\n".join(lines) + "\n"


def static_part(parts_dir: Path, name: str) -> str:
    text = (parts_dir / name).read_text(encoding="utf-8")
    # Drop the part's own shebang/shellcheck header: the assembled script has one.
    body = [line for line in text.splitlines() if not line.startswith(("#!", "# shellcheck shell="))]
    return "\n".join(body).strip("\n") + "\n"


def assemble(
    directives: Sequence[tuple[str, str | None]],
    command_line: str,
    settings: Mapping[str, SettingValue],
    environment: Mapping[str, str],
    parts_dir: Path,
    parts: Sequence[str],
) -> str:
    """The script; each part is read from parts_dir and headed by its path below the repository's root."""
    sections = [
        # Some shared functions go unused by a backend, and the signal handlers run from traps: not dead code.
        "#!/bin/bash\n# shellcheck disable=SC2317\n" + sbatch_directives(directives),
        "# Rendered by: " + command_line.replace("\n", " ") + "\n"
        "# Edit the submit options and render again rather than editing this file.\n",
        "# ---- settings ----\n" + settings_block(settings, environment),
    ]
    label = f"{parts_dir.parent.name}/{parts_dir.name}"
    sections += [f"# ---- {label}/{part} ----\n" + static_part(parts_dir, part) for part in parts]
    return "\n".join(sections)
