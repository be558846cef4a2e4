"""The Makefile's test environments (venvs, wheelhouses) built once per machine and reused while their pins hold.

    python3 -m tests.env_cache MARKER KEY_FILE... -- BUILD COMMAND...

MARKER is the file the Makefile's target names (`.nemo-venv/.installed`); its folder is the environment. The build
command runs with $ENV_DIR set to the folder to fill, under a lock, and MARKER is written only after it succeeded,
so a killed build is built again. The folder is `<cache>/<name>-<key>/<its own name>`, where the key hashes the key
files (the target's pins), the command and this Python's version, and the repo gets a symlink to it: a fresh clone on
the same machine (CI's) links what an earlier clone built. A venv is not relocatable, so it is built where it stays;
the folder keeps its name because Node resolves a package's imports from its real path, inside a `node_modules`.

The cache is ${XDG_CACHE_HOME:-~/.cache}/llm-training-on-aws, or $LLM_TRAINING_ENV_CACHE; the value `off` builds in
the repo as before (the folder removed and rebuilt). Stdlib only: it runs before .venv exists.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

CACHE_VARIABLE = "LLM_TRAINING_ENV_CACHE"
OFF = "off"
KEY_LENGTH = 12


def cache_root(environ: dict[str, str]) -> Path | None:
    """Where environments are kept; None when the cache is turned off."""
    chosen = environ.get(CACHE_VARIABLE, "")
    if chosen == OFF:
        return None
    if chosen:
        return Path(chosen)
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llm-training-on-aws"


def environment_name(folder: Path) -> str:
    """`.nemo-venv` -> `nemo-venv`, `build/wheelhouse-test` -> `wheelhouse-test`."""
    return folder.name.lstrip(".")


def environment_key(name: str, key_files: Sequence[Path], command: Sequence[str]) -> str:
    """Changes when a pin, the build command or the Python running the build changes."""
    digest = hashlib.sha256()
    for part in (name, sys.version, *command):
        digest.update(part.encode() + b"\0")
    for path in key_files:
        digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:KEY_LENGTH]


@contextmanager
def exclusive(lock_file: Path) -> Iterator[None]:
    """One builder at a time per environment, across make -j, xdist workers and clones; released if killed."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remove(path: Path) -> None:
    """A symlink is unlinked (never what it points at); a folder is deleted."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def build(folder: Path, marker_name: str, command: Sequence[str]) -> None:
    """Empty `folder`, run the build command into it, write the marker last. Raises CalledProcessError."""
    remove(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(list(command), env={**os.environ, "ENV_DIR": str(folder)}, check=True)
    (folder / marker_name).touch()


def link(target: Path, link_path: Path) -> None:
    """Point `link_path` at `target`, replacing whatever is there (an old in-repo build, an older key's link)."""
    if link_path.is_symlink() and Path(os.readlink(link_path)) == target:
        return
    if link_path.exists() and not link_path.is_symlink():
        remove(link_path)
    link_path.parent.mkdir(parents=True, exist_ok=True)  # build/ in a fresh clone
    staged = link_path.with_name(f".{link_path.name}.link-{os.getpid()}")
    staged.unlink(missing_ok=True)
    staged.symlink_to(target, target_is_directory=True)
    os.replace(staged, link_path)  # atomic: a reader sees the old link or the new one


def ensure(marker: Path, key_files: Sequence[Path], command: Sequence[str], root: Path | None) -> str:
    """Make `marker`'s folder hold a finished build; returns one line saying what was done."""
    folder = marker.parent.absolute()
    if root is None:
        with exclusive(folder.with_name(f".{folder.name}.lock")):
            build(folder, marker.name, command)
        return f"built {folder} in place ({CACHE_VARIABLE}={OFF})"
    name = environment_name(folder)
    keyed = root / f"{name}-{environment_key(name, key_files, command)}"
    entry = keyed / folder.name
    with exclusive(root / f"{keyed.name}.lock"):
        reused = (entry / marker.name).exists()
        if reused:
            # The entry matches these pins by content; dated now, its marker is newer than the clone's pin files, so
            # a copy of the clone that keeps mtimes (the runbook's scratch checkout) sees it built, as make here does.
            (entry / marker.name).touch()
        else:
            build(entry, marker.name, command)
    link(entry, folder)
    return f"{'reused' if reused else 'built'} {entry} -> {folder.name}"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """MARKER KEY_FILE... -- COMMAND...; the command is split off first so argparse never reads its options."""
    argv = list(argv)
    ours, command = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(prog="python3 -m tests.env_cache", description=__doc__.splitlines()[0])
    parser.add_argument("marker", type=Path, help="the target's marker file, inside the environment's folder")
    parser.add_argument("key_files", type=Path, nargs="*", help="files whose content keys the environment (pins)")
    args = parser.parse_args(ours)
    args.command = command
    if not command:
        parser.error("command: missing (give the build command after --)")
    if args.marker.parent in (Path("."), Path("/")):
        parser.error(f"marker: {args.marker} must sit in the environment's own folder")
    for path in args.key_files:
        if not path.is_file():
            parser.error(f"key_files: {path} is not a file")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        line = ensure(args.marker, args.key_files, args.command, cache_root(dict(os.environ)))
    except subprocess.CalledProcessError as failed:
        print(f"env_cache: building {args.marker.parent} failed (exit {failed.returncode})", file=sys.stderr)
        return failed.returncode or 1
    print(f"env_cache: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
