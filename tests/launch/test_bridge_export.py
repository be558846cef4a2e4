"""The Hugging Face export of a Megatron Bridge run (docs/jobs.md), with Megatron Bridge's own converter, on CPU.

A job is rendered as on the head node (`launch.submit --backend nemo`, the default Megatron Bridge framework); in
.bridge-venv, tests/launch/contracts/bridge_export_probe.py saves a Megatron checkpoint of a random Llama of the run's
rendered HF config into RUN_DIR/checkpoints (the job's checkpoint.save), keeping the model's weights as a transformers
reference. Then the export block of docs/jobs.md runs as written, under bash, with `srun` standing in for the
container step (its options dropped, `python` run in .bridge-venv), and transformers loads the export: the same
architecture and shape, every weight equal to the reference's, and the run's tokenizer beside it.

What differs from a GPU node (the probe says why): the checkpoint is saved with Megatron Core's local layer spec
instead of Transformer Engine's, and three CUDA calls of the save path are answered on the CPU; the export itself
runs unpatched. The checkpoint is save_megatron_model's (model only), not pretrain()'s (model and optimizer): the
export reads the model part of either.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from launch import submit
from launch.bridge import RECIPE_HF_MODEL_ID
from tests.launch.conftest import write_job
from tests.launch.test_nemo_contract import LLAMA_JOB

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "tests" / "launch" / "contracts" / "bridge_export_probe.py"
DOCS = REPO / "docs" / "jobs.md"
# The container step on this machine: srun's options dropped, the command's `python` is .bridge-venv's.
SRUN = 'srun() { while [[ $1 == --* ]]; do shift; done; [[ $1 == python ]]; shift; "$BRIDGE_PYTHON" "$PROBE" python "$@"; }'


def documented_export() -> str:
    """The ```bash head-node block of docs/jobs.md that runs export_ckpt, as written (list indentation removed)."""
    blocks = re.findall(r"^( *)```bash head-node\n(.*?)^\1```", DOCS.read_text(encoding="utf-8"), re.M | re.S)
    (block,) = [(indent, body) for indent, body in blocks if "export_ckpt" in body]
    indent, body = block
    return "".join(line.removeprefix(indent) for line in body.splitlines(keepends=True))


def _bash_with_srun(script: str, bridge_python: Path, cwd: Path, timeout: int) -> subprocess.CompletedProcess[str]:
    """`script` under bash with SRUN's stand-in able to reach Bridge's venv and the probe."""
    env = {**os.environ, "BRIDGE_PYTHON": str(bridge_python), "PROBE": str(PROBE)}
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd, env=env
    )


def _probe(python: Path, *args: str, cwd: Path) -> dict[str, Any]:
    result = subprocess.run(
        [str(python), str(PROBE), *args], capture_output=True, text=True, timeout=600, check=False, cwd=cwd
    )
    marker = f"BRIDGE-EXPORT-{args[0].upper()} "
    lines = [line for line in result.stdout.splitlines() if line.startswith(marker)]
    assert result.returncode == 0 and lines, result.stderr[-4000:]
    answer: dict[str, Any] = json.loads(lines[-1].removeprefix(marker))
    return answer


# The vocabulary the job declares: the data's tokenizer (demo_data's 512 tokens), or more rows than it has
# (docs/jobs.md, "The vocabulary that trains": the declared model trains and exports; the tokenizer's ids use the
# first rows).
VOCABULARIES = ("data", 8256)


@pytest.fixture(scope="module", params=VOCABULARIES, ids=lambda vocab: f"vocab-{vocab}")
def export(
    request: pytest.FixtureRequest, bridge_python: Path, demo_data: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    tmp_path = tmp_path_factory.mktemp("bridge-export")
    run_dir = tmp_path / "run"
    job = {**LLAMA_JOB, "model": {**LLAMA_JOB["model"], "vocab_size": request.param}}
    config = write_job(tmp_path / "job.yaml", **job)
    argv = ["--backend", "nemo", "--model", str(config), "--nodes", "1", "--data-prefix", demo_data,
            "--run-dir", str(run_dir)]  # fmt: skip
    submit.write(submit.render(submit.parse_options(argv), "python -m launch.submit " + " ".join(argv)))
    rendered = run_dir / "hf" / RECIPE_HF_MODEL_ID
    reference = tmp_path / "reference"
    saved = _probe(bridge_python, "save", str(rendered), str(reference), str(run_dir / "checkpoints"), cwd=tmp_path)

    script, count = re.subn(r"^RUN_DIR=\S+", f"RUN_DIR={run_dir}", documented_export(), flags=re.M)
    assert count == 1, "the export block sets RUN_DIR once"
    result = _bash_with_srun(f"set -euo pipefail\n{SRUN}\n{script}", bridge_python, tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    compared = _probe(bridge_python, "compare", str(reference), str(run_dir / "hf-export"), cwd=tmp_path)
    declared = json.loads((rendered / "config.json").read_text())["vocab_size"]
    return {"saved": saved, "compared": compared, "run_dir": run_dir, "declared_vocab": declared}


def test_the_documented_command_exports_the_run_checkpoint_as_a_transformers_llama(export: dict[str, Any]) -> None:
    compared = export["compared"]
    model = LLAMA_JOB["model"]
    assert compared["architecture"] == "LlamaForCausalLM"
    shape = [model["n_layers"], model["dim"], model["n_heads"], model["n_kv_heads"], model["ffn_dim"]]
    assert compared["shape"][:5] == shape
    assert export["saved"]["provider"] == "GPTModelProvider" and export["saved"]["parameters"] > 0


def test_every_exported_weight_equals_the_checkpointed_one(export: dict[str, Any]) -> None:
    compared = export["compared"]
    # embeddings, output layer, final norm and 9 per layer (q, k, v, o, gate, up, down, two norms)
    assert compared["tensors"] == 3 + 9 * LLAMA_JOB["model"]["n_layers"]
    assert (compared["missing"], compared["unexpected"], compared["different"]) == ([], [], [])
    assert compared["dtypes"] == ["torch.bfloat16"]  # the rendered config's torch_dtype


def test_the_export_carries_the_runs_tokenizer(export: dict[str, Any]) -> None:
    vocab = json.loads((export["run_dir"] / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
    assert export["compared"]["tokenizer_vocab"] == len(vocab) == 512
    assert len(vocab) <= export["compared"]["shape"][5]


def test_the_exported_vocabulary_is_the_declared_one(export: dict[str, Any]) -> None:
    """The rendered HF config, the checkpoint and the transformers model agree on the rows, padding included."""
    assert export["declared_vocab"] in (512, 8256)
    assert export["compared"]["shape"][5] == export["declared_vocab"]


def test_the_documented_export_is_the_code_the_evaluation_job_runs() -> None:
    """docs/jobs.md's block (run above) and llm-eval's job for a Bridge run hand the container the same code."""
    from launch.bridge import BRIDGE_EXPORT_CODE

    (code,) = re.findall(r"python -c '(.*?)'", documented_export(), re.S)
    assert re.sub(r"\s*\\\n\s*", " ", code) == BRIDGE_EXPORT_CODE


def test_llm_evals_job_exports_a_bridge_run_with_bridges_converter_and_scores_it(
    export: dict[str, Any], bridge_python: Path, tmp_path: Path
) -> None:
    """The job llm-eval renders for the run, run under bash: Megatron Bridge's export in the container step (srun
    stands in, as above), the run's tokenizer beside it, then lm-evaluation-harness on the export."""
    from launch import evaluate

    run_dir = export["run_dir"]
    shutil.rmtree(run_dir / "export", ignore_errors=True)
    args = evaluate.build_parser().parse_args(["--run-dir", str(run_dir), "--queue", "gpu", "--limit", "4"])
    path, script = evaluate.render(args, "llm-eval --run-dir RUN --queue gpu --limit 4")
    assert "--container-image=" in script and "BRIDGE_HF_CONFIG=" in script
    path.write_text(script)
    result = _bash_with_srun(f"{SRUN}\nexport -f srun\nbash {path}", bridge_python, tmp_path, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    exported = run_dir / "export" / "bridge-latest"
    assert (exported / "config.json").is_file() and (exported / "tokenizer.json").is_file()
    results = json.loads((run_dir / "eval" / "bridge-latest" / "results.json").read_text())
    assert set(results["results"]) == {"demo_heldout", "demo_choice"}


def test_a_bridge_run_is_scored_at_its_latest_checkpoint_only(export: dict[str, Any]) -> None:
    from launch import evaluate
    from slurm.errors import SubmitError

    args = evaluate.build_parser().parse_args(["--run-dir", str(export["run_dir"]), "--queue", "gpu", "--all"])
    with pytest.raises(SubmitError, match=r"--step/--all/--every: a Megatron Bridge run is scored at its latest"):
        evaluate.render(args, "llm-eval")
