import json
import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from tests.training.jobs import tiny_job
from training.checkpoint.hf_load import load_hf_weights
from training.export import load_checkpoint_model, main
from training.models.hf import args_from_hf_config
from training.models.transformer import build_model
from training.train import main as train


@pytest.fixture(scope="module")
def trained_run(demo_data_prefix: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import yaml

    root = tmp_path_factory.mktemp("export")
    job = tiny_job(demo_data_prefix, train={"max_steps": 4}, checkpoint={"every": 2, "keep_last": 3})
    (root / "job.yaml").write_text(yaml.safe_dump(job))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert train(["--config", str(root / "job.yaml"), "--run-dir", str(root / "run")]) == 0
    finally:
        torch.set_num_threads(threads)
    return root / "run"


def test_export_is_one_safetensors_file_that_loads_back_with_the_same_logits(trained_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "hf"
    assert main(["--run-dir", str(trained_run), "--output", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["tie_word_embeddings"] is True
    with safe_open(str(out / "model.safetensors"), framework="pt") as handle:
        assert "model.layers.1.mlp.down_proj.weight" in set(handle.keys())

    original = load_checkpoint_model(trained_run / "checkpoints" / "step-4")
    args = args_from_hf_config(config)
    reloaded = build_model(args, device="meta").to_empty(device="cpu")
    load_hf_weights(reloaded, args, out)
    ids = torch.randint(0, args.vocab_size, (2, 32))
    torch.testing.assert_close(reloaded(ids), original(ids), rtol=0, atol=0)


def test_export_of_an_earlier_step_in_bf16_with_the_tokenizer(
    trained_run: Path, demo_data_prefix: str, tmp_path: Path
) -> None:
    tokenizer = Path(demo_data_prefix.removesuffix("_text_document") + "_tokenizer.json")
    argv = ["--run-dir", str(trained_run), "--output", str(tmp_path / "hf"), "--step", "2", "--dtype", "bfloat16"]
    assert main([*argv, "--tokenizer", str(tokenizer)]) == 0
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["torch_dtype"] == "bfloat16"
    assert (tmp_path / "hf" / "tokenizer.json").read_bytes() == tokenizer.read_bytes()
    with safe_open(str(tmp_path / "hf" / "model.safetensors"), framework="pt") as handle:
        assert handle.get_tensor("model.norm.weight").dtype == torch.bfloat16


def test_export_names_a_missing_step(trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--run-dir", str(trained_run), "--output", str(tmp_path / "x"), "--step", "3"]) == 2
    assert capsys.readouterr().err.startswith("error: --step: 3 has no committed checkpoint under")


class _RunsACommand:
    """Unpickled, runs `command`: what a planted `.metadata` would do."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (self.command,))


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another user is made by chown: root only")
def test_a_checkpoint_with_a_file_of_another_user_is_not_read(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    metadata = run / "checkpoints" / "step-4" / ".metadata"
    marker = tmp_path / "code-ran"
    metadata.write_bytes(pickle.dumps(_RunsACommand(f"touch {marker}")))
    os.chown(metadata, 65534, 65534)
    assert main(["--run-dir", str(run), "--output", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: checkpoint {metadata} is owned by nobody:nogroup (mode 0644), not by this job's user root or one of "
        "its groups: use a run directory of your own (/fsx/runs/<user>/<run>)"
    ]
    assert not marker.exists()
