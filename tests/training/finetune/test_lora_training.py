"""LoRA and full fine-tuning runs of `python -m training.train` (torchrun, 2 gloo ranks), started from a pretraining
run of ours: frozen base, adapter-only optimizer state, the loss going down, exact resume after a kill."""

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed.checkpoint as dcp
from peft import PeftModel
from safetensors.torch import load_file
from transformers import LlamaForCausalLM

from tests.training.jobs import (
    kill_training,
    losses_by_step,
    records,
    run_training,
    start_training,
    tiny_job,
    wait_for_step,
    write_job,
)
from training import export
from training.checkpoint.layout import latest_complete
from training.finetune.lora import LoRALinear
from training.finetune.peft_format import ADAPTER_WEIGHTS
from training.models.hf import to_hf_state_dict

PRETRAIN_STEPS, LORA_STEPS = 2, 12  # a barely trained start: the adapters have something to learn in 12 steps
LORA: dict[str, Any] = {
    "rank": 8,
    "alpha": 16.0,
    "dropout": 0.05,
    "target_modules": ["q_proj", "v_proj", "up_proj", "down_proj"],
}


def _ok(result: object) -> None:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def pretrained(demo_data_prefix: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(run dir, its HF export) of a short one-process pretraining run, validated at its last step."""
    root = tmp_path_factory.mktemp("pretrain")
    job = tiny_job(demo_data_prefix, train={"max_steps": PRETRAIN_STEPS, "eval_every": PRETRAIN_STEPS})
    _ok(run_training(write_job(root / "job.yaml", job), root / "run", ranks=1))
    assert export.main(["--run-dir", str(root / "run"), "--output", str(root / "hf")]) == 0
    return root / "run", root / "hf"


def _lora_job(data_prefix: str, hf_dir: Path) -> dict:
    return tiny_job(
        data_prefix,
        train={"max_steps": LORA_STEPS, "eval_every": LORA_STEPS},
        finetune={"mode": "lora", "init": str(hf_dir), "lora": LORA},
        optim={"lr": 1e-2, "warmup_steps": 2},  # adapters start at zero and take a larger rate than full training
        # bf16 compute, so the frozen base is stored in bf16 (on CPU too: FSDP2's policy casts the gathered weights)
        parallel={"mixed_precision": "bf16"},
    )


@pytest.fixture(scope="module")
def lora_run(
    demo_data_prefix: str, pretrained: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """(config, run dir) of an uninterrupted 2-rank LoRA run from the HF export."""
    root = tmp_path_factory.mktemp("lora")
    config = write_job(root / "job.yaml", _lora_job(demo_data_prefix, pretrained[1]))
    _ok(run_training(config, root / "run", ranks=2))
    return config, root / "run"


def _checkpoint(run_dir: Path) -> Path:
    latest = latest_complete(run_dir / "checkpoints")
    assert latest is not None
    return latest[1]


@pytest.mark.distributed
def test_lora_trains_only_the_adapters_and_the_held_out_loss_goes_down(
    pretrained: tuple[Path, Path], lora_run: tuple[Path, Path]
) -> None:
    _, hf_dir = pretrained
    _, run_dir = lora_run
    checkpoint = _checkpoint(run_dir)
    # Only the adapters' moments are in the optimizer state.
    keys = dcp.FileSystemReader(str(checkpoint)).read_metadata().state_dict_metadata
    optim_params = {key.split(".", 2)[2].rsplit(".", 1)[0] for key in keys if key.startswith("optim.state.")}
    assert optim_params and all(name.endswith((".lora_a", ".lora_b")) for name in optim_params), optim_params
    assert len(optim_params) == 2 * 2 * len(LORA["target_modules"])  # A and B, 2 blocks

    # The base is bit-identical to where it started (the bf16 of the export's fp32 weights).
    model = export.load_checkpoint_model(checkpoint)
    start = load_file(hf_dir / export.WEIGHTS_FILE)
    base = {k: v for k, v in model.state_dict().items() if not k.endswith((".lora_a", ".lora_b"))}
    for name, tensor in to_hf_state_dict(model.args, base).items():
        assert torch.equal(tensor, start[name].to(torch.bfloat16).float()), name

    validation = records(run_dir, "validation")
    assert [r["step"] for r in validation] == [0, LORA_STEPS]
    assert validation[-1]["val_loss"] < validation[0]["val_loss"] - 0.02, validation

    # The adapter the run wrote at its end is the checkpoint's, in PEFT's names.
    written = load_file(run_dir / "export" / "adapter" / ADAPTER_WEIGHTS)
    key = "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"
    down_proj = model.get_submodule("layers.1.feed_forward.w2")
    assert isinstance(down_proj, LoRALinear) and torch.equal(written[key], down_proj.lora_b)
    assert written[key].abs().max() > 0  # B has left zero: the adapters trained


@pytest.mark.distributed
def test_a_killed_lora_run_resumes_with_the_losses_of_an_uninterrupted_run(
    lora_run: tuple[Path, Path], tmp_path: Path
) -> None:
    config, reference = lora_run
    run_dir = tmp_path / "run"
    process = start_training(config, run_dir, ranks=2)
    try:
        wait_for_step(run_dir, 5, process)
    finally:
        kill_training(process)
    _ok(run_training(config, run_dir, ranks=2))
    resumes = [r for r in records(run_dir, "event") if r["event"] == "resume"]
    assert len(resumes) == 1 and resumes[0]["step"] >= 4, resumes
    resumed_at = resumes[0]["step"]
    expected, resumed = losses_by_step(reference, after=resumed_at), losses_by_step(run_dir, after=resumed_at)
    assert sorted(resumed) == list(range(resumed_at + 1, LORA_STEPS + 1))
    for step, loss in expected.items():
        assert resumed[step] == loss, (step, resumed[step], loss)


@pytest.mark.distributed
def test_full_fine_tuning_from_our_run_dir_starts_from_its_model_at_step_zero(
    demo_data_prefix: str, pretrained: tuple[Path, Path], tmp_path: Path
) -> None:
    run, _ = pretrained
    job = tiny_job(
        demo_data_prefix, train={"max_steps": 2, "eval_every": 2}, finetune={"mode": "full", "init": str(run)}
    )
    _ok(run_training(write_job(tmp_path / "job.yaml", job), tmp_path / "run", ranks=1))
    start = records(tmp_path / "run", "validation")[0]
    end_of_pretraining = records(run, "validation")[-1]
    assert (start["step"], end_of_pretraining["step"]) == (0, PRETRAIN_STEPS)
    assert abs(start["val_loss"] - end_of_pretraining["val_loss"]) <= 1e-6
    assert next(r["event"] for r in records(tmp_path / "run", "event")) == "start"  # not a resume: a fresh optimizer
    assert [r["step"] for r in records(tmp_path / "run", "train")] == [1, 2]


@pytest.mark.distributed
@pytest.mark.parametrize(
    ("finetune", "line"),
    [
        (
            {"mode": "lora", "init": "HF", "lora": {"target_modules": ["q_proj", "query"]}},
            "job.yaml: finetune.lora.target_modules: 'query' names no linear layer of a Llama block (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)",
        ),
        (
            {"mode": "full", "init": "MISSING"},
            "finetune.init: 'MISSING' is neither an HF directory (config.json + *.safetensors) nor a run directory with a committed checkpoint",
        ),
    ],
)
def test_a_bad_start_or_target_stops_the_run_in_one_line(
    demo_data_prefix: str, pretrained: tuple[Path, Path], tmp_path: Path, finetune: dict, line: str
) -> None:
    _, hf_dir = pretrained
    finetune = {
        **finetune,
        "init": finetune["init"].replace("HF", str(hf_dir)).replace("MISSING", str(tmp_path / "none")),
    }
    line = line.replace("MISSING", str(tmp_path / "none"))
    job = tiny_job(demo_data_prefix, train={"max_steps": 1}, finetune=finetune)
    result = run_training(write_job(tmp_path / "job.yaml", job), tmp_path / "run", ranks=1)
    assert result.returncode != 0
    assert line in result.stdout + result.stderr, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stdout + result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists() or not any((tmp_path / "run" / "checkpoints").iterdir())


@pytest.mark.distributed
def test_export_of_a_lora_run_loads_in_peft_and_merges_into_a_full_checkpoint(
    lora_run: tuple[Path, Path], tmp_path: Path
) -> None:
    _, run_dir = lora_run
    base, merged = tmp_path / "base", tmp_path / "merged"
    assert export.main(["--run-dir", str(run_dir), "--output", str(base)]) == 0
    assert export.main(["--run-dir", str(run_dir), "--output", str(merged), "--merge-lora"]) == 0
    assert not (merged / "adapter").exists()

    ids = torch.randint(0, 500, (2, 32), generator=torch.Generator().manual_seed(0))
    ours = export.load_checkpoint_model(_checkpoint(run_dir)).eval()
    peft_model = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(base), base / "adapter").eval()
    with torch.no_grad():
        expected = ours(ids)
        # fp32 on CPU, as in test_peft_format.py
        torch.testing.assert_close(peft_model(input_ids=ids).logits, expected, rtol=0, atol=1e-5)
        merged_logits = LlamaForCausalLM.from_pretrained(merged).eval()(input_ids=ids).logits
        torch.testing.assert_close(
            merged_logits, peft_model.merge_and_unload()(input_ids=ids).logits, rtol=0, atol=1e-5
        )


def test_merge_lora_of_a_run_without_adapters_is_one_line(
    pretrained: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, _ = pretrained
    assert export.main(["--run-dir", str(run), "--output", str(tmp_path / "out"), "--merge-lora"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --merge-lora: ") and "is not of a LoRA run" in err and err.count("\n") == 1
    assert not (tmp_path / "out" / export.WEIGHTS_FILE).exists()


def test_the_evaluation_export_of_a_lora_checkpoint_is_the_fine_tuned_model(
    demo_data_prefix: str, lora_run: tuple[Path, Path], tmp_path: Path
) -> None:
    """llm-eval scores what the run trained: the base with its adapters merged, not the frozen base alone."""
    from training.evaluate.run import export_for_eval

    _, run_dir = lora_run
    checkpoint = _checkpoint(run_dir)
    tokenizer = Path(demo_data_prefix.removesuffix("_text_document") + "_tokenizer.json")
    exported = export_for_eval(checkpoint, int(checkpoint.name.split("-")[1]), tmp_path, tokenizer)
    ids = torch.randint(0, 500, (2, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = export.load_checkpoint_model(checkpoint).eval()(ids)
        theirs = LlamaForCausalLM.from_pretrained(exported).eval()(input_ids=ids).logits
    torch.testing.assert_close(theirs, ours, rtol=0, atol=1e-5)
