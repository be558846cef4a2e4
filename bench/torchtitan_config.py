"""torchtitan's side of bench/gpu_vs_torchtitan.py: a config registry torchtitan loads with
`python -m torchtitan.train --module bench.torchtitan_config --config llama3_1b_bench[_compile]`.

Imported only inside torchtitan's processes (never by our code or tests), so it may import torchtitan. Written
against torchtitan's Python config API of the 0.3.0 line (Trainer.Config, model_registry, GrainDataLoader); the
run's shape comes from BENCH_TT_* environment variables set by the driver, so both frameworks train on the same
corpus, tokenizer, micro-batch and sequence length. It is the one place to adapt if a torchtitan release renames
a config class.
"""

from __future__ import annotations

import os

from torchtitan.components.data import (
    ConcatThenSplitPackingConfig,
    GrainDataLoader,
    IndexedJsonlSource,
    SingleDatasetConfig,
)
from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
from torchtitan.components.metrics import MetricsProcessor
from torchtitan.components.optimizer import LRSchedulersContainer, default_adamw
from torchtitan.config import CompileConfig, TrainingConfig
from torchtitan.hf_datasets.text_datasets import TextProcessor
from torchtitan.models.common.config_utils import decoder_vocab_size
from torchtitan.models.llama3 import model_registry
from torchtitan.trainer import Trainer


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise ValueError(f"environment {name}: not set (run bench/gpu_vs_torchtitan.py, which sets it)")
    return value


def _config(compile_model: bool) -> Trainer.Config:
    seq_len = int(_env("BENCH_TT_SEQ_LEN"))
    micro_batch = int(_env("BENCH_TT_MICRO_BATCH"))
    # SDPA like our model (torchtitan's default is FlexAttention), same Llama 3.2 1B shape: tied embeddings,
    # GQA 32/8, SwiGLU 8192, vocabulary 128,256.
    model_spec = model_registry("1B", attn_backend="sdpa")
    dataset = SingleDatasetConfig(
        source=IndexedJsonlSource.Config(patterns=(_env("BENCH_TT_CORPUS"),)),
        processor=TextProcessor.Config(),
        post_filters=(lambda sample: sample is not None,),
    )
    return Trainer.Config(
        loss=ChunkedLossWrapper.Config(
            loss_fn=CrossEntropyLoss.Config(global_vocab_size=decoder_vocab_size(model_spec))
        ),
        hf_assets_path=_env("BENCH_TT_TOKENIZER_DIR"),
        dump_folder=_env("BENCH_TT_DUMP_FOLDER"),
        model_spec=model_spec,
        optimizer=default_adamw(lr=3e-4),
        lr_scheduler=LRSchedulersContainer.Config(warmup_steps=2, decay_type="cosine"),
        training=TrainingConfig(
            num_tokens_per_microbatch_per_dp_rank=micro_batch * seq_len,
            max_context_length=seq_len,
            steps=int(_env("BENCH_TT_STEPS")),
            mixed_precision_param="bfloat16",
        ),
        dataloader=GrainDataLoader.Config(dataset=ConcatThenSplitPackingConfig(dataset=dataset)),
        metrics=MetricsProcessor.Config(log_freq=1, disable_color_printing=True),
        compile=CompileConfig(enable=compile_model),
    )


def llama3_1b_bench() -> Trainer.Config:
    return _config(compile_model=False)


def llama3_1b_bench_compile() -> Trainer.Config:
    return _config(compile_model=True)
