from pathlib import Path

import pytest

from planner.model_source import read_config_json
from planner.published import ALL_ROWS, MEGATRON_ROWS, PLANNER_MODELS, TABLES
from training.models.params import count_parameters


def test_every_row_names_its_source_and_words() -> None:
    sources = {table.name: table.source for table in TABLES}
    for row in ALL_ROWS:
        assert row.source == sources[row.table] and row.words and row.published


def test_row_counts_match_the_documents() -> None:
    assert {table.name: len(table.rows) for table in TABLES} == {
        "fsdp": 8,  # 4 model sizes x (A100, H100)
        "fms-fsdp": 4,  # 7b, 13b (HSDP), 34b, 70b (FSDP)
        "llm-foundry": 18,  # a spread of its bf16 rows
        "megatron": 10,  # 1.7B .. 1T
        "trainium": 7,  # Pythia 1, 4 nodes; NeoX 4 .. 64 nodes
        "ddp-scaling": 4,  # 1, 2, 4, 8 instances
        "megatron-bridge": 3,  # DGX-H100 FP8: Llama 3 8B, 70B, Llama 3.1 405B
        "torchtitan": 9,  # Tables 1 and 3 (3 rows each), 4 (2D), 5 (1F1B, interleaved)
    }


NEW_SOURCES = ("megatron-bridge", "torchtitan")


def test_the_sources_added_for_fp8_and_scale_are_kept_out_of_the_fit() -> None:
    for table in TABLES:
        if table.name in NEW_SOURCES:
            assert all(row.holdout for row in table.rows), table.name


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
    ours, theirs = PLANNER_MODELS[name], read_config_json(path)
    assert count_parameters(ours) == count_parameters(theirs)


def test_some_rows_of_every_fitted_table_are_held_out() -> None:
    for table in TABLES:
        held = [row for row in table.rows if row.holdout]
        assert held, table.name
        # the SageMaker scaling talk and the two sources added for FP8 and scale are all prediction
        if table.name not in ("ddp-scaling", *NEW_SOURCES):
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
