"""The training loop: FSDP2 model (a plain module on one data-parallel rank), AdamW, gradient accumulation from a global batch, validation, guards,
checkpoints, metrics and profiling. One Trainer per process; every rank runs the same code in lockstep."""

from __future__ import annotations

import logging
import math
import os
import random
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from training.checkpoint.layout import MARKER, latest_complete
from training.checkpoint.manager import CheckpointManager
from training.checkpoint.state import training_state
from training.config import (
    UNSET_EVERY_STEPS,
    ConfigError,
    JobConfig,
    ModelSection,
    check_sequence_fits,
    resolve_deterministic,
    resolve_model_args,
)
from training.data.blended_loader import BlendedTokenLoader
from training.data.loader import LoaderConfig, PackedTokenLoader
from training.finetune.init import load_initial_weights, resolve_init
from training.finetune.lora import apply_lora, base_parameters, init_adapters
from training.finetune.peft_format import adapter_tensors, write_adapter
from training.guards import LossGuard
from training.metrics.flops import (
    device_peak_flops,
    megatron_flops_per_iteration,
    model_flops_per_token,
    recompute_flops_per_token,
)
from training.metrics.logger import MetricsLogger
from training.metrics.memory import memory_gib, reserved_gib, reset_peak
from training.metrics.plot import plot_run
from training.metrics.prometheus import PrometheusMetrics, job_labels, resolve_final_scrape, resolve_port
from training.metrics.timer import StepTimer
from training.models.moe import update_router_biases
from training.models.params import count_parameters
from training.models.transformer import build_model
from training.optim import build_optimizer, learning_rate, set_learning_rate
from training.parallel.activation_checkpoint import recomputed_fraction
from training.parallel.dist import DistContext
from training.parallel.expert_parallel import check_trainer_expert_parallel
from training.parallel.fsdp import mixed_precision_policy, replicas_reduce_on_last
from training.parallel.mesh import build_mesh, data_parallel_shape
from training.parallel.parallelize import parallelize
from training.parallel.precision import unsharded_autocast, uses_bf16
from training.parallel.state_memory import DeviceMemory, check_state_fits, device_memory, local_world_size
from training.profiling import StepProfiler
from training.quantization.float8 import apply_float8
from training.sft.loader import SFTLoader
from training.signals import StopRequest
from training.watchdog import FLIGHT_RECORDER_ENV, HangWatchdog, clear_reports, node_name

log = logging.getLogger("training")
IGNORE_INDEX = -100
_CHECKSUM_MODULUS = 2**31 - 1


def batch_checksum(input_ids: torch.Tensor) -> int:
    """Order-independent fingerprint of the samples in a batch (host data, in numpy): equal sums mean the same
    samples were used."""
    ids = input_ids.numpy().astype(np.int64)
    weights = np.arange(1, ids.shape[1] + 1, dtype=np.int64)
    per_sample = (ids * weights).sum(axis=1) % _CHECKSUM_MODULUS
    return int(per_sample.sum()) % _CHECKSUM_MODULUS


def _rng_state(device: torch.device) -> dict[str, Any]:
    """Tensors and plain values only, so that a resume loads it with torch.load(weights_only=True): no pickle of a
    numpy array, which only weights_only=False (code from the file) could read."""
    kind, keys, position, has_gauss, cached_gaussian = np.random.get_state(legacy=True)
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "python": random.getstate(),
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "position": int(position),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
    }


def _restore_rng(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and state.get("cuda") is not None:
        torch.cuda.set_rng_state(state["cuda"], device)
    random.setstate(state["python"])
    numpy = state["numpy"]
    keys = numpy["keys"].numpy().astype(np.uint32)
    np.random.set_state((numpy["kind"], keys, numpy["position"], numpy["has_gauss"], numpy["cached_gaussian"]))


def _model_field(model: ModelSection) -> str:
    """The config field and value that chose the model, for one-line errors."""
    if model.name is not None:
        return f"model.name: {model.name!r}"
    return f"model.hf_checkpoint: {model.hf_checkpoint!r}"


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    def __init__(self, config: JobConfig, run_dir: Path, ctx: DistContext) -> None:
        self.config = config
        self.run_dir = run_dir
        self.ctx = ctx
        self.device = ctx.device
        self.step = 0
        self.stop_request = StopRequest()
        _seed_everything(config.train.seed)
        if resolve_deterministic(config.train.deterministic, self.device.type):
            torch.use_deterministic_algorithms(True, warn_only=True)
        # Agreement on stop requests runs here, host to host, so no step waits for the device to learn of one.
        self.host_group = dist.new_group(backend="gloo") if ctx.backend != "gloo" else dist.group.WORLD
        self.timer = StepTimer(self.device)

        try:
            self.dp_shape = data_parallel_shape(config.parallel, ctx.world_size)
        except ValueError as error:
            raise ConfigError([str(error)]) from None
        data = config.data
        per_micro_step = data.micro_batch_size * ctx.world_size
        if data.global_batch_size % per_micro_step:
            raise ConfigError(
                [
                    f"data.global_batch_size: {data.global_batch_size} is not a multiple of data.micro_batch_size "
                    f"{data.micro_batch_size} x {ctx.world_size} data-parallel ranks"
                ]
            )
        self.grad_accum = data.global_batch_size // per_micro_step
        loader_config = LoaderConfig(
            data_prefix=data.first_prefix,
            seq_len=data.seq_len,
            micro_batch_size=data.micro_batch_size,
            seed=data.seed,
            validation_fraction=data.validation_fraction,
            prefetch=data.prefetch,
            verify_checksums=data.verify_checksums,
            pin_memory=self.device.type == "cuda",
        )

        def loader(split: str) -> PackedTokenLoader | SFTLoader:
            if data.datasets is not None:
                return BlendedTokenLoader(loader_config, data.blend, ctx.rank, ctx.world_size, split=split)
            loader_class = SFTLoader if data.kind == "sft" else PackedTokenLoader
            return loader_class(loader_config, ctx.rank, ctx.world_size, split=split)

        self.train_loader = loader("train")
        self.val_loader = loader("validation") if config.train.eval_every else None

        self.model_args = resolve_model_args(config.model, self.train_loader.vocab_size)
        check_sequence_fits(data, self.model_args)
        try:
            check_trainer_expert_parallel(config.parallel.ep, self.dp_shape.dp_size, self.model_args.n_experts)
        except ValueError as error:
            raise ConfigError([str(error)]) from None
        self.params = count_parameters(self.model_args)

        # One data-parallel rank: no FSDP, whose gathers and reduce-scatters would only copy (as in torchtitan).
        self.mesh = build_mesh(self.dp_shape, self.device.type) if self.dp_shape.dp_size > 1 else None
        self.mp_policy = mixed_precision_policy(config.parallel.mixed_precision, self.device)
        self.model = build_model(self.model_args, device="meta")
        self.lora = config.finetune.lora_settings if config.finetune is not None else None
        if self.lora is not None:  # a converter on the meta model: the model code knows nothing of adapters
            frozen_dtype = torch.bfloat16 if uses_bf16(config.parallel.mixed_precision, self.device) else torch.float32
            trainable = apply_lora(self.model, self.model_args, self.lora, frozen_dtype)
            log.info("LoRA: %s trainable parameters (%.3f%% of %s)", f"{trainable:,}",
                     100 * trainable / self.params.total, f"{self.params.total:,}")  # fmt: skip
        # Still on the meta device: refused before any weight is materialized, LoRA's frozen base at its own size.
        frozen = [p for p in self.model.parameters() if not p.requires_grad]
        check_state_fits(
            _model_field(config.model),
            sum(p.numel() for p in self.model.parameters()),
            self.dp_shape.dp_shard,
            self._least_device_memory(),
            self.device.type,
            frozen=sum(p.numel() for p in frozen),
            frozen_bytes=frozen[0].element_size() if frozen else 2,
        )
        # Before parallelize, as torchtitan's converters: compile and FSDP2 see the FP8 layers.
        self.float8 = apply_float8(self.model, config.float8, self.device, sharded=self.mesh is not None)
        parallelize(self.model, config.parallel, self.mesh, self.mp_policy)
        self.model.to_empty(device=self.device)
        self.model.init_weights(seed=config.train.seed)  # the same weights at any world size (models/init.py)
        if self.lora is not None:
            init_adapters(self.model, seed=config.train.seed)
        self.optimizer = build_optimizer(self.model, config.optim, self.device)
        self.guard = LossGuard(config.guards, self.device)

        checkpoint_root = Path(config.checkpoint.dir)
        if not checkpoint_root.is_absolute():
            checkpoint_root = run_dir / checkpoint_root
        self.checkpoints = CheckpointManager(
            checkpoint_root, config.checkpoint, ctx.rank, ctx.world_size, self.params.total
        )
        self.resumed_from = self._restore()

        self.metrics = MetricsLogger(
            run_dir,
            enabled=ctx.is_main,
            tensorboard=config.metrics.tensorboard,
            total_steps=config.train.max_steps,
            start_step=self.step,
        )
        self.prometheus = PrometheusMetrics(
            enabled=ctx.is_main,
            port=resolve_port(config.metrics.prometheus_port),
            address=config.metrics.prometheus_address,
            labels=job_labels(run_dir.name),
            final_scrape_s=resolve_final_scrape(config.metrics.prometheus_final_scrape_s),
        )
        self._note_checkpoint()
        self.profiler = StepProfiler(config.profile, run_dir, ctx.rank, self.device)
        self._init_flops()
        self.watchdog = self._build_watchdog()

    # -- setup -----------------------------------------------------------------------------------------------------

    def _least_device_memory(self) -> DeviceMemory:
        """This rank's device memory, or the least of any rank's: every rank must take the same decision (a rank
        that went on alone would wait for the others in its first collective)."""
        memory = device_memory(self.device, local_world_size())
        least = torch.tensor([memory.bytes], dtype=torch.int64)
        dist.all_reduce(least, op=dist.ReduceOp.MIN, group=self.host_group)
        if int(least) == memory.bytes:
            return memory
        return DeviceMemory(int(least), f"the least of the {self.ctx.world_size} ranks")

    def _build_watchdog(self) -> HangWatchdog:
        """Every rank's node, gathered once, so a hang names the nodes of the ranks that stopped answering."""
        if self.ctx.is_main:
            clear_reports(self.run_dir)  # before the gather: no rank can have reported yet
        nodes: list[str] = [""] * self.ctx.world_size
        dist.all_gather_object(nodes, node_name(), group=self.host_group)
        recording = any(int(os.environ.get(name, "0") or 0) > 0 for name in FLIGHT_RECORDER_ENV)
        return HangWatchdog(
            self.config.watchdog, self.run_dir, self.ctx.rank, nodes, self.config.train.log_every, recording
        )

    def _restore(self) -> Path | None:
        latest = self.checkpoints.prepare()
        if latest is None:
            init = self.config.init_from
            if init is not None:
                field = "model.hf_checkpoint" if self.config.finetune is None else "finetune.init"
                source = resolve_init(init, field)
                # LoRA: the start checkpoint holds the base; the adapters keep their initial values.
                parameters = base_parameters(self.model) if self.lora else self.model.named_parameters()
                count = load_initial_weights(self.model, self.model_args, source, parameters)
                log.info("fine-tuning: loaded %d tensors from %s", count, source.path)
            return None
        step, path = latest
        state, rng = self.checkpoints.load(path, training_state(self.model, self.optimizer))
        saved_batch = state.get("global_batch_size")
        if saved_batch != self.config.data.global_batch_size:
            raise ConfigError(
                [
                    f"data.global_batch_size: {self.config.data.global_batch_size} differs from {saved_batch} in "
                    f"{path}; an exact resume needs the same global batch (any world size is fine)"
                ]
            )
        try:
            self.train_loader.load_state_dict(state["loader"])
        except ValueError as error:  # e.g. a state written by another loader version: retrying cannot help
            raise ConfigError(
                [f"{error} (in {path}); resume with the version that wrote it, or start a new run"]
            ) from None
        self.guard.load_state_dict(state.get("guard", {}))
        self.step = int(state["step"])
        if rng is not None and state.get("world_size") == self.ctx.world_size:
            _restore_rng(rng, self.device)
        else:  # another world size: fresh, still deterministic, streams per rank
            _seed_everything(self.config.train.seed + 1000 * self.step + self.ctx.rank)
        log.info("resumed from %s at step %d (%d samples consumed)", path, step, self.train_loader.samples_consumed)
        return path

    def _init_flops(self) -> None:
        args, seq_len = self.model_args, self.config.data.seq_len
        fraction = recomputed_fraction(self.config.parallel.activation_checkpoint, args.n_layers)
        self.model_flops_per_token = model_flops_per_token(args, seq_len)
        self.hardware_flops_per_token = self.model_flops_per_token + recompute_flops_per_token(args, seq_len, fraction)
        self.megatron_flops_per_step = megatron_flops_per_iteration(args, self.config.data.global_batch_size, seq_len)
        self.peak_flops, self.peak_source = (
            device_peak_flops(self.device, self.config.metrics.peak_flops) if self.ctx.is_main else (float("nan"), "")
        )

    # -- the loop --------------------------------------------------------------------------------------------------

    def run(self) -> str:
        """Train to max_steps; returns "done", or "stopped" after a stop signal (a checkpoint was written)."""
        config = self.config
        self.stop_request.install()
        batches = iter(self.train_loader)
        try:
            self._announce()
            if self.resumed_from is None and self.step == 0 and config.train.eval_every:
                self._evaluate()
            self.watchdog.start()
            while self.step < config.train.max_steps:
                with self.watchdog.step(self.step + 1):  # the poll's collective too: a stopped peer hangs it
                    stop = self._train_step(batches)
                    committed = self.checkpoints.poll()
                if committed is not None:  # an async save whose write has finished: committed now
                    self._note_checkpoint()
                if config.train.eval_every and self.step % config.train.eval_every == 0:
                    self._evaluate()
                if stop:
                    self.metrics.log_event("stop", step=self.step, signal=self.stop_request.signal_name or "peer")
                    self._save()
                    self.checkpoints.wait()
                    return "stopped"
                every = config.checkpoint.steps_between_saves()
                if every and self.step % every == 0 and self.step < config.train.max_steps:
                    self._save()
            self._save()
            self.checkpoints.wait()
            self.checkpoints.finish_replica()  # the final checkpoint's S3 copy, before the job ends
            self._export_adapter()
        finally:
            batches.close()  # the loader's generator: stops its prefetch thread
            self.stop_request.uninstall()
            self.watchdog.close()
            self.profiler.close(self.step)
            self.metrics.close()
            self.prometheus.close()
        if self.ctx.is_main and config.metrics.plot:
            try:
                plot = plot_run(self.run_dir)
            except Exception as error:  # the run is done and checkpointed: a picture must not fail (and requeue) it
                log.warning("plot not written: %s: %s", type(error).__name__, error)
            else:
                if plot is not None:
                    log.info("plot: %s", plot)
        return "done"

    def _announce(self) -> None:
        args, config = self.model_args, self.config
        if self.ctx.is_main:
            log.info(
                "model %s: %s params (%s non-embedding), %d layers, dim %d; world %d (replicate %d x shard %d%s), "
                "micro batch %d, grad accumulation %d, global batch %d x %d tokens",
                config.model.name or config.model.hf_checkpoint,
                f"{self.params.total:,}",
                f"{self.params.non_embedding:,}",
                args.n_layers,
                args.dim,
                self.ctx.world_size,
                self.dp_shape.dp_replicate,
                self.dp_shape.dp_shard,
                "" if self.mesh is not None else "; one rank: no FSDP",
                config.data.micro_batch_size,
                self.grad_accum,
                config.data.global_batch_size,
                config.data.seq_len,
            )
            log.info("MFU/HFU peak: %.4g FLOP/s per device (%s)", self.peak_flops, self.peak_source)
            if config.checkpoint.every is None:
                log.warning(
                    "checkpoint.every is unset: saving every %d steps (llm-submit writes the plan's interval; set a "
                    "number, or 'off' for only the end and stop signals)",
                    UNSET_EVERY_STEPS,
                )
        event = "resume" if self.resumed_from is not None else "start"
        mixture: dict[str, Any] = {}
        if isinstance(self.train_loader, BlendedTokenLoader):  # the run's record of what it blends, and where
            mixture["mixture"] = [{"prefix": prefix, "weight": weight} for weight, prefix in config.data.blend]
            mixture["dataset_samples_consumed"] = self.train_loader.dataset_samples_consumed()
        self.metrics.log_event(
            event,
            **mixture,
            step=self.step,
            checkpoint=str(self.resumed_from) if self.resumed_from else None,
            samples_consumed=self.train_loader.samples_consumed,
            world_size=self.ctx.world_size,
            peak_flops=self.peak_flops,
            peak_source=self.peak_source,
            params=self.params.total,
        )

    def _train_step(self, batches: Iterator[dict[str, torch.Tensor]]) -> bool:
        """One optimizer step; returns True when any rank has been asked to stop."""
        self.step += 1
        step, world = self.step, self.ctx.world_size
        self.profiler.before_step(step)
        reset_peak(self.device)
        self.timer.start()

        micro_batches = [next(batches) for _ in range(self.grad_accum)]
        # Host data (the loader's CPU tensors): counted with numpy, then one pinned, non-blocking copy.
        local_tokens = sum(int(np.count_nonzero(mb["labels"].numpy() != IGNORE_INDEX)) for mb in micro_batches)
        local_checksum = sum(batch_checksum(mb["input_ids"]) for mb in micro_batches) % _CHECKSUM_MODULUS
        counts = self._to_device(torch.tensor([local_tokens, local_checksum], dtype=torch.float64))
        dist.all_reduce(counts)
        global_tokens = counts[0]

        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        for micro in replicas_reduce_on_last(self.model, micro_batches):
            with self._compute_precision():
                summed = self._summed_loss(micro)  # fp32 sum, no full logits kept
            # FSDP averages gradients over ranks, so scale by world / global tokens for a per-token mean overall.
            (summed * (world / global_tokens)).backward()
            loss_sum += summed.detach()
        dist.all_reduce(loss_sum)
        loss = loss_sum / global_tokens
        stop = self._any_rank_stopping()

        grad_norm = self._clip_gradients()
        lr = learning_rate(self.config.optim, step, self.config.train.max_steps)
        set_learning_rate(self.optimizer, lr)
        skip = self.guard.observe(step, loss, grad_norm)
        if self.optimizer.defaults.get("fused"):
            self.optimizer.found_inf = skip  # type: ignore[attr-defined]  # read by fused AdamW: skips on the device
        else:
            self.guard.raise_if_stopped()  # the unfused optimizer cannot skip on the device: ask the host
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        update_router_biases(self.model)  # MoE routers with an aux-loss-free bias (models/moe.py); else nothing
        if self.float8 is not None:
            self.float8.after_optimizer_step(self.model)
        self.timer.stop()

        # The host waits for the device only here: at logged steps (and before evaluations and checkpoints).
        if step % self.config.train.log_every == 0 or step == self.config.train.max_steps:
            self.guard.raise_if_stopped()
            self._log_step(step, loss, lr, grad_norm, counts)
        self.profiler.after_step(step)
        return stop

    def _summed_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The fp32 loss summed over the batch's trained tokens: a pretraining batch is one token window per row,
        an SFT batch packed samples with their own positions and attention blocks (training/sft/loader.py)."""
        if "document_ids" not in batch:
            tokens = self._to_device(batch["tokens"])  # one copy; inputs and labels are views
            return self.model(tokens[:, :-1], labels=tokens[:, 1:])
        inputs = {key: self._to_device(batch[key]) for key in ("input_ids", "labels", "position_ids", "document_ids")}
        return self.model(**inputs)

    def _to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        """Host tensor to the device without making the host wait: pinned, then an asynchronous copy."""
        if self.device.type != "cuda":
            return tensor
        # The loader's batches are pinned already (LoaderConfig.pin_memory); the token counts are not.
        pinned = tensor if tensor.is_pinned() else tensor.pin_memory()
        return pinned.to(self.device, non_blocking=True)

    def _any_rank_stopping(self) -> bool:
        """Whether any rank was asked to stop, agreed over a CPU (gloo) group: no device work to wait for."""
        flag = torch.tensor([int(self.stop_request.requested)], dtype=torch.int32)
        dist.all_reduce(flag, group=self.host_group)
        return bool(flag.numpy()[0])

    def _compute_precision(self) -> AbstractContextManager[object]:
        """bf16 autocast for a plain model when mixed precision applies; FSDP's policy does it when sharded."""
        if self.mesh is not None:
            return nullcontext()
        return unsharded_autocast(self.config.parallel.mixed_precision, self.device)

    def _clip_gradients(self) -> torch.Tensor:
        """The global gradient norm as a device scalar (clipping by it when configured)."""
        params = [p for p in self.model.parameters() if p.grad is not None]
        total = torch.nn.utils.get_total_norm(
            [p.grad for p in params if p.grad is not None], norm_type=2.0, foreach=True
        )
        if isinstance(total, DTensor):
            total = total.full_tensor()
        if self.config.train.grad_clip is not None:
            torch.nn.utils.clip_grads_with_norm_(params, self.config.train.grad_clip, total, foreach=True)
        return total

    def _log_step(
        self, step: int, loss: torch.Tensor, lr: float, grad_norm: torch.Tensor, counts: torch.Tensor
    ) -> None:
        """Called at logged steps only: reading the device scalars here is the step's one wait for the device."""
        step_time = self.timer.seconds()
        if not self.ctx.is_main:
            return
        world = self.ctx.world_size
        tokens, checksum = counts.tolist()
        tokens_per_s = tokens / step_time / world
        record = {
            "step": step,
            "loss": float(loss),
            "lr": lr,
            "grad_norm": float(grad_norm),
            "tokens_per_s": tokens_per_s,
            "mfu": self.model_flops_per_token * tokens_per_s / self.peak_flops,
            "hfu": self.hardware_flops_per_token * tokens_per_s / self.peak_flops,
            "megatron_util": self.megatron_flops_per_step / step_time / world / self.peak_flops,
            "mem_gib": memory_gib(self.device),
            "mem_reserved_gib": reserved_gib(self.device),
            "step_time_s": step_time,
            "samples_consumed": self.train_loader.samples_consumed,
            "batch_checksum": int(checksum) % _CHECKSUM_MODULUS,
        }
        self.metrics.log_train(record)
        self.prometheus.observe_step(record, world)

    @torch.no_grad()
    def _evaluate(self) -> None:
        assert self.val_loader is not None
        self.guard.raise_if_stopped()
        sums = torch.zeros(2, dtype=torch.float64, device=self.device)
        batches = 0
        iterator = iter(self.val_loader)
        for batch in iterator:
            if batches == self.config.train.eval_batches:
                break
            with self._compute_precision():
                sums[0] += self._summed_loss(batch)
            # Host labels: counted without a device sync (SFT labels are IGNORE_INDEX where the mask trains nothing).
            sums[1] += int(np.count_nonzero(batch["labels"].numpy() != IGNORE_INDEX))
            batches += 1
        iterator.close()  # stops the loader's prefetch thread now rather than at garbage collection
        dist.all_reduce(sums)
        val_loss = (sums[0] / sums[1]).item() if sums[1] > 0 else math.nan
        self.metrics.log_validation(self.step, val_loss, batches)

    # -- checkpoints -----------------------------------------------------------------------------------------------

    def _save(self) -> None:
        self.guard.raise_if_stopped()  # never a checkpoint after a step the guard refused
        trainer_state: dict[str, Any] = {
            "step": self.step,
            "loader": self.train_loader.state_dict(),
            "guard": self.guard.state_dict(),
            "global_batch_size": self.config.data.global_batch_size,
            "world_size": self.ctx.world_size,
            "model_args": self.model_args.to_dict(),
            "tokens_seen": self.step * self.config.data.global_batch_size * self.config.data.seq_len,
        }
        if self.config.finetune is not None:  # the export rebuilds the adapters from this
            lora = self.lora.model_dump(mode="json") if self.lora else None
            trainer_state["finetune"] = {**self.config.finetune.model_dump(mode="json"), "lora": lora}
        self.checkpoints.save(
            self.step, training_state(self.model, self.optimizer), trainer_state, _rng_state(self.device)
        )
        self._note_checkpoint()

    def _export_adapter(self) -> None:
        """A LoRA run's adapters in PEFT's format in RUN/export/adapter (finetune/peft_format.py)."""
        if self.lora is None:
            return
        tensors = adapter_tensors(self.model, self.model_args)  # every rank: gathering the shards is collective
        if self.ctx.is_main:
            out = write_adapter(tensors, self.lora, self.config.init_from, self.run_dir / "export" / "adapter")
            log.info("LoRA adapter (PEFT format): %s", out)

    def _note_checkpoint(self) -> None:
        """The newest committed checkpoint for the metrics endpoint: read when a save is made or committed, never
        per step."""
        if not self.ctx.is_main:
            return
        latest = latest_complete(self.checkpoints.root)
        if latest is not None:
            step, path = latest
            self.prometheus.observe_checkpoint(step, (path / MARKER).stat().st_mtime)
