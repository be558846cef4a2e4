"""torchtitan's side of bench/gpu_vs_torchtitan.py: a config registry that torchtitan 0.3.0 loads with
`python -m torchtitan.train --module bench.torchtitan_config --config llama3_1b_bench[_compile]`.

Imported only inside torchtitan's processes and by the test that loads it through torchtitan's own ConfigManager
(tests/bench/test_torchtitan_config.py, in .torchtitan-venv), never by our trainer. Written against the 0.3.0 wheel:
`Trainer.Config`, `TrainingConfig(local_batch_size, seq_len)`, `HuggingFaceTextDataLoader.Config(dataset="c4_test",
dataset_path=<directory of JSON lines with a "text" field>)`, `ChunkedLossWrapper(CrossEntropyLoss)`,
`SelectiveAC` or none, `CompileConfig(components=["model", "loss"])`. The run's shape comes from BENCH_TT_*
environment variables set by the driver, so both frameworks train on the same corpus, tokenizer, micro-batch,
sequence length, activation checkpointing and compile setting.

Attention cannot be the same kernel on both sides: 0.3.0 refuses SDPA for language models ("positions are always
available so use flex, flex_flash, or varlen") and masks per document; ours is SDPA, causal over the packed
sequence. BENCH_TT_ATTENTION picks flex (torchtitan's default) or varlen.
"""

from __future__ import annotations

import os

from torchtitan.components.checkpoint import CheckpointManager
from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
from torchtitan.components.metrics import MetricsProcessor
from torchtitan.components.optimizer import LRSchedulersContainer, default_adamw
from torchtitan.config import CompileConfig, TrainingConfig
from torchtitan.distributed.activation_checkpoint import SelectiveAC
from torchtitan.hf_datasets.text_datasets import HuggingFaceTextDataLoader
from torchtitan.models.common.config_utils import decoder_vocab_size
from torchtitan.models.llama3 import model_registry
from torchtitan.trainer import Trainer

ATTENTION_BACKENDS = ("flex", "varlen")
AC_MODES = ("none", "selective")


def _env(name: str, choices: tuple[str, ...] = ()) -> str:
    value = os.environ.get(name)
    if not value:
        raise ValueError(f"environment {name}: not set (run bench/gpu_vs_torchtitan.py, which sets it)")
    if choices and value not in choices:
        raise ValueError(f"environment {name}: {value!r} is not one of {', '.join(choices)}")
    return value


def _config(compile_model: bool) -> Trainer.Config:
    attention = _env("BENCH_TT_ATTENTION", ATTENTION_BACKENDS)
    # Llama 3.2 1B's shape, as our "1b": tied embeddings, GQA 32/8, SwiGLU 8192, vocabulary 128,256.
    model_spec = model_registry("1B", attn_backend=attention)
    config = Trainer.Config(
        loss=ChunkedLossWrapper.Config(
            loss_fn=CrossEntropyLoss.Config(global_vocab_size=decoder_vocab_size(model_spec))
        ),
        hf_assets_path=_env("BENCH_TT_TOKENIZER_DIR"),
        dump_folder=_env("BENCH_TT_DUMP_FOLDER"),
        model_spec=model_spec,
        optimizer=default_adamw(lr=3e-4),
        lr_scheduler=LRSchedulersContainer.Config(warmup_steps=2, decay_type="cosine"),
        training=TrainingConfig(
            local_batch_size=int(_env("BENCH_TT_MICRO_BATCH")),
            seq_len=int(_env("BENCH_TT_SEQ_LEN")),
            steps=int(_env("BENCH_TT_STEPS")),
            mixed_precision_param="bfloat16",
            mixed_precision_reduce="float32",
            max_norm=1.0,
        ),
        dataloader=HuggingFaceTextDataLoader.Config(dataset="c4_test", dataset_path=_env("BENCH_TT_CORPUS_DIR")),
        metrics=MetricsProcessor.Config(log_freq=1, disable_color_printing=True),
        checkpoint=CheckpointManager.Config(enable=False),
        activation_checkpoint=SelectiveAC.Config() if _env("BENCH_TT_AC", AC_MODES) == "selective" else None,
        compile=CompileConfig(enable=compile_model, components=["model", "loss"]),
    )
    if attention == "varlen":
        config.training.disable_cuda_graphs = True  # as torchtitan's own varlen config does
    return config


def llama3_1b_bench() -> Trainer.Config:
    return _config(compile_model=False)


def llama3_1b_bench_compile() -> Trainer.Config:
    return _config(compile_model=True)
