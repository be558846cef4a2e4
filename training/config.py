"""The job config: one YAML file validated into typed sections, with one-line errors naming field and value.

Each component (model, data, optim, parallel, checkpoint, guards, watchdog, metrics, profile, float8) owns one section, so a
component can be read without the others. Paths in the file are taken relative to the working directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from spec.errors import SpecProblem, UserError, not_utf8_text, problems_from_pydantic
from spec.yaml_file import read_yaml
from training.finetune.config import FinetuneSection
from training.models.args import ModelArgs, ModelArgsError
from training.models.registry import get_model_args
from training.quantization.config import Float8Section

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]


class ConfigError(UserError):
    """A job config that must not run; str() gives one line per problem."""

    def __init__(self, problems: list[SpecProblem] | list[str], source: str = "config") -> None:
        self.lines = [f"{source}: {p}" for p in problems]
        super().__init__("\n".join(self.lines))


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSection(_Section):
    """A named shape (training/models/registry.py), any field overridden; or the shape of an HF checkpoint."""

    name: str | None = None
    hf_checkpoint: str | None = None  # directory with config.json and *.safetensors: fine-tune from it
    vocab_size: PositiveInt | Literal["data"] | None = None  # "data": the dataset's tokenizer, padded to 64
    flavor: str | None = None  # a family name (training/models/families.py); ModelArgs refuses others
    dim: PositiveInt | None = None
    n_layers: PositiveInt | None = None
    n_heads: PositiveInt | None = None
    n_kv_heads: PositiveInt | None = None
    ffn_dim: PositiveInt | None = None
    norm_eps: float | None = None
    rope_theta: float | None = None
    rotary_pct: float | None = None
    max_seq_len: PositiveInt | None = None
    tie_embeddings: bool | None = None
    init_std: float | None = None
    rope_type: Literal["default", "llama3"] | None = None  # llama3: Llama 3.1+ frequency scaling
    rope_factor: float | None = None
    rope_low_freq_factor: float | None = None
    rope_high_freq_factor: float | None = None
    rope_original_max_seq_len: PositiveInt | None = None
    # Mixture of experts (qwen3 and mixtral flavors, training/models/moe.py; docs/models.md).
    n_experts: NonNegativeInt | None = None
    experts_per_token: PositiveInt | None = None
    expert_ffn_dim: PositiveInt | None = None
    n_shared_experts: NonNegativeInt | None = None
    router_aux_loss_coef: float | None = Field(default=None, ge=0.0)
    router_bias_update_rate: float | None = Field(default=None, ge=0.0)

    @model_validator(mode="after")
    def _one_source(self) -> ModelSection:
        if (self.name is None) == (self.hf_checkpoint is None):
            raise ValueError("give exactly one of model.name or model.hf_checkpoint")
        return self

    def overrides(self) -> dict[str, Any]:
        skip = {"name", "hf_checkpoint", "vocab_size"}
        return {k: v for k, v in self.model_dump().items() if k not in skip and v is not None}


class WeightedDataset(_Section):
    """One source of a mixture: a prepared dataset and its share of the samples (weights need not sum to 1)."""

    prefix: str = Field(min_length=1)
    weight: float = Field(gt=0.0, allow_inf_nan=False)


class DataSection(_Section):
    # The loader's data_prefix: <output-prefix>_text_document, or <output-prefix>_sft_tokens for sft. Or, instead,
    # `datasets`: a mixture blended by weight (training/data/blended_loader.py), as Megatron's data_prefix list.
    prefix: str | None = None
    datasets: tuple[WeightedDataset, ...] | None = None
    # pretrain: one token stream cut into samples; sft: whole samples packed per row, loss on the response only
    # (training/sft/loader.py; the data comes from `llm-prepare --sft`).
    kind: Literal["pretrain", "sft"] = "pretrain"
    seq_len: PositiveInt
    micro_batch_size: PositiveInt
    global_batch_size: PositiveInt  # samples per optimizer step; gradient accumulation makes up the rest
    seed: NonNegativeInt = 1234
    validation_fraction: float = Field(default=0.01, ge=0.0, lt=1.0)
    prefetch: NonNegativeInt = 2
    verify_checksums: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> DataSection:
        if (self.prefix is None) == (self.datasets is None):
            raise ValueError(
                "give exactly one of data.prefix or data.datasets (a mixture: a list of prefix and weight)"
            )
        if self.datasets is not None:
            if not self.datasets:
                raise ValueError("data.datasets: empty; list at least one {prefix, weight}")
            if self.kind != "pretrain":
                raise ValueError(f"data.datasets: a mixture needs data.kind pretrain, not {self.kind!r}")
            seen: set[str] = set()
            for position, dataset in enumerate(self.datasets):
                if dataset.prefix in seen:
                    raise ValueError(f"data.datasets[{position}].prefix: {dataset.prefix!r} is listed twice")
                seen.add(dataset.prefix)
        return self

    @property
    def blend(self) -> list[tuple[float, str]]:
        """(weight, prefix) of every dataset the job reads; a single `prefix` is weight 1.0."""
        if self.datasets is not None:
            return [(dataset.weight, dataset.prefix) for dataset in self.datasets]
        assert self.prefix is not None  # _one_source
        return [(1.0, self.prefix)]

    @property
    def prefixes(self) -> list[str]:
        return [prefix for _, prefix in self.blend]

    @property
    def first_prefix(self) -> str:
        """The data.prefix, or the mixture's first dataset: every dataset of a mixture has the same tokenizer."""
        return self.prefixes[0]


class TrainSection(_Section):
    max_steps: PositiveInt
    seed: NonNegativeInt = 0
    grad_clip: float | None = Field(default=1.0, gt=0.0)  # null: report the norm, never clip
    log_every: PositiveInt = 1
    eval_every: NonNegativeInt = 0  # 0: no validation
    eval_batches: PositiveInt = 4
    # Deterministic kernels where torch has them. None: on for CPU (the exact-resume and equivalence tests), off on
    # GPU, where it costs speed and still leaves flash-attention's backward nondeterministic (as torchtitan).
    deterministic: bool | None = None


class OptimSection(_Section):
    """AdamW; linear warmup to `lr`, then cosine to `lr * min_lr_ratio` at `decay_steps` (default max_steps)."""

    lr: float = Field(default=3e-4, gt=0.0)
    min_lr_ratio: float = Field(default=0.1, ge=0.0, le=1.0)
    warmup_steps: NonNegativeInt = 100
    decay_steps: PositiveInt | None = None
    beta1: float = Field(default=0.9, ge=0.0, lt=1.0)
    beta2: float = Field(default=0.95, ge=0.0, lt=1.0)
    eps: float = Field(default=1e-8, gt=0.0)
    weight_decay: float = Field(default=0.1, ge=0.0)
    fused: Literal["auto", True, False] = "auto"  # auto: the fused kernel (GPU and CPU); False: a host check per step


class ActivationCheckpointSection(_Section):
    mode: Literal["none", "full", "every_n", "selective"] = "none"
    every_n: PositiveInt = 2  # every_n: wrap blocks 0, n, 2n, ...


class ParallelSection(_Section):
    # HSDP when dp_replicate > 1: replicate across groups, shard within each (e.g. dp_shard 8 = one node each).
    dp_replicate: int = Field(default=1, ge=-1)  # -1: world size / dp_shard
    dp_shard: int = Field(default=-1, ge=-1)  # -1: world size / dp_replicate
    # Expert parallel: MoE experts sharded over groups of ep data-parallel ranks (training/parallel/expert_parallel.py).
    ep: PositiveInt = 1
    mixed_precision: Literal["auto", "bf16", "fp32"] = "auto"  # auto: bf16 on GPU, fp32 on CPU
    reshard_after_forward: bool = True
    activation_checkpoint: ActivationCheckpointSection = ActivationCheckpointSection()
    compile: bool = False  # torch.compile each block
    compile_backend: str = "inductor"

    @model_validator(mode="after")
    def _sizes(self) -> ParallelSection:
        if self.dp_shard == 0:
            raise ValueError("dp_shard must be >= 1, or -1 for world size / dp_replicate")
        if self.dp_replicate == 0:
            raise ValueError("dp_replicate must be >= 1, or -1 for world size / dp_shard")
        if self.dp_replicate == -1 and self.dp_shard == -1:
            raise ValueError("dp_replicate and dp_shard cannot both be -1; fix one of them")
        return self


# checkpoint.every left unset by a job that llm-submit did not plan (python -m training.train, the local cluster):
# never "only at the end" by accident. llm-submit writes the plan's interval instead (planner/checkpoint_interval.py).
UNSET_EVERY_STEPS = 100


class CheckpointSection(_Section):
    dir: str = "checkpoints"  # relative paths are inside the run directory
    # Steps between saves; "off": only at the end and on a stop signal; unset: llm-submit's planned interval, else
    # UNSET_EVERY_STEPS.
    every: PositiveInt | Literal["off"] | None = None
    keep_last: PositiveInt = 2
    async_save: bool = False
    # Refuse to save unless free space >= margin x the estimated checkpoint size (0 turns the check off).
    free_space_margin: float = Field(default=1.2, ge=0.0)

    @field_validator("every", mode="before")
    @classmethod
    def _interval(cls, value: Any) -> Any:
        """One line for anything but a step count, 'off' or unset: 0 meant "only at the end" and lost whole runs."""
        if value is None or value == "off" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            return value
        raise ValueError(
            "is not a checkpoint interval: give steps between saves (1 or more), 'off' to save only at the end and "
            "on a stop signal, or leave it out for the interval llm-submit derives from the plan"
        )

    def steps_between_saves(self) -> int | None:
        """The periodic interval in steps; None: only at the end and on a stop signal ('off')."""
        if self.every == "off":
            return None
        return UNSET_EVERY_STEPS if self.every is None else self.every


class GuardsSection(_Section):
    stop_on_nonfinite: bool = True
    loss_spike_factor: float | None = Field(default=3.0, gt=1.0)  # stop if loss > factor x running mean
    loss_spike_window: PositiveInt = 20
    loss_spike_min_history: PositiveInt = 10


class WatchdogSection(_Section):
    """The hang watchdog (training/watchdog.py): a step running longer than the bound ends the job (EXIT_HANG).
    Bound = max(floor_s, factor x the step time x train.log_every), the step time being the larger of the running
    median and planned_step_s; log_every because the host waits for the device only at logged steps."""

    enabled: bool = True
    floor_s: float = Field(default=300.0, gt=0.0)  # never sooner: start-up stalls, slow file systems, GC
    factor: float = Field(default=10.0, gt=1.0)
    planned_step_s: float | None = Field(default=None, gt=0.0)  # the planner's; llm-submit sets it when it plans
    window: PositiveInt = 20  # step times in the running median
    # How long a rank that saw the hang waits for its peers' reports before naming the ranks that sent none.
    report_grace_s: float = Field(default=30.0, ge=0.0)


class MetricsSection(_Section):
    tensorboard: bool = True
    plot: bool = True
    # Per device: a number, "measure" (a matmul on the device), or None: the GPU table by exact device name
    # (spec/platform/instances.py; an unknown GPU is an error), measured on CPU.
    peak_flops: Annotated[float, Field(gt=0.0)] | Literal["measure"] | None = None
    # Rank 0's Prometheus endpoint (training/metrics/prometheus.py): spec cluster.observability.ports.trainer's
    # default; None turns it off; $LLM_TRAINER_METRICS_PORT overrides it (0: off).
    prometheus_port: Annotated[int, Field(ge=1024, le=65535)] | None = 9500
    prometheus_address: str = "0.0.0.0"
    # At the end, hold the endpoint open until a scraper has taken the last values, at most this long (0: close at
    # once); $LLM_TRAINER_FINAL_SCRAPE_S overrides it. Worth a couple of scrape intervals for short jobs.
    prometheus_final_scrape_s: Annotated[float, Field(ge=0.0)] = 0.0


class ProfileSection(_Section):
    start_step: PositiveInt | None = None  # None: no profiling
    steps: PositiveInt = 3
    warmup: NonNegativeInt = 1  # profiled but not traced, just before start_step (the profiler's own start-up)


class JobConfig(_Section):
    model: ModelSection
    data: DataSection
    train: TrainSection
    optim: OptimSection = OptimSection()
    parallel: ParallelSection = ParallelSection()
    checkpoint: CheckpointSection = CheckpointSection()
    guards: GuardsSection = GuardsSection()
    watchdog: WatchdogSection = WatchdogSection()
    metrics: MetricsSection = MetricsSection()
    profile: ProfileSection = ProfileSection()
    float8: Float8Section = Float8Section()  # FP8 GEMMs in the blocks (training/quantization)
    finetune: FinetuneSection | None = None  # None: pretraining (or model.hf_checkpoint's full fine-tuning)

    @model_validator(mode="after")
    def _cross_field(self) -> JobConfig:
        if self.data.global_batch_size % self.data.micro_batch_size:
            raise ValueError(
                f"data.global_batch_size {self.data.global_batch_size} is not a multiple of "
                f"data.micro_batch_size {self.data.micro_batch_size}"
            )
        finetune, hf_dir = self.finetune, self.model.hf_checkpoint
        if finetune is not None and finetune.init is None and hf_dir is None:
            raise ValueError(
                "finetune.init: is required with model.name (an HF directory or a run directory to start from)"
            )
        if finetune is not None and finetune.init is not None and hf_dir is not None and finetune.init != hf_dir:
            raise ValueError(
                f"finetune.init: {finetune.init!r} differs from model.hf_checkpoint {hf_dir!r}; give one of them"
            )
        if finetune is not None and finetune.mode == "lora" and self.float8.enabled:
            raise ValueError(
                f"float8.recipe: {self.float8.recipe!r} with finetune.mode 'lora' is not supported (the frozen base "
                "would be re-quantized every step for adapters a fraction of its size); use recipe 'off'"
            )
        return self

    @property
    def init_from(self) -> str | None:
        """Where the weights of a new run come from: finetune.init or model.hf_checkpoint; None: fresh weights."""
        if self.finetune is not None and self.finetune.init is not None:
            return self.finetune.init
        return self.model.hf_checkpoint

    def with_overrides(self, **dotted: Any) -> JobConfig:
        """Copy with `section.field=value` overrides (from the command line), validated like the file."""
        data = self.model_dump()
        for key, value in dotted.items():
            section, field = key.split(".", 1)
            data[section][field] = value
        return parse_job_config(data)


def every_option(text: str) -> int | str:
    """--checkpoint-every's value as checkpoint.every takes it: a number, or a word ('off') the config checks."""
    return int(text) if text.lstrip("-").isdigit() else text


def parse_job_config(data: Any, source: str = "config") -> JobConfig:
    if not isinstance(data, dict):
        raise ConfigError([SpecProblem("<config>", "must be a mapping of sections", type(data).__name__)], source)
    try:
        return JobConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(problems_from_pydantic(error), source) from None


# Top-level keys only a deployment spec has: a spec given as a job config is named as such, not as 16 misfits.
_SPEC_ONLY_KEYS = frozenset({"accounts", "network", "region"})


def load_job_config(path: str | Path) -> JobConfig:
    config_path = Path(path)
    data = read_yaml(config_path, "--config", ConfigError)
    if isinstance(data, dict) and _SPEC_ONLY_KEYS & set(data) and "train" not in data:
        raise ConfigError(["is a deployment spec, not a job config (job configs: training/configs/)"], str(config_path))
    return parse_job_config(data, source=str(config_path))


def resolve_deterministic(setting: bool | None, device_type: str) -> bool:
    """train.deterministic: as set, or (None) on for CPU and off for GPU."""
    return device_type != "cuda" if setting is None else setting


def pad_vocab(vocab_size: int, multiple: int = 64) -> int:
    return -(-vocab_size // multiple) * multiple


def resolve_model_args(section: ModelSection, data_vocab_size: int | None) -> ModelArgs:
    """The model shape: named or from the HF config.json, overrides applied, vocabulary checked against the data."""
    try:
        if section.hf_checkpoint is not None:
            config_path = Path(section.hf_checkpoint) / "config.json"
            from training.models.hf import args_from_hf_config  # imports torch: only when fine-tuning

            try:
                args = args_from_hf_config(json.loads(config_path.read_text(encoding="utf-8")))
            except OSError as error:
                raise ModelArgsError(
                    f"model.hf_checkpoint: {str(config_path)!r} cannot be read: {error.strerror}"
                ) from None
            except UnicodeDecodeError as error:
                raise ModelArgsError(f"model.hf_checkpoint: {str(config_path)!r} {not_utf8_text(error)}") from None
        else:
            args = get_model_args(section.name or "")
        args = args.replace(**section.overrides())
        if section.vocab_size == "data":
            if data_vocab_size is None:
                raise ModelArgsError("model.vocab_size: 'data' needs a dataset to read the vocabulary from")
            args = args.replace(vocab_size=pad_vocab(data_vocab_size))
        elif section.vocab_size is not None:
            args = args.replace(vocab_size=section.vocab_size)
    except ModelArgsError as error:
        raise ConfigError([str(error)]) from None
    if data_vocab_size is not None and data_vocab_size > args.vocab_size:
        raise ConfigError(
            [f"model.vocab_size: {args.vocab_size} is smaller than the dataset's vocabulary ({data_vocab_size})"]
        )
    return args


def check_sequence_fits(data: DataSection, args: ModelArgs) -> None:
    """The one rule every backend keeps: a training sequence is no longer than the model's positions. The trainer
    checks it on the nodes, and `llm-submit` and `llm-plan` before anything is queued."""
    if data.seq_len > args.max_seq_len:
        raise ConfigError([f"data.seq_len: {data.seq_len} exceeds model.max_seq_len {args.max_seq_len}"])
