import pytest

from training.models.params import count_parameters
from training.planner.published import ALL_ROWS, MEGATRON_ROWS, TABLES


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
    }


def test_some_rows_of_every_fitted_table_are_held_out() -> None:
    for table in TABLES:
        held = [row for row in table.rows if row.holdout]
        assert held, table.name
        if table.name != "ddp-scaling":  # the SageMaker scaling talk is all prediction: nothing is fitted on it
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
