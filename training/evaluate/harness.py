"""lm-evaluation-harness on one exported HF directory, offline, the way its own CLI calls it.

`simple_evaluate(model="hf", model_args=...)` is the call `lm_eval --model hf --model_args ...` makes, with the
same default seeds, so our job's scores and the CLI's on the same directory are the same numbers
(tests/training/evaluate/test_harness.py runs both). On a node with several GPUs one process spreads the model over
them (`parallelize=True`: accelerate's device map); lm-eval's data parallelism would need `accelerate launch` and one
export per rank's view, for a speed-up that only small models see.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from training.evaluate.results import RESULTS_FILE

# The nodes reach no hub: datasets, transformers and huggingface_hub read these when they are imported.
OFFLINE_ENV = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def go_offline() -> None:
    os.environ.update(OFFLINE_ENV)


def model_args(export_dir: Path, dtype: str, gpus: int) -> dict[str, Any]:
    args: dict[str, Any] = {"pretrained": str(export_dir), "dtype": dtype}
    if gpus > 1:
        args["parallelize"] = True
    return args


def score(
    export_dir: Path,
    include_path: Path,
    tasks: list[str],
    *,
    batch_size: int,
    device: str,
    dtype: str = "float32",
    gpus: int = 1,
    limit: int | None = None,
) -> dict[str, Any]:
    """lm-eval's results dict (its per-sample logs left out)."""
    go_offline()
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    results = simple_evaluate(
        model="hf",
        model_args=model_args(export_dir, dtype, gpus),
        tasks=tasks,
        batch_size=batch_size,
        device=device,
        limit=limit,
        task_manager=TaskManager(include_path=str(include_path)),
        log_samples=False,
    )
    if results is None:  # only rank 0 of a data-parallel run gets results; this job runs one process
        raise RuntimeError("lm-eval returned no results")
    results.pop("samples", None)
    return results


def write_results(results: dict[str, Any], directory: Path) -> Path:
    """lm-eval's dict as its CLI serializes it (its own fallback for values JSON lacks), written atomically."""
    from lm_eval.utils import handle_non_serializable

    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{RESULTS_FILE}.{os.getpid()}.partial"
    partial.write_text(json.dumps(results, indent=2, default=handle_non_serializable, ensure_ascii=False) + "\n")
    os.replace(partial, directory / RESULTS_FILE)
    return directory / RESULTS_FILE
