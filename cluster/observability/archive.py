"""One file out of a pinned upstream archive: a release tarball (.tar.gz) or a Debian package (.deb).

    python -m cluster.observability.archive ARCHIVE MEMBER DEST_DIR

A .deb is an `ar` archive whose `data.tar.*` holds the installed tree; it is read here with the standard library
so a node needs neither binutils' `ar` nor dpkg (Amazon Linux and RHEL have no dpkg). The archive's sha256 is
checked by the caller (cluster/bootstrap/observability.sh) before this runs.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from spec.cli import OneLineParser, user_errors
from spec.errors import UserError

_AR_MAGIC = b"!<arch>\n"
_AR_HEADER_BYTES = 60


class ArchiveError(UserError):
    """An archive without the member it should hold, or not an archive at all."""


def _ar_members(data: bytes, path: Path) -> Iterator[tuple[str, bytes]]:
    if not data.startswith(_AR_MAGIC):
        raise ArchiveError(f"{path}: not a Debian package (no ar magic)")
    offset = len(_AR_MAGIC)
    while offset + _AR_HEADER_BYTES <= len(data):
        header = data[offset : offset + _AR_HEADER_BYTES]
        name = header[:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        start = offset + _AR_HEADER_BYTES
        yield name, data[start : start + size]
        offset = start + size + (size % 2)  # members are padded to an even offset


def _open(path: Path) -> tarfile.TarFile:
    """The tar to read: a .deb's data.tar, else the archive itself."""
    if not path.name.endswith(".deb"):
        return tarfile.open(path, mode="r:*")
    for name, body in _ar_members(path.read_bytes(), path):
        if name.startswith("data.tar"):
            return tarfile.open(fileobj=io.BytesIO(body), mode="r:*")  # xz or gz, as dpkg-deb chose
    raise ArchiveError(f"{path}: Debian package without a data.tar member")


def extract(archive: Path, member: str, dest_dir: Path) -> Path:
    """Write `member` of `archive` to dest_dir/<its file name>, executable; the path written."""
    with _open(archive) as bundle:
        wanted = member.removeprefix("./")
        found = next((info for info in bundle.getmembers() if info.name.removeprefix("./") == wanted), None)
        if found is None or not found.isfile():
            raise ArchiveError(f"{archive}: no file {member!r} in it (binaries.json's 'binary' names it)")
        source = bundle.extractfile(found)
        assert source is not None  # a regular file always has contents
        dest_dir.mkdir(parents=True, exist_ok=True)
        target = dest_dir / Path(wanted).name
        partial = target.with_name(target.name + ".part")
        with source, partial.open("wb") as out:
            shutil.copyfileobj(source, out)
        partial.chmod(0o755)
        partial.replace(target)
    return target


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m cluster.observability.archive", description=__doc__)
    parser.add_argument("archive", type=Path)
    parser.add_argument("member", help="path of the file inside the archive (for a .deb, inside its data.tar)")
    parser.add_argument("dest_dir", type=Path)
    args = parser.parse_args(argv)
    try:
        print(extract(args.archive, args.member, args.dest_dir))
    except (OSError, tarfile.TarError) as error:
        raise ArchiveError(f"{args.archive}: {error}") from None
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
