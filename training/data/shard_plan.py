"""A sharded prepare's plan: which input files each shard tokenizes, with which tokenizer, and where it writes.

`llm-prepare-cluster` writes the plan into `<output prefix>_shards/plan.json`; each array task prepares one shard
into `shard-NNNNN_text_document.{bin,idx,manifest.json}` beside it, and the merge job concatenates them, in shard
order, into `<output prefix>_text_document`: the files one `llm-prepare` over all the inputs writes. A shard whose
manifest is complete and verifies is never prepared again, so a resubmitted plan redoes only what is missing.
"""

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from training.data.errors import DataError
from training.data.manifest import manifest_path
from training.data.verify import verify_dataset

PLAN_FORMAT = 1
PLAN_NAME = "plan.json"


@dataclass(frozen=True)
class InputFile:
    path: str
    size: int


@dataclass(frozen=True)
class ShardPlan:
    output_prefix: str  # the merged dataset is data_prefix_of(output_prefix), as `llm-prepare` writes it
    tokenizer: str
    tokenizer_sha256: str
    text_field: str
    eod_token: str | None
    shards: list[list[InputFile]]
    format: int = PLAN_FORMAT

    @property
    def directory(self) -> Path:
        return shard_directory(self.output_prefix)

    def shard_prefix(self, index: int) -> Path:
        """What shard `index` writes: `<directory>/shard-NNNNN_text_document` (the array task's output prefix
        without the suffix `_text_document`)."""
        return self.directory / f"shard-{index:05d}_text_document"

    def shard_output_prefix(self, index: int) -> Path:
        return self.directory / f"shard-{index:05d}"

    def describe(self, index: int) -> str:
        """`shard 1 of 4 (data/b.jsonl, data/c.jsonl)`: how errors and progress name a shard."""
        files = [item.path for item in self.shards[index]]
        listed = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        return f"shard {index} of {len(self.shards)} ({listed})"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


def shard_directory(output_prefix: str | Path) -> Path:
    return Path(f"{output_prefix}_shards")


def split_inputs(files: list[Path], count: int) -> list[list[InputFile]]:
    """`count` runs of neighbouring files of about equal bytes, in input order (so the merge keeps the order)."""
    if count < 1:
        raise DataError(f"--shards: {count} must be at least 1")
    if count > len(files):
        raise DataError(
            f"--shards: {count} is more than the {len(files)} input files; a shard is a run of whole files "
            "(split the corpus into more files)"
        )
    sized = [InputFile(path=str(path), size=path.stat().st_size) for path in files]
    total = sum(item.size for item in sized)
    shards: list[list[InputFile]] = []
    start, before = 0, 0  # the first file of the next shard, and the bytes before it
    for index in range(count - 1):
        target = total * (index + 1) / count
        last_start = len(sized) - (count - 1 - index)  # leaves one file for each shard after this one
        stop = start + 1
        before += sized[start].size
        while stop < last_start and before + sized[stop].size / 2 <= target:
            before += sized[stop].size
            stop += 1
        shards.append(sized[start:stop])
        start = stop
    shards.append(sized[start:])
    return shards


def write_plan(plan: ShardPlan) -> Path:
    """Writes the plan, or checks it against the one already there: a resubmission must describe the same work."""
    path = plan.directory / PLAN_NAME
    if path.is_file():
        existing = read_plan(path)
        for name in ("output_prefix", "tokenizer_sha256", "text_field", "eod_token", "shards"):
            if getattr(existing, name) != getattr(plan, name):
                raise DataError(
                    f"{path}: {name}: this command's {getattr(plan, name)!r} differs from the planned "
                    f"{getattr(existing, name)!r}; give another --output-prefix, or remove {plan.directory}"
                )
        return path
    plan.directory.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(plan.to_json(), encoding="utf-8")
    os.replace(partial, path)
    return path


def read_plan(path: str | Path) -> ShardPlan:
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: no such plan (llm-prepare-cluster writes it)") from None
    except (OSError, ValueError) as error:
        raise DataError(f"{path}: not a readable plan: {error}") from None
    if not isinstance(raw, dict) or raw.get("format") != PLAN_FORMAT:
        raise DataError(f"{path}: format: {raw.get('format') if isinstance(raw, dict) else raw!r} is not {PLAN_FORMAT}")
    try:
        return ShardPlan(**{**raw, "shards": [[InputFile(**item) for item in shard] for shard in raw["shards"]]})
    except (TypeError, KeyError) as error:
        raise DataError(f"{path}: not a plan: {error}") from None


def shard_problem(plan: ShardPlan, index: int) -> str | None:
    """None when shard `index` is complete: its manifest verifies (sizes, header, counts) and records this plan's
    tokenizer and input files; else why not, in a few words."""
    prefix = plan.shard_prefix(index)
    if not manifest_path(prefix).is_file():
        return "not prepared"
    try:
        manifest = verify_dataset(prefix)
    except DataError as error:
        return f"does not verify: {error}"
    if manifest.tokenizer_sha256 != plan.tokenizer_sha256:
        return "prepared with another tokenizer"
    if [(s.path, s.size) for s in manifest.sources] != [(f.path, f.size) for f in plan.shards[index]]:
        return "prepared from other input files"
    return None


def incomplete_shards(plan: ShardPlan) -> dict[int, str]:
    """Each shard still to prepare, with why."""
    problems = {index: shard_problem(plan, index) for index in range(len(plan.shards))}
    return {index: problem for index, problem in problems.items() if problem is not None}
