import pytest

from planner.hardware import hardware
from planner.job import Job, PlanError
from planner.memory import GIB, block_activation_bytes_per_token, fits, job_memory, memory_per_device
from planner.published import (
    ALL_ROWS,
    LLAMA3_PAPER,
    LLM_FOUNDRY,
    MEGATRON_BRIDGE_SUMMARY,
    NEMO_2407_SUMMARY,
    TORCHTITAN_H100,
)
from training.models.params import count_parameters
from training.models.registry import get_model_args

LLAMA_7B = get_model_args("llama2-7b")


def test_training_state_is_16_bytes_per_parameter_sharded_over_every_rank() -> None:
    estimate = memory_per_device(LLAMA_7B, "p5.48xlarge", 4, 4096, 1, "full")
    state = estimate.weights_gib + estimate.gradients_gib + estimate.optimizer_gib
    assert state == pytest.approx(16 * count_parameters(LLAMA_7B).total / 32 / GIB)


def test_sharding_modes_divide_the_state_differently() -> None:
    def state(sharding: str) -> tuple[float, float, float]:
        e = memory_per_device(LLAMA_7B, "p5.48xlarge", 2, 4096, 1, "full", sharding=sharding)  # type: ignore[arg-type]
        return e.weights_gib, e.gradients_gib, e.optimizer_gib

    fsdp, hsdp, ddp, zero1 = state("fsdp"), state("hsdp"), state("ddp"), state("zero1")
    assert hsdp[2] == pytest.approx(2 * fsdp[2])  # sharded over 8 instead of 16
    assert ddp[2] == pytest.approx(16 * fsdp[2])
    assert zero1[2] == pytest.approx(fsdp[2]) and zero1[0] == pytest.approx(ddp[0])


def test_checkpointing_orders_activation_memory() -> None:
    def activations(mode: str) -> float:
        return memory_per_device(LLAMA_7B, "p5.48xlarge", 1, 4096, 2, mode).activations_gib  # type: ignore[arg-type]

    assert activations("none") > activations("selective") > activations("every_n") > activations("full")


def test_full_checkpointing_keeps_the_block_inputs_plus_one_block() -> None:
    tokens = 2 * 4096
    expected = tokens * (32 * 2 * 4096 + block_activation_bytes_per_token(LLAMA_7B, "none"))
    got = memory_per_device(LLAMA_7B, "p5.48xlarge", 1, 4096, 2, "full").activations_gib
    assert got == pytest.approx(expected / GIB)


def test_tensor_parallel_splits_activations() -> None:
    one = memory_per_device(LLAMA_7B, "p5.48xlarge", 1, 4096, 1, "none")
    eight = memory_per_device(LLAMA_7B, "p5.48xlarge", 1, 4096, 1, "none", tensor_parallel=8)
    assert eight.activations_gib == pytest.approx(one.activations_gib / 8)


@pytest.mark.parametrize("row", ALL_ROWS, ids=lambda row: row.key)
def test_every_published_configuration_fits(row) -> None:  # they all ran
    estimate = job_memory(row.job)
    if row.source == LLAMA3_PAPER:
        # Meta trained 8K sequences without checkpointing after reworking the pipeline's memory (one layer fewer on
        # the first and last stages, its own schedule; section 3.3.2). The planner counts the first stage's plain
        # 1F1B warm-up, 16 micro-batches of un-checkpointed activations: an overestimate of about a third.
        assert estimate.total_gib <= 1.4 * estimate.capacity_gib, (row.key, estimate.total_gib)
        return
    if row.source in (LLM_FOUNDRY, MEGATRON_BRIDGE_SUMMARY, TORCHTITAN_H100, NEMO_2407_SUMMARY):
        # llm-foundry's micro-batches were tuned to fill memory; the estimate is conservative by up to 11 % on three
        # of them. The FP8 and long-sequence rows of Megatron-Bridge, NeMo and torchtitan run within 12 % of capacity by
        # the estimate, which counts activations in bf16 where FP8 stacks save FP8 copies (docs/planner.md, Limits),
        # so only a gross overestimate fails here.
        assert estimate.total_gib <= 1.12 * estimate.capacity_gib, (row.key, estimate.total_gib)
        return
    assert estimate.fits, (row.key, estimate.total_gib, estimate.capacity_gib)


def _p4de(model_name: str, checkpointing: str) -> Job:
    model = get_model_args(model_name)
    node = hardware("p4de.24xlarge")
    return Job(model=model, hardware=node, nodes=16, seq_len=4096, micro_batch=2, checkpointing=checkpointing)  # type: ignore[arg-type]


def test_fsdp_blog_needed_checkpointing_for_70b_but_not_for_7b() -> None:
    assert fits(_p4de("llama2-7b", "none"))[0]
    ok, message = fits(_p4de("llama2-70b", "none"))
    assert not ok
    assert message.startswith("does not fit: needs ") and "'full'" in message and "\n" not in message
    assert fits(_p4de("llama2-70b", "full"))[0]


def test_fits_message_for_a_fitting_job_is_one_line() -> None:
    job = Job(model=get_model_args("1b"), hardware=hardware("p5.48xlarge"), nodes=1, seq_len=2048, micro_batch=4)
    ok, message = fits(job)
    assert ok and message.startswith("fits: ") and "\n" not in message


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"nodes": 0}, "nodes: 0 must be an integer >= 1"),
        ({"seq_len": -5}, "seq_len: -5"),
        ({"micro_batch": 1.5}, "micro_batch: 1.5"),
        ({"activation_checkpointing": "most"}, "activation_checkpointing: 'most'"),
        ({"tensor_parallel": 3}, "tensor_parallel: 3 must divide the 8 devices"),
        ({"tensor_parallel": 8, "pipeline_parallel": 3}, "pipeline_parallel: 3"),
        ({"sharding": "zero3"}, "sharding: 'zero3'"),
        ({"global_batch": 12}, "global_batch: 12 must be a multiple"),
    ],
)
def test_bad_input_is_one_line_naming_the_argument(kwargs: dict, needle: str) -> None:
    arguments = {"nodes": 1, "seq_len": 2048, "micro_batch": 1, **kwargs}
    with pytest.raises(PlanError) as caught:
        memory_per_device(LLAMA_7B, "p5.48xlarge", **arguments)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_hsdp_shards_the_state_over_its_shard_group_only() -> None:
    def state(**layout: object) -> float:
        e = memory_per_device(LLAMA_7B, "p5.48xlarge", 4, 4096, 1, "full", **layout)  # type: ignore[arg-type]
        return e.weights_gib + e.gradients_gib + e.optimizer_gib

    full = 16 * count_parameters(LLAMA_7B).total / GIB
    assert state(sharding="hsdp") == pytest.approx(full / 8)  # one node by default
    assert state(sharding="hsdp", shard_group=16) == pytest.approx(full / 16)
    assert state(sharding="fsdp") == pytest.approx(full / 32)


def test_a_shard_group_that_does_not_divide_the_data_parallel_ranks_is_refused() -> None:
    with pytest.raises(PlanError, match="shard_group: 12"):
        memory_per_device(LLAMA_7B, "p5.48xlarge", 4, 4096, 1, "full", sharding="hsdp", shard_group=12)
