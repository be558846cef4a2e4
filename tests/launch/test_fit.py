"""The memory-fit hook: 16 bytes per parameter over every device, with a margin."""

from __future__ import annotations

from pathlib import Path

import pytest

from launch.fit import check_fits, check_planner_fit, estimate_fit
from slurm.errors import SubmitError
from slurm.target import local_target, resolve_target
from spec import load_spec
from training.config import JobConfig, parse_job_config
from training.models.registry import get_model_args

TRN1 = resolve_target(load_spec("spec/examples/trn1-neuron.yaml"), "neuron", None, None)
P5 = resolve_target(load_spec(None), "fsdp", None, None)


def test_trainium_blog_shapes_fit_on_four_trn1_nodes() -> None:
    for name in ("pythia-6.9b", "neox-20b"):
        fit = check_fits(get_model_args(name), TRN1, nodes=4)
        assert fit.devices == 64 and fit.fits


def test_the_estimate_is_sixteen_bytes_per_parameter_sharded_over_all_devices() -> None:
    model = get_model_args("llama3-8b")
    fit = estimate_fit(model, P5, nodes=2, margin=0.25)
    assert fit.state_bytes == 16 * 8_030_261_248
    assert fit.per_device_bytes == pytest.approx(fit.state_bytes / 16)
    assert fit.usable_bytes_per_device == pytest.approx(80 * 1024**3 * 0.75)


def test_too_few_nodes_names_the_smallest_count_that_fits() -> None:
    model = get_model_args("llama2-70b")
    with pytest.raises(SubmitError, match=r"use at least 3 nodes$"):
        check_fits(model, P5, nodes=1, model_name="llama2-70b")
    assert check_fits(model, P5, nodes=3).fits


def test_the_margin_is_what_separates_fit_from_no_fit() -> None:
    model = get_model_args("llama2-13b")  # 194 GiB of states: 24.2 GiB per GPU on one p5 node
    assert check_fits(model, P5, nodes=1, margin=0.5).fits
    with pytest.raises(SubmitError, match=r"does not fit on 1 x p5\.48xlarge"):
        check_fits(model, P5, nodes=1, margin=0.7)


def test_the_local_cpu_profile_counts_node_memory() -> None:
    fit = check_fits(get_model_args("tiny"), local_target(), nodes=2)
    assert fit.devices == 2 and fit.fits


@pytest.mark.parametrize(("nodes", "margin", "message"), [(0, 0.25, "--nodes: 0"), (1, 1.0, "margin: 1.0")])
def test_bad_inputs_are_named(nodes: int, margin: float, message: str) -> None:
    with pytest.raises(SubmitError, match=message):
        estimate_fit(get_model_args("tiny"), P5, nodes=nodes, margin=margin)


def _job_with(**data: int | str) -> JobConfig:
    import yaml

    raw = yaml.safe_load(Path("training/configs/llama3-8b.yaml").read_text())
    mode = data.pop("mode", None)
    raw["data"].update(data)
    if mode is not None:
        raw["parallel"]["activation_checkpoint"]["mode"] = mode
    return parse_job_config(raw)


def test_the_planner_refuses_what_fits_by_states_alone() -> None:
    model = get_model_args("llama3-8b")
    assert check_planner_fit(model, P5, 1, _job_with()).startswith("fits: ")
    # The states fit easily (16 GiB per GPU), but 16 x 8192 tokens of unrecomputed activations do not.
    greedy = _job_with(micro_batch_size=16, mode="none")
    assert check_fits(model, P5, nodes=1).fits
    with pytest.raises(
        SubmitError, match=r"^--nodes: llama3-8b on 1 x p5\.48xlarge does not fit: needs .* GiB per device"
    ):
        check_planner_fit(model, P5, 1, greedy, model_name="llama3-8b")
