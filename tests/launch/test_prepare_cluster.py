"""llm-prepare-cluster's scripts and queue without Slurm (the job array itself: test_prepare_cluster_slurm.py)."""

import contextlib
import io
from pathlib import Path

import pytest
import yaml

from launch.prepare_cluster import main
from training.prepare import prepare_dataset

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[list[str], Path]:
    files = []
    for index in range(3):
        path = tmp_path / f"part-{index}.txt"
        path.write_text(f"document {index} " * 20, encoding="utf-8")
        files.append(str(path))
    tokenizer = prepare_dataset(files, tmp_path / "tok", vocab_size_to_train=300, workers=1, show_progress=False)
    return files, tokenizer.tokenizer_path


def _spec(tmp_path: Path, cpu_queue: bool) -> Path:
    spec = yaml.safe_load((REPO / "spec" / "default.yaml").read_text())
    if cpu_queue:
        spec["cluster"]["queues"].append(
            {"name": "cpu", "instance_type": "c6i.8xlarge", "max_count": 4, "placement_group": False}
        )
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _dry_run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("cpu_queue", "partition"), [(True, "cpu"), (False, "gpu")])
def test_tasks_run_on_the_spec_s_cpu_queue_else_its_first_queue_whole_nodes(
    inputs: tuple[list[str], Path], tmp_path: Path, cpu_queue: bool, partition: str
) -> None:
    files, tokenizer = inputs
    argv = ["--input", *files, "--output-prefix", str(tmp_path / "out" / "c"), "--tokenizer", str(tokenizer),
            "--shards", "2", "--spec", str(_spec(tmp_path, cpu_queue)), "--dry-run"]  # fmt: skip
    code, out, err = _dry_run(argv)
    assert code == 0, err
    assert out.count(f"#SBATCH --partition={partition}\n") == 2  # the array task and the merge
    assert out.count("#SBATCH --exclusive\n") == 1  # the tasks take whole nodes; the merge is one process
    assert "#SBATCH --gpus-per-node" not in out  # a GPU node's cores, not its GPUs
    assert f'"path": "{files[2]}"' in out
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


def test_an_unknown_queue_is_one_line_naming_it(inputs: tuple[list[str], Path], tmp_path: Path) -> None:
    files, tokenizer = inputs
    argv = ["--input", *files, "--output-prefix", str(tmp_path / "c"), "--tokenizer", str(tokenizer),
            "--shards", "2", "--spec", str(_spec(tmp_path, False)), "--queue", "cpu", "--dry-run"]  # fmt: skip
    code, _, err = _dry_run(argv)
    assert code == 2
    assert err.strip().startswith("error: --queue: no queue named 'cpu' (known: gpu)")
