"""--compare at scale: Megatron-style TP x PP (interleaved) x CP layouts beside FSDP/HSDP, ranked best first."""

from planner.hardware import hardware
from planner.job import Job, Software
from planner.layouts import compare_layouts, ranked, render_table
from training.models.registry import MODEL_CONFIGS

LLAMA_405B = MODEL_CONFIGS["llama3-8b"].replace(dim=16384, n_layers=126, n_heads=128, ffn_dim=53248)


def _job(nodes: int, tp: int = 1, pp: int = 1) -> Job:
    return Job(
        model=LLAMA_405B, hardware=hardware("p5.48xlarge"), nodes=nodes, seq_len=8192, micro_batch=1,
        checkpointing="full", global_batch=2048, tensor_parallel=tp, pipeline_parallel=pp,
        software=Software(precision="fp8"),
    )  # fmt: skip


def test_a_405b_model_gets_pipeline_and_context_parallel_layouts_that_fit() -> None:
    plans = compare_layouts(_job(128))
    names = [p.name for p in plans]
    assert any(" pp " in f" {n} " for n in names) and any("cp 2" in n for n in names)
    fitting = [p for p in plans if p.memory.fits]
    assert fitting and all(p.job.pipeline_parallel > 1 or p.job.tensor_parallel > 1 for p in fitting[:3])


def test_ranking_puts_layouts_that_fit_first_then_the_fastest() -> None:
    plans = ranked(compare_layouts(_job(128)))
    fits = [p.memory.fits for p in plans]
    assert fits == sorted(fits, reverse=True)
    rates = [p.step.tokens_per_s_per_device for p in plans if p.memory.fits]
    assert rates == sorted(rates, reverse=True)


def test_every_layout_trains_the_same_global_batch_on_the_same_devices() -> None:
    plans = compare_layouts(_job(2048, tp=8, pp=16))  # 16,384 GPUs; FSDP over all cannot split 2,048 sequences
    assert plans and {p.job.world_size for p in plans} == {16384}
    assert {p.job.global_batch_sequences for p in plans} == {2048}


def test_the_table_numbers_the_ranks_and_names_the_layout() -> None:
    table = render_table(ranked(compare_layouts(_job(128))))
    assert table.splitlines()[0].startswith("| rank | layout |")
    assert "| 1 |" in table


def test_the_table_says_which_layouts_llm_submit_runs_on_the_stack_planned() -> None:
    """The FSDP trainer is data parallel only: its stack's TP/PP rows are comparisons llm-submit would refuse."""
    import dataclasses

    from planner.job import unsubmittable_dims

    fsdp = compare_layouts(_job(16))
    assert {p.name for p in fsdp if not unsubmittable_dims(p.job)} == {
        "fsdp", "hsdp (shard 8: one node)", "hsdp (shard 16: two nodes)"
    }  # fmt: skip
    assert "| no (TP x PP: not on this stack's backend) |" in render_table(fsdp)
    nemo = compare_layouts(dataclasses.replace(_job(16), software=Software(precision="fp8", backend="nemo")))
    assert all(not unsubmittable_dims(p.job) for p in nemo if p.job.tensor_parallel > 1)
