"""python -m training.corpus --output FILE.jsonl: write the standard-library docstring corpus."""

import sys
from collections.abc import Sequence

from spec.cli import OneLineParser, user_errors
from training.corpus import build_corpus


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m training.corpus", description=__doc__)
    parser.add_argument("--output", required=True, metavar="FILE.jsonl", help="where to write the corpus")
    args = parser.parse_args(argv)
    path = build_corpus(args.output)
    with path.open(encoding="utf-8") as handle:
        documents = sum(1 for _ in handle)
    print(f"wrote {path}: {documents} documents, {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
