"""argparse types for the commands' options: each refuses a bad value at parse time, so OneLineParser reports it
in one line naming the option and the value (`argument --dest: '/x/file' is a file, not a directory`)."""

from __future__ import annotations

import argparse
import math
import re
import urllib.parse
from pathlib import Path

# EC2's image ids (8 or 17 hex digits) and S3's bucket-name grammar; the spec's own fields use the same rules.
_AMI_RE = re.compile(r"^ami-[0-9a-f]{8}(?:[0-9a-f]{9})?$")
_S3_URI_RE = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](?:/[A-Za-z0-9!_.*'()/=+-]*)?$")


def finite_float(text: str) -> float:
    """A number that is not NaN or infinite (a NaN compares false with every bound, so it slips past them)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return value


def non_negative_float(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def _file_on_the_way(path: Path) -> Path | None:
    """The path itself or its nearest existing ancestor when that is not a directory: nothing can be made there."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def output_directory(text: str) -> Path:
    """A directory the command writes into: it may not exist yet, but neither it nor a parent may be a file."""
    path = Path(text)
    blocker = _file_on_the_way(path)
    if blocker is not None:
        where = "" if blocker == path else f" ({str(blocker)!r} is a file)"
        raise argparse.ArgumentTypeError(f"{text!r} is not a directory{where}")
    return path


def output_prefix(text: str) -> str:
    """A file-name prefix (PREFIX_text_document.bin): its directory may not exist yet, but may not be a file."""
    if not text or text.endswith("/"):
        raise argparse.ArgumentTypeError(f"{text!r} must end in a file-name prefix, not a directory")
    output_directory(str(Path(text).parent))
    return text


def existing_directory(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is {'a file' if path.exists() else 'missing'}, not a directory")
    return path


def existing_file(text: str) -> str:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is {'a directory' if path.exists() else 'missing'}, not a file")
    return text


def ami_id(text: str) -> str:
    if not _AMI_RE.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an AMI id (ami- and 8 or 17 hex digits)")
    return text


def s3_uri(text: str) -> str:
    if not _S3_URI_RE.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an S3 URI (s3://BUCKET/KEY, a lowercase bucket name)")
    return text


# An AWS CLI profile name: what the CLI's config file takes in `[profile NAME]` (no spaces, brackets or empty name).
_PROFILE_RE = re.compile(r"^[A-Za-z0-9_.@+-]{1,64}$")


def http_url(text: str) -> str:
    """An endpoint URL: http(s)://host[:port][/path], as boto3 takes it (a bare host fails only at the first call)."""
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s):// URL with a host")
    try:
        parsed.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} has a port that is not a number") from None
    return text


def profile_name(text: str) -> str:
    if not _PROFILE_RE.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an AWS CLI profile name")
    return text
