"""Stage the pinned upstream binaries (cluster/observability/binaries.json) for a cluster without internet:

    python -m cluster.observability.fetch_binaries --out build/wheelhouse/observability   (make observability-binaries)

Run on a machine with internet; then `aws s3 sync build/wheelhouse s3://BUCKET/PREFIX/` with the wheelhouse. A
file whose sha256 differs from its pin is refused; an entry not pinned yet is reported with the sha256 measured,
for a person to check against the upstream release page and pin, and is not staged.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from cluster.observability.units import MANIFEST, manifest
from spec.cli import OneLineParser, user_errors


def stage(out: Path, manifest_path: Path = MANIFEST) -> tuple[list[str], list[str]]:
    """(staged file names, problems); a problem line names the entry and what is wrong."""
    out.mkdir(parents=True, exist_ok=True)
    staged, problems = [], []
    for name, entry in manifest(manifest_path).items():
        url = str(entry["url"])
        target = out / Path(url).name
        partial = target.with_suffix(target.suffix + ".part")
        with urllib.request.urlopen(url, timeout=120) as response, partial.open("wb") as file:
            shutil.copyfileobj(response, file)
        measured = hashlib.sha256(partial.read_bytes()).hexdigest()
        pinned = entry.get("sha256")
        if pinned is None:
            problems.append(f"{name} {entry['version']}: not pinned; measured sha256 {measured} of {url}")
            partial.unlink()
        elif measured != pinned:
            problems.append(f"{name} {entry['version']}: sha256 {measured} of {url} is not the pinned {pinned}")
            partial.unlink()
        else:
            partial.replace(target)
            staged.append(target.name)
    return staged, problems


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m cluster.observability.fetch_binaries", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    staged, problems = stage(args.out)
    for name in staged:
        print(f"staged {args.out / name}")
    for problem in problems:
        print(f"fetch_binaries: {problem}", file=sys.stderr)
    return 1 if any("is not the pinned" in problem for problem in problems) else 0


if __name__ == "__main__":
    sys.exit(main())
