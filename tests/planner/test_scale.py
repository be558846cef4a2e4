"""Layouts at scale: TP x PP (interleaved) x CP x DP up to 16,384 GPUs, pipeline bubble and EFA collectives."""

from typing import Any

import pytest

from planner.hardware import hardware
from planner.job import Job, PlanError, Software
from planner.memory import job_memory
from planner.step_time import estimate_step
from training.models.params import count_parameters
from training.models.registry import MODEL_CONFIGS

P5 = hardware("p5.48xlarge")
LLAMA = MODEL_CONFIGS["llama2-70b"]


def _job(nodes: int = 8, cp: int = 1, tp: int = 4, pp: int = 2, seq: int = 8192, **kw: Any) -> Job:
    software = Software(sharding="zero1", precision=kw.pop("precision", "bf16"), pipeline_interleave=kw.pop("v", 1))
    return Job(
        model=LLAMA, hardware=P5, nodes=nodes, seq_len=seq, micro_batch=1, checkpointing="full",
        tensor_parallel=tp, pipeline_parallel=pp, context_parallel=cp, software=software, **kw,
    )  # fmt: skip


def test_context_parallel_takes_ranks_from_data_parallel() -> None:
    job = _job(cp=2)
    assert (job.data_parallel, job.context_parallel) == (64 // (4 * 2 * 2), 2)
    assert job.gradient_group_size == job.data_parallel * 2  # weights are replicated over CP ranks too
    assert job.optimizer_shard_size == job.gradient_group_size  # the distributed optimizer shards over DP x CP


def test_context_parallel_splits_activations_and_tokens_per_device() -> None:
    one, two = _job(nodes=8, cp=1, global_batch=16), _job(nodes=16, cp=2, global_batch=16)
    assert one.micro_batches_per_step == two.micro_batches_per_step
    m1, m2 = job_memory(one), job_memory(two)
    assert m2.activations_gib == pytest.approx(m1.activations_gib / 2)
    assert m2.logits_gib < m1.logits_gib  # the fused loss peaks at one 4,096-token chunk: less, not half
    s1, s2 = estimate_step(one), estimate_step(two)
    assert s2.matmul_s == pytest.approx(s1.matmul_s / 2)  # half the tokens per device, same FLOPs per token
    assert s2.context_parallel.seconds > 0 and s1.context_parallel.seconds == 0


def test_context_parallel_ring_stays_on_nvlink_inside_a_node() -> None:
    inside = estimate_step(_job(nodes=16, cp=2, global_batch=16))  # TP 4 x CP 2 = one node
    across = estimate_step(_job(nodes=16, cp=4, tp=4, pp=1, global_batch=16))  # TP 4 x CP 4 spans two nodes
    assert inside.context_parallel.network_bytes_per_node == 0
    assert across.context_parallel.network_bytes_per_node > 0


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"cp": 0}, "context_parallel: 0 must be an integer >= 1"),
        ({"cp": 3, "nodes": 12, "seq": 8188}, "context_parallel: 3 must divide seq_len / 2"),
        ({"cp": 16, "nodes": 8}, "context_parallel: 16 x tensor_parallel 4 x pipeline_parallel 2 must divide"),
    ],
)
def test_bad_context_parallel_is_one_line(kwargs: dict, needle: str) -> None:
    with pytest.raises(PlanError) as caught:
        _job(**kwargs)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_sixteen_thousand_gpus_plan_a_405b_model_over_efa() -> None:
    model = MODEL_CONFIGS["llama2-70b"].replace(dim=16384, n_layers=126, n_heads=128, ffn_dim=53248, vocab_size=128256)
    job = Job(
        model=model, hardware=P5, nodes=2048, seq_len=8192, micro_batch=1, checkpointing="full",
        tensor_parallel=8, pipeline_parallel=16, context_parallel=2, global_batch=4096,
        software=Software(sharding="zero1", pipeline_interleave=7, precision="fp8"),
    )  # fmt: skip
    assert job.world_size == 16384 and job.data_parallel == 64
    step = estimate_step(job)
    assert job_memory(job).fits
    # interleaved 1F1B: (p - 1) / v micro-batch times
    per_mb = (step.step_s - step.pipeline_bubble_s - step.data_parallel_exposed_s - step.optimizer_s) / 64
    assert step.pipeline_bubble_s == pytest.approx(15 / 7 * per_mb, rel=1e-6)
    assert step.data_parallel.network_bytes_per_node > 0 and step.pipeline_p2p.network_bytes_per_node > 0
    assert 0.2 < step.mfu < 0.9


def test_fsdp_with_pipeline_parallel_gathers_and_reduces_once_per_step() -> None:
    """PyTorch's pipelining keeps an FSDP stage's weights gathered across micro-batches and reduce-scatters its
    gradients after the last one (torchtitan's FSDP + PP), so the traffic does not grow with micro-batches."""

    def job(global_batch: int) -> Job:
        return Job(
            model=LLAMA, hardware=P5, nodes=8, seq_len=8192, micro_batch=1, checkpointing="full",
            tensor_parallel=8, pipeline_parallel=4, global_batch=global_batch, software=Software(sharding="fsdp"),
        )  # fmt: skip

    few, many = estimate_step(job(8)), estimate_step(job(64))
    assert few.micro_batches == 4 and many.micro_batches == 32
    assert many.data_parallel.network_bytes_per_node == few.data_parallel.network_bytes_per_node
    # the whole local stage stays gathered in bf16 (and its gradients unsharded) until the step ends
    stage_params = count_parameters(LLAMA).total / (8 * 4)
    assert job_memory(job(64)).gathered_params_gib * 2**30 >= 2 * stage_params
