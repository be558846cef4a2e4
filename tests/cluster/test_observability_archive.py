"""cluster/observability/archive.py, and the pinned Prometheus agent: Debian's package, checked against Debian's
signed package index, unpacked by our code and run."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cluster.observability.archive import ArchiveError, extract, main
from cluster.observability.units import manifest
from tests.cluster.archives import deb_package, tar_bytes

# Amazon Linux 2023 and RHEL 9 ship glibc 2.34, Ubuntu 22.04 2.35: a binary for the head node may need no newer.
OLDEST_NODE_GLIBC = (2, 34)


def test_a_file_comes_out_of_a_debian_package_and_a_tarball_executable(tmp_path: Path) -> None:
    deb = deb_package(tmp_path / "p.deb", {"./usr/bin/tool": b"#!/bin/sh\necho deb\n", "./usr/share/doc/x": b"odd"})
    written = extract(deb, "./usr/bin/tool", tmp_path / "out")
    assert written == tmp_path / "out" / "tool" and written.read_bytes() == b"#!/bin/sh\necho deb\n"
    assert written.stat().st_mode & 0o777 == 0o755
    tarball = tmp_path / "t.tar.gz"
    tarball.write_bytes(tar_bytes({"tool-1.0.linux-amd64/tool": b"tar"}, "w:gz"))
    assert extract(tarball, "tool-1.0.linux-amd64/tool", tmp_path / "t").read_bytes() == b"tar"


def test_a_missing_member_or_a_non_archive_is_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deb = deb_package(tmp_path / "p.deb", {"./usr/bin/tool": b"x"})
    with pytest.raises(ArchiveError, match=r"p\.deb: no file './usr/bin/other'"):
        extract(deb, "./usr/bin/other", tmp_path / "out")
    (tmp_path / "junk.deb").write_bytes(b"not an ar archive")
    assert main([str(tmp_path / "junk.deb"), "usr/bin/tool", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'junk.deb'}: not a Debian package (no ar magic)\n"


def _debian_package(entry: dict[str, object], into: Path) -> Path:
    """The pinned .deb from apt's cache, else downloaded by apt from the Debian archive (signature-checked index)."""
    file_name = Path(str(entry["url"])).name
    cached = Path("/var/cache/apt/archives") / file_name
    if cached.exists():
        return Path(shutil.copy(cached, into / file_name))
    version = str(entry["version"])
    result = subprocess.run(
        ["apt-get", "download", f"prometheus={version}"], cwd=into, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"apt-get download prometheus={version}: {result.stderr.strip()}"
    return into / file_name


def test_the_pinned_prometheus_is_debians_package_its_sha256_is_debians_and_it_runs_on_the_nodes_glibc(
    tmp_path: Path,
) -> None:
    entry = manifest()["prometheus"]
    version = str(entry["version"])
    index = subprocess.run(
        ["apt-cache", "show", f"prometheus={version}"], capture_output=True, text=True, check=False
    ).stdout
    fields = dict(line.split(": ", 1) for line in index.splitlines() if ": " in line and not line.startswith(" "))
    assert fields.get("SHA256") == entry["sha256"], f"Debian's index says {fields.get('SHA256')} for {version}"
    assert str(entry["url"]).endswith("/" + fields["Filename"])
    deb = _debian_package(entry, tmp_path)
    assert hashlib.sha256(deb.read_bytes()).hexdigest() == entry["sha256"]
    binary = extract(deb, str(entry["binary"]), tmp_path / "bin")
    shown = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True).stdout
    assert f"revision: {version}" in shown
    assert "agent" in subprocess.run([str(binary), "--help"], capture_output=True, text=True, check=False).stdout
    needs = subprocess.run(["objdump", "-T", str(binary)], capture_output=True, text=True, check=True).stdout
    newest = max(tuple(int(part) for part in found.split(".")) for found in re.findall(r"GLIBC_(\d+\.\d+)", needs))
    assert newest <= OLDEST_NODE_GLIBC, f"needs glibc {newest}, the nodes have {OLDEST_NODE_GLIBC}"
