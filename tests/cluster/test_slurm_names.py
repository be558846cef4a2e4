"""cluster.slurm_names against the record of ParallelCluster's cookbook (cluster/slurm_naming.json)."""

from __future__ import annotations

import ast
import copy
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from cluster.config_builder import build_cluster_config, example_refs
from cluster.slurm_names import (
    RECORD,
    fact,
    gres_conf_lines,
    main,
    partitions,
    record,
    slurm_conf_lines,
    spec_partitions,
    suspend_exc_nodes,
)
from spec import load_spec
from spec.platform.instances import GPUS

REPO = Path(__file__).resolve().parents[2]
SPECS = [REPO / "spec" / "default.yaml", *sorted((REPO / "spec" / "examples").glob("*.yaml"))]


def _config(name: str) -> dict[str, Any]:
    spec = load_spec(REPO / "spec" / "examples" / name)
    return build_cluster_config(spec, example_refs(spec))


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda path: path.stem)
def test_every_queue_is_a_partition_with_the_recorded_node_names(spec_path: Path) -> None:
    spec = load_spec(spec_path)
    config = build_cluster_config(spec, example_refs(spec))
    names = fact("node_names")["pattern"]
    parts = spec_partitions(spec)
    assert [p.name for p in parts] == [q["Name"] for q in config["Scheduling"]["SlurmQueues"]]
    for queue, part in zip(config["Scheduling"]["SlurmQueues"], parts, strict=True):
        assert part.name == fact("partition_name")["pattern"]["partition"].format(queue=queue["Name"])
        assert part.nodeset == fact("partition_name")["pattern"]["nodeset"].format(queue=queue["Name"])
        expected = []
        for resource in queue["ComputeResources"]:
            values = {
                "queue": queue["Name"],
                "compute_resource": resource["Name"],
                "min_count": resource["MinCount"],
                "dynamic_count": resource["MaxCount"] - resource["MinCount"],
            }
            if resource["MinCount"] > 0:
                expected.append(names["static"].format(**values))
            if resource["MaxCount"] > resource["MinCount"]:
                expected.append(names["dynamic"].format(**values))
        assert [r.hostlist for r in part.ranges] == expected
        assert len(part.node_names()) == sum(r["MaxCount"] for r in queue["ComputeResources"])


def test_p5_nodes_carry_the_recorded_features_and_gres() -> None:
    (part,) = partitions(_config("p5-on-demand.yaml"))
    (node_range,) = part.ranges
    assert part.name == "gpu" and part.default and part.exclusive
    assert node_range.names() == [f"gpu-dy-p5-48xlarge-{i}" for i in range(1, 5)]
    assert node_range.features == ("dynamic", "p5.48xlarge", "p5-48xlarge", "efa", "gpu")
    assert node_range.gres == "gpu:h100:8"
    assert node_range.weight == fact("node_weights")["defaults"]["dynamic"]
    assert node_range.cpus == 192 and node_range.real_memory_mib == int(2048 * 1024 * fact("real_memory")["ratio"])
    assert part.lines() == [
        "NodeName=gpu-dy-p5-48xlarge-[1-4] CPUs=192 RealMemory=1992294 State=CLOUD "
        "Feature=dynamic,p5.48xlarge,p5-48xlarge,efa,gpu Weight=1000 Gres=gpu:h100:8",
        "NodeSet=gpu_nodes Nodes=gpu-dy-p5-48xlarge-[1-4]",
        "PartitionName=gpu Nodes=gpu_nodes MaxTime=INFINITE State=UP Default=YES OverSubscribe=EXCLUSIVE",
    ]
    assert gres_conf_lines([part]) == ["NodeName=gpu-dy-p5-48xlarge-[1-4] Name=gpu Type=h100 File=/dev/nvidia[0-7]"]


def test_trainium_nodes_get_no_gres_and_no_gpu_feature() -> None:
    (part,) = partitions(_config("trn1-neuron.yaml"))
    (node_range,) = part.ranges
    assert node_range.features == ("dynamic", "trn1.32xlarge", "trn1-32xlarge", "efa")
    assert node_range.gres is None and gres_conf_lines([part]) == []
    assert "Gres=" not in part.lines()[0]


def test_capacity_block_nodes_are_static_and_never_suspended() -> None:
    parts = partitions(_config("p5-capacity-block.yaml"))
    assert [r.hostlist for p in parts for r in p.ranges] == ["block-st-p5-48xlarge-[1-2]"]
    assert parts[0].ranges[0].weight == fact("node_weights")["defaults"]["static"] == 1
    assert parts[0].ranges[0].features[0] == "static"
    assert suspend_exc_nodes(parts) == "block-st-p5-48xlarge-[1-2]"
    assert slurm_conf_lines(parts)[-1] == "SuspendExcNodes=block-st-p5-48xlarge-[1-2]"


def test_a_mixed_compute_resource_has_static_then_dynamic_ranges_and_only_the_first_queue_is_default() -> None:
    config = _config("p5-on-demand.yaml")
    second = copy.deepcopy(config["Scheduling"]["SlurmQueues"][0])
    second["Name"] = "spare"
    second["JobExclusiveAllocation"] = False
    second["ComputeResources"][0].update(MinCount=1, MaxCount=3)
    config["Scheduling"]["SlurmQueues"].append(second)
    gpu, spare = partitions(config)
    assert gpu.default and not spare.default
    assert spare.lines()[-1] == "PartitionName=spare Nodes=spare_nodes MaxTime=INFINITE State=UP"
    assert [(r.kind, r.hostlist) for r in spare.ranges] == [
        ("static", "spare-st-p5-48xlarge-[1-1]"),
        ("dynamic", "spare-dy-p5-48xlarge-[1-2]"),
    ]
    assert spare.node_names("static") == ["spare-st-p5-48xlarge-1"]
    assert spare.lines()[-2] == "NodeSet=spare_nodes Nodes=spare-st-p5-48xlarge-[1-1],spare-dy-p5-48xlarge-[1-2]"


def test_without_the_nvidia_driver_on_the_head_node_nodes_keep_the_gpu_feature_but_lose_gres() -> None:
    (part,) = partitions(_config("p4d-odcr.yaml"), nvidia_driver=False)
    assert part.ranges[0].features[-1] == "gpu"
    assert part.ranges[0].gres is None and part.gres_lines() == []


def test_a_gpu_instance_without_a_recorded_ec2_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config("p5-on-demand.yaml")
    h100 = GPUS["NVIDIA H100 80GB HBM3"]
    monkeypatch.setitem(GPUS, h100.device_name, dataclasses.replace(h100, ec2_gpu_name=None))
    with pytest.raises(ValueError, match=r"p5\.48xlarge: gpu_device 'NVIDIA H100 80GB HBM3' has no ec2_gpu_name"):
        partitions(config)


def test_the_gres_type_is_the_catalogues_ec2_gpu_name_lower_cased_without_spaces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h100 = GPUS["NVIDIA H100 80GB HBM3"]
    monkeypatch.setitem(GPUS, h100.device_name, dataclasses.replace(h100, ec2_gpu_name="H100 SXM"))
    (part,) = partitions(_config("p5-on-demand.yaml"))
    assert part.ranges[0].gres == "gpu:h100sxm:8"


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda path: path.stem)
def test_queue_and_compute_resource_names_pass_parallelclusters_name_rules(spec_path: Path) -> None:
    rules = fact("name_rules")
    for part in spec_partitions(load_spec(spec_path)):
        for name in {part.name, *(r.compute_resource for r in part.ranges)}:
            assert re.match(rules["regex"], name) and len(name) <= rules["max_length"], name
            assert name not in rules["forbidden"]


def test_every_fact_names_a_known_source_a_path_and_a_symbol() -> None:
    data = record()
    assert RECORD.name == "slurm_naming.json"
    assert re.fullmatch(r"[0-9a-f]{40}", data["sources"]["cookbook"]["commit"])
    assert re.fullmatch(r"[0-9a-f]{40}", data["sources"]["cookbook"]["same_at"]["commit"])
    for checked in data["sources"]["cookbook"]["also_checked"]:
        assert re.fullmatch(r"[0-9a-f]{40}", checked["commit"]) and checked["result"], checked
    assert re.fullmatch(r"[0-9a-f]{40}", data["sources"]["cli_before"]["commit"])
    assert data["sources"]["cli"]["package"] == f"aws-parallelcluster=={data['parallelcluster_version']}"
    pinned = (REPO / "cluster" / "verify" / "pcluster" / "requirements.txt").read_text()
    assert data["sources"]["cli"]["package"] in pinned.splitlines()
    ids = [item["id"] for item in data["facts"]]
    assert len(ids) == len(set(ids))
    for item in data["facts"]:
        assert item["source"] in data["sources"] and item["path"] and item["symbol"], item["id"]


@pytest.mark.parametrize("where", ["queue", "compute_resource"])
def test_queue_or_compute_resource_custom_slurm_settings_are_refused_not_guessed(where: str) -> None:
    config = _config("p5-on-demand.yaml")
    queue = config["Scheduling"]["SlurmQueues"][0]
    owner = queue if where == "queue" else queue["ComputeResources"][0]
    owner["CustomSlurmSettings"] = {"Feature": "nvlink"}
    with pytest.raises(ValueError, match=r"CustomSlurmSettings on queues or compute resources are not modelled"):
        partitions(config)


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda path: path.stem)
def test_no_spec_sets_custom_slurm_settings_on_a_queue_or_compute_resource(spec_path: Path) -> None:
    spec = load_spec(spec_path)
    for queue in build_cluster_config(spec, example_refs(spec))["Scheduling"]["SlurmQueues"]:
        assert "CustomSlurmSettings" not in queue
        assert all("CustomSlurmSettings" not in resource for resource in queue["ComputeResources"])


@pytest.mark.pcluster
def test_the_recorded_custom_settings_deny_lists_are_the_installed_clis(pcluster_venv: Path) -> None:
    (source,) = pcluster_venv.glob("lib/python*/site-packages/" + fact("custom_settings_deny_list")["path"])
    tree = ast.parse(source.read_text())
    (deny,) = (
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == fact("custom_settings_deny_list")["symbol"] for t in node.targets)
    )
    recorded = fact("custom_settings_deny_list")
    assert deny["Queue"]["Global"] == recorded["queue"]
    assert deny["ComputeResource"]["Global"] == recorded["compute_resource"]
    assert "features" not in recorded["compute_resource"] and "features" in recorded["compute_resource_at_3_11_1"]


def test_the_command_prints_the_default_specs_partition_nodes_and_gres(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "NodeSet=gpu_nodes Nodes=gpu-dy-p5-48xlarge-[1-2]" in lines
    assert "NodeName=gpu-dy-p5-48xlarge-[1-2] Name=gpu Type=h100 File=/dev/nvidia[0-7]" in lines


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda path: path.stem)
def test_parallelclusters_node_daemons_would_parse_every_node_name_back(spec_path: Path) -> None:
    parser = re.compile(fact("node_name_parser")["regex"])
    for part in spec_partitions(load_spec(spec_path)):
        for node_range in part.ranges:
            for name in node_range.names():
                parsed = parser.match(name)
                assert parsed is not None, name
                kind = "static" if parsed.group(2) == "st" else "dynamic"
                assert (parsed.group(1), kind, parsed.group(3)) == (
                    part.name,
                    node_range.kind,
                    node_range.compute_resource,
                )


# A ParallelCluster node name as its node daemons parse it (the record's node-name fact).
DOC_NODE_NAME = re.compile(r"\b[a-z0-9-]+-(?:st|dy)-[a-z0-9-]+-\d+\b")


def test_every_node_name_the_docs_show_is_one_the_default_deployment_has() -> None:
    docs = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
    shown = {(path.name, name) for path in docs for name in DOC_NODE_NAME.findall(path.read_text())}
    assert shown, "the runbook shows no node name at all"
    existing = {
        name for part in spec_partitions(load_spec(REPO / "spec" / "default.yaml")) for name in part.node_names()
    }
    assert {(doc, name) for doc, name in shown if name not in existing} == set()
