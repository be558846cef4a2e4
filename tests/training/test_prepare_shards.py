"""The steps of a sharded prepare without Slurm: the plan, a shard task (skipped once complete), progress and ETA,
and the merge's refusal while a shard is missing (tests/launch/test_prepare_cluster_slurm.py runs them as jobs)."""

import io
from pathlib import Path

import pytest

from training.data.errors import DataError
from training.data.indexed import bin_path
from training.data.manifest import sha256_file
from training.data.shard_plan import ShardPlan, incomplete_shards, read_plan, split_inputs, write_plan
from training.prepare import prepare_dataset
from training.prepare_shards import ShardProgress, merge_plan, prepare_shard, status_lines


def _files(directory: Path, sizes: list[int]) -> list[Path]:
    files = []
    for index, size in enumerate(sizes):
        path = directory / f"part-{index}.txt"
        path.write_text(f"document {index} " + "x" * size, encoding="utf-8")
        files.append(path)
    return files


@pytest.fixture
def plan(tmp_path: Path) -> ShardPlan:
    files = _files(tmp_path, [100, 120, 90])
    tokenizer = prepare_dataset(files, tmp_path / "tok", vocab_size_to_train=300, workers=1, show_progress=False)
    plan = ShardPlan(
        output_prefix=str(tmp_path / "out" / "corpus"),
        tokenizer=str(tokenizer.tokenizer_path),
        tokenizer_sha256=sha256_file(tokenizer.tokenizer_path),
        text_field="text",
        eod_token=None,
        shards=split_inputs(files, 2),
    )
    write_plan(plan)
    return plan


def test_shards_are_runs_of_whole_files_of_about_equal_bytes(tmp_path: Path) -> None:
    files = _files(tmp_path, [10, 10, 10, 100, 5, 5, 5, 5])
    sizes = [[item.size for item in shard] for shard in split_inputs(files, 3)]
    assert [[size - len("document 0 ") for size in shard] for shard in sizes] == [[10, 10, 10], [100], [5, 5, 5, 5]]
    assert [item.path for shard in split_inputs(files, 8) for item in shard] == [str(f) for f in files]
    with pytest.raises(DataError, match=r"^--shards: 9 is more than the 8 input files"):
        split_inputs(files, 9)


def test_a_resubmission_must_describe_the_same_work(plan: ShardPlan) -> None:
    assert read_plan(plan.directory / "plan.json") == plan
    other = ShardPlan(**{**plan.__dict__, "text_field": "content"})
    with pytest.raises(
        DataError, match=r"plan.json: text_field: this command's 'content' differs from the planned 'text'"
    ):
        write_plan(other)


def test_a_complete_shard_is_not_prepared_again(plan: ShardPlan) -> None:
    assert prepare_shard(plan, 0, out=io.StringIO()) is True
    before = bin_path(plan.shard_prefix(0)).stat()
    out = io.StringIO()
    assert prepare_shard(plan, 0, out=out) is False
    assert "complete (its manifest verifies), not prepared again" in out.getvalue()
    after = bin_path(plan.shard_prefix(0)).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    bin_path(plan.shard_prefix(0)).write_bytes(b"\0")  # truncated: no longer complete, so prepared again
    problems = incomplete_shards(plan)
    assert sorted(problems) == [0, 1] and problems[1] == "not prepared"
    assert problems[0].startswith("does not verify: ")
    assert prepare_shard(plan, 0, out=io.StringIO()) is True


def test_the_merge_names_the_missing_shard_and_writes_nothing(plan: ShardPlan) -> None:
    prepare_shard(plan, 0, out=io.StringIO())
    with pytest.raises(DataError, match=r"^shard 1 of 2 \(.*part-2.txt\): not prepared \(1 of 2 shards incomplete\)"):
        merge_plan(plan, out=io.StringIO())
    assert not Path(f"{plan.output_prefix}_text_document.bin").exists()
    assert status_lines(plan)[1].startswith("error: shard 1 of 2 (")
    prepare_shard(plan, 1, out=io.StringIO())
    merge_plan(plan, out=io.StringIO())
    assert status_lines(plan)[-1] == f"dataset         {plan.output_prefix}_text_document (--data-prefix)"


def test_progress_gives_the_fraction_read_and_an_eta() -> None:
    now = [100.0]
    out = io.StringIO()
    progress = ShardProgress("shard 0 of 2 (a.txt)", 4_000_000, every_s=10, out=out, clock=lambda: now[0])
    assert progress.line(now[0]).endswith("ETA unknown")
    now[0] += 5
    progress("x" * 1_000_000)
    assert out.getvalue() == ""  # not yet 10 s since the last line
    now[0] += 15
    progress("y" * 1_000_000)
    assert out.getvalue() == "shard 0 of 2 (a.txt): 50% of 4.0 MB read, 2 documents, 0.10 MB/s, ETA 0:00:20\n"
