"""Archives built in memory for the tests: release tarballs and Debian packages laid out as dpkg-deb does."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path


def tar_bytes(members: dict[str, bytes], mode: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


def deb_package(path: Path, data: dict[str, bytes]) -> Path:
    """A Debian package as dpkg-deb lays it out: debian-binary, control.tar.gz, data.tar.xz in an ar archive."""
    members = [
        ("debian-binary", b"2.0\n"),
        ("control.tar.gz", tar_bytes({"./control": b"Package: t\n"}, "w:gz")),
        ("data.tar.xz", tar_bytes(data, "w:xz")),
    ]
    out = bytearray(b"!<arch>\n")
    for name, body in members:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(body):<10}`\n".encode("ascii") + body
        out += b"\n" if len(body) % 2 else b""
    path.write_bytes(bytes(out))
    return path
