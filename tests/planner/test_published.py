from pathlib import Path

import pytest

from planner.model_source import read_config_json
from planner.published import ALL_ROWS, MEGATRON_ROWS, TABLES
from training.models.params import count_parameters
from training.models.registry import get_model_args


def test_every_row_names_its_source_and_words() -> None:
    sources = {table.name: table.source for table in TABLES}
    for row in ALL_ROWS:
        assert row.source == sources[row.table] and row.words and row.published


def test_row_counts_match_the_documents() -> None:
    assert (
        {table.name: len(table.rows) for table in TABLES}
        == {
            "fsdp": 8,  # 4 model sizes x (A100, H100)
            "fms-fsdp": 4,  # 7b, 13b (HSDP), 34b, 70b (FSDP)
            "llm-foundry": 18,  # a spread of its bf16 rows
            "megatron": 10,  # 1.7B .. 1T
            "trainium": 7,  # Pythia 1, 4 nodes; NeoX 4 .. 64 nodes
            "ddp-scaling": 4,  # 1, 2, 4, 8 instances
            "megatron-bridge": 3,  # DGX-H100 FP8: Llama 3 8B, 70B, Llama 3.1 405B
            "torchtitan": 9,  # Tables 1 and 3 (3 rows each), 4 (2D), 5 (1F1B, interleaved)
            "ours-gpu": 14,  # docs/benchmarks-gpu.jsonl: H100 eager/compiled, H200 ours/torchtitan x eager/compiled (x2), FP8
            "llama3-paper": 3,  # Table 4: 8K GPUs, 16K GPUs, 16K GPUs at 131K tokens
            "nemo-24.07": 8,  # GPT-3 5B/20B/175B (128 GPUs), Llama 2 7B/13B/70B, Llama 3 8B/70B
            "bloom": 1,  # the logged iteration at the end of the first epoch
            "megatron-readme": 4,  # the rows without pipeline parallelism (1.7B-32B)
        }
    )


# torchtitan's float8 rows (torchao's casts) and its 405B pipeline rows are predictions only.
HELD_OUT_SOURCES = ("torchtitan",)


def test_torchtitans_float8_and_pipeline_rows_are_kept_out_of_the_fit() -> None:
    (table,) = [table for table in TABLES if table.name == "torchtitan"]
    held = {row.key for row in table.rows if row.holdout}
    assert held == {row.key for row in table.rows if row.precision == "fp8"}
    assert {"torchtitan/5/1f1b", "torchtitan/5/interleaved-1f1b"} <= held


def test_our_gpu_rows_are_the_benchmark_file() -> None:
    """The rows of this repo's GPU benchmarks are docs/benchmarks-gpu.jsonl's results, value for value."""
    import json

    from planner.published import OUR_GPU_ROWS

    measured = []
    for line in (Path(__file__).resolve().parents[2] / "docs" / "benchmarks-gpu.jsonl").read_text().splitlines():
        run = json.loads(line)
        for result in run["results"]:
            precision = result.get("precision", "bf16")
            measured.append(
                (run["commit"], result["framework"], result["compiled"], precision, result["tokens_per_s_per_gpu"])
            )
            assert (run["micro_batch"], run["seq_len"], run["ac"]) == (4, 4096, "none")
    rows = [
        (row.words.split("commit ")[1], row.key.split("/")[2], row.job.software.compiled, row.words.split(" | ")[2],
         row.published["tokens_per_s_per_device"])
        for row in OUR_GPU_ROWS
    ]  # fmt: skip
    assert sorted(rows) == sorted(measured)
    assert all(row.job.world_size == 1 for row in OUR_GPU_ROWS)


@pytest.mark.parametrize("row", [r for r in ALL_ROWS if r.table == "nemo-24.07"], ids=lambda row: row.key)
def test_nemo_shapes_agree_with_the_tables_model_tflops(row) -> None:
    """The table's Model TFLOP/s per GPU over its tokens/s is its FLOPs per token: the shape we give each model
    must do the same work (6N + attention), within 2 %."""
    from planner.flops import model_flops_per_token

    per_token = row.published["model_tflops_per_device"] * 1e12 / row.published["tokens_per_s_per_device"]
    assert model_flops_per_token(row.job.model, row.job.seq_len) == pytest.approx(per_token, rel=0.02)


@pytest.mark.parametrize("row", [r for r in ALL_ROWS if r.table == "megatron-readme"], ids=lambda row: row.key)
def test_megatron_readme_shapes_have_the_size_of_their_label(row) -> None:
    label = float(row.words.split(" | ")[0].rstrip("B"))
    assert count_parameters(row.job.model).total / 1e9 == pytest.approx(label, rel=0.03)


def test_llama3_paper_rows_are_its_table() -> None:
    rows = [r for r in ALL_ROWS if r.table == "llama3-paper"]
    for row in rows:
        gpus, tp, cp, pp, dp, seq, per_dp = (int(c.replace(",", "")) for c in row.words.split(" | ")[:7])
        job = row.job
        assert (job.world_size, job.tensor_parallel, job.context_parallel, job.pipeline_parallel) == (gpus, tp, cp, pp)
        assert (job.data_parallel, job.seq_len, job.global_batch_sequences) == (dp, seq, dp * per_dp)
        assert job.tokens_per_step == pytest.approx(16 * 2**20, rel=0.05)  # "16M" tokens per batch


def test_new_rows_run_the_layout_their_table_prints() -> None:
    rows = {row.key: row for row in ALL_ROWS}
    big = rows["mbridge/h100/llama3.1_405b"].job
    assert (big.world_size, big.tensor_parallel, big.pipeline_parallel, big.context_parallel) == (1024, 8, 8, 2)
    assert big.software.pipeline_interleave == 8 and big.software.precision == "fp8"
    assert big.data_parallel * big.micro_batch * big.micro_batches_per_step == 512  # GBS = DP x MBS x GA (64)
    titan = rows["torchtitan/5/interleaved-1f1b"].job
    assert (titan.world_size, titan.data_parallel, titan.micro_batches_per_step) == (512, 8, 32)


@pytest.mark.parametrize(
    ("name", "config"),
    [("llama3-70b", "meta-llama--Meta-Llama-3.1-70B"), ("llama3.1-405b", "meta-llama--Meta-Llama-3.1-405B")],
)
def test_the_llama_shapes_of_the_new_rows_are_their_config_json(name: str, config: str) -> None:
    path = Path(__file__).parent / "hf_configs" / f"{config}.json"
    ours, theirs = get_model_args(name), read_config_json(path)
    assert count_parameters(ours) == count_parameters(theirs)


def test_some_rows_of_the_first_tables_are_held_out() -> None:
    """The first six tables keep rows out of the fit as predictions; later sources are predicted by
    leave-one-source-out validation as a whole (planner.validate) instead."""
    first = ("fsdp", "fms-fsdp", "llm-foundry", "megatron", "trainium", "ddp-scaling")
    for table in TABLES:
        held = [row for row in table.rows if row.holdout]
        if table.name in first:
            assert held, table.name
        if table.name not in ("ddp-scaling", *HELD_OUT_SOURCES) and table.name in first:
            assert len(held) < len(table.rows)


@pytest.mark.parametrize("row", MEGATRON_ROWS, ids=lambda row: row.key)
def test_megatron_shapes_match_the_parameter_column(row) -> None:
    heads, hidden, layers = (int(cell) for cell in row.words.split(" | ")[1:4])
    args = row.job.model
    assert (args.n_heads, args.dim, args.n_layers) == (heads, hidden, layers)
    # The column counts learned position embeddings, which these shapes (rotary) do not have; 1.7 is rounded.
    counted = count_parameters(args).total / 1e9
    assert counted == pytest.approx(row.published["params_billion"], rel=0.04)


@pytest.mark.parametrize("row", MEGATRON_ROWS, ids=lambda row: row.key)
def test_megatron_percent_column_is_teraflops_over_the_a100_peak(row) -> None:
    assert row.published["tflops_per_device"] / 312 * 100 == pytest.approx(row.published["percent_of_peak"], abs=0.6)
    assert row.job.world_size == int(row.words.split(" | ")[6])
