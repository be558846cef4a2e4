import tomllib
from pathlib import Path

import pytest

from bench.torchtitan_v0_2_job import TRAIN_SPEC_NAME, TorchtitanV02Job, job_toml


def _job(tmp_path: Path, **changes: object) -> TorchtitanV02Job:
    fields: dict[str, object] = dict(
        corpus_dir=tmp_path / "corpus", tokenizer_dir=tmp_path / "tok", dump_folder=tmp_path / "out",
        seq_len=4096, micro_batch=4, steps=50, ac="none", compiled=True,
    )  # fmt: skip
    fields.update(changes)
    return TorchtitanV02Job(**fields)  # type: ignore[arg-type]


def test_the_toml_carries_the_same_run_shape_as_ours(tmp_path: Path) -> None:
    job = tomllib.loads(job_toml(_job(tmp_path)))
    assert job["model"] == {"name": TRAIN_SPEC_NAME, "flavor": "1B", "hf_assets_path": str(tmp_path / "tok")}
    training = job["training"]
    assert (training["seq_len"], training["local_batch_size"], training["steps"]) == (4096, 4, 50)
    assert training["dataset"] == "c4_test" and training["dataset_path"] == str(tmp_path / "corpus")
    assert (training["mixed_precision_param"], training["mixed_precision_reduce"]) == ("bfloat16", "float32")
    assert job["compile"] == {"enable": True, "components": ["model", "loss"]}
    assert job["activation_checkpoint"] == {"mode": "none"} and job["checkpoint"] == {"enable": False}
    assert job["experimental"]["custom_import"] == "bench.torchtitan_v0_2_spec"


def test_a_path_toml_cannot_hold_plainly_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be written as a plain TOML string"):
        job_toml(_job(tmp_path, dump_folder=Path('/tmp/a"b')))
    with pytest.raises(ValueError, match="--ac: 'full' is not one of none, selective"):
        job_toml(_job(tmp_path, ac="full"))
