from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.config_builder import (
    ClusterRefs,
    build_cluster_config,
    cluster_name,
    custom_resource_properties,
    example_refs,
    health_floors_gib,
    kill_wait_s,
    main,
)
from spec import load_spec, parse_spec
from spec.platform.neuron import NEURON_RELEASES
from tests.cluster.conftest import ALL_SPECS, spec_dict, with_cluster
from tests.stacks.conftest import Assembly

REPO = Path(__file__).resolve().parents[2]


def example(name: str) -> Path:
    return next(p for p in ALL_SPECS if p.name == name)


def config_of(path: Path) -> dict[str, Any]:
    spec = load_spec(path)
    return build_cluster_config(spec, example_refs(spec))


def only_queue(config: dict[str, Any]) -> dict[str, Any]:
    (queue,) = config["Scheduling"]["SlurmQueues"]
    return queue


def test_default_p5_on_demand() -> None:
    config = config_of(ALL_SPECS[0])
    queue = only_queue(config)
    (resource,) = queue["ComputeResources"]
    assert queue["CapacityType"] == "ONDEMAND"
    assert resource == {
        "Name": "p5-48xlarge",
        "InstanceType": "p5.48xlarge",
        "MinCount": 0,
        "MaxCount": 2,
        "Efa": {"Enabled": True},
        "Networking": {"PlacementGroup": {"Enabled": True}},
        "HealthChecks": {"Gpu": {"Enabled": True}},
    }
    assert queue["JobExclusiveAllocation"] is True
    assert queue["Iam"] == {"InstanceRole": "arn:aws:iam::111111111111:role/llm-demo-cluster-node"}
    assert config["HeadNode"]["Iam"] == {"InstanceRole": "arn:aws:iam::111111111111:role/llm-demo-head-node"}
    assert config["Imds"] == {"ImdsSupport": "v2.0"}
    assert config["HeadNode"]["Imds"] == {"Secured": True}
    assert "Ssh" not in config["HeadNode"]  # SSM is the way in
    assert config["Scheduling"]["SlurmSettings"] == {
        "ScaledownIdletime": 10,
        "QueueUpdateStrategy": "DRAIN",
        "CustomSlurmSettings": [
            {"PrologFlags": "Alloc"},
            {"SchedulerParameters": "nohold_on_prolog_fail"},
            {"KillWait": 446},  # the default stop_save at the default FSx's throughput
        ],
        "Dns": {"DisableManagedDns": True, "UseEc2Hostnames": True},  # internet_egress: none
    }
    assert config["SharedStorage"] == [
        {
            "Name": "fsx",
            "StorageType": "FsxLustre",
            "MountDir": "/fsx",
            "FsxLustreSettings": {
                "StorageCapacity": 1200,
                "DeploymentType": "PERSISTENT_2",
                "DeletionPolicy": "Retain",
                "PerUnitStorageThroughput": 250,
                "DataCompressionType": "LZ4",
                "AutomaticBackupRetentionDays": 7,
                "CopyTagsToBackups": True,
            },
        }
    ]


def test_gpu_bootstrap_sequence_carries_the_facts() -> None:
    queue = only_queue(config_of(ALL_SPECS[0]))
    (action,) = queue["CustomActions"]["OnNodeConfigured"]["Sequence"]
    assert action["Script"].endswith("/bootstrap/gpu_node.sh")
    args = action["Args"]
    assert args[args.index("--gpus") + 1] == "8"
    assert args[args.index("--efa-devices") + 1] == "32"
    assert args[args.index("--enroot-dir") + 1] == "/scratch/enroot"
    assert args[args.index("--container-image") + 1] == "/fsx/containers/llm-nemo-efa-26.08-efa1.43.2.sqsh"


def test_p4d_odcr() -> None:
    queue = only_queue(config_of(example("p4d-odcr.yaml")))
    (resource,) = queue["ComputeResources"]
    assert queue["CapacityType"] == "ONDEMAND"
    assert resource["CapacityReservationTarget"] == {"CapacityReservationId": "cr-0a1b2c3d4e5f67890"}
    assert resource["Networking"] == {"PlacementGroup": {"Enabled": False}}
    args = queue["CustomActions"]["OnNodeConfigured"]["Sequence"][0]["Args"]
    assert args[args.index("--efa-devices") + 1] == "4"


def test_p5_capacity_block() -> None:
    queue = only_queue(config_of(example("p5-capacity-block.yaml")))
    (resource,) = queue["ComputeResources"]
    assert queue["CapacityType"] == "CAPACITY_BLOCK"
    assert "AllocationStrategy" not in queue
    assert (resource["MinCount"], resource["MaxCount"]) == (2, 2)
    assert resource["CapacityReservationTarget"] == {"CapacityReservationId": "cr-0fedcba9876543210"}
    assert resource["Networking"] == {"PlacementGroup": {"Enabled": False}}


def test_trn1_neuron() -> None:
    config = config_of(example("trn1-neuron.yaml"))
    queue = only_queue(config)
    (resource,) = queue["ComputeResources"]
    assert config["Image"] == {"Os": "alinux2023"}
    assert queue["Image"] == {"CustomAmi": "ami-0123456789abcdef0"}
    assert "HealthChecks" not in resource  # the GPU check has nothing to check on Trainium
    assert resource["Efa"] == {"Enabled": True}
    (action,) = queue["CustomActions"]["OnNodeConfigured"]["Sequence"]
    assert action["Script"].endswith("/bootstrap/trn1_node.sh")
    args = action["Args"]
    pins = dict(item.split("=") for item in args[args.index("--pins") + 1].split(","))
    assert pins == NEURON_RELEASES["2.26.1"]
    assert args[args.index("--devices") + 1] == "16"
    assert args[args.index("--efa-devices") + 1] == "8"
    assert args[args.index("--compile-cache") + 1] == "/fsx/neuron-cache"
    assert args[args.index("--offline") + 1] == "true"
    # Without the NxDT stack in the AMI, the node installs it from the artifacts bucket with the asset installer.
    assert args[args.index("--nxdt-wheelhouse") + 1] == "s3://llm-demo-artifacts-111111111111/nxdt/2.26.1/"
    assert args[args.index("--nxdt-installer") + 1].endswith("/bootstrap/nxdt_install.sh")


def test_refs_are_placed_verbatim_even_as_cdk_tokens() -> None:
    spec = load_spec()
    refs = ClusterRefs(
        head_subnet_id="${Token[TOKEN.101]}",
        compute_subnet_id="${Token[TOKEN.102]}",
        head_instance_role_arn="${Token[TOKEN.103]}",
        compute_instance_role_arn="${Token[TOKEN.104]}",
        head_bootstrap_uri="s3://${Token[TOKEN.105]}/head.sh",
        gpu_bootstrap_uri="s3://${Token[TOKEN.105]}/gpu.sh",
        trn1_bootstrap_uri="s3://${Token[TOKEN.105]}/trn1.sh",
        additional_security_group_ids=("${Token[TOKEN.106]}",),
    )
    config = build_cluster_config(spec, refs)
    queue = only_queue(config)
    assert config["HeadNode"]["Networking"] == {
        "SubnetId": "${Token[TOKEN.101]}",
        "AdditionalSecurityGroups": ["${Token[TOKEN.106]}"],
    }
    assert queue["Networking"]["SubnetIds"] == ["${Token[TOKEN.102]}"]
    assert queue["Iam"]["InstanceRole"] == "${Token[TOKEN.104]}"
    assert config["HeadNode"]["CustomActions"]["OnNodeConfigured"]["Sequence"][0]["Script"] == (
        "s3://${Token[TOKEN.105]}/head.sh"
    )
    assert "--payload" not in config["HeadNode"]["CustomActions"]["OnNodeConfigured"]["Sequence"][0]["Args"]


def test_internet_egress_keeps_managed_dns() -> None:
    data = spec_dict()
    data["network"]["internet_egress"] = "nat"
    spec = parse_spec(data)
    settings = build_cluster_config(spec, example_refs(spec))["Scheduling"]["SlurmSettings"]
    assert "Dns" not in settings


def head_args(spec_data: dict[str, Any]) -> list[str]:
    spec = parse_spec(spec_data)
    args: list[str] = build_cluster_config(spec, example_refs(spec))["HeadNode"]["CustomActions"]["OnNodeConfigured"][
        "Sequence"
    ][0]["Args"]
    return args


def test_head_node_builds_the_python_env_from_the_wheelhouse_or_pypi() -> None:
    data = spec_dict()
    args = head_args(data)
    assert args[args.index("--python") + 1] == "python3.11"
    # Unset in the spec: the artifacts stack's bucket (spec.artifacts), where make upload-artifacts puts the wheels.
    assert args[args.index("--python-env") + 1] == (
        "wheelhouse:s3://llm-demo-artifacts-111111111111/wheelhouse/py3.11/"
    )
    data["cluster"]["python_wheelhouse"] = "s3://team-wheels-111111111111/py311/"
    assert (
        head_args(data)[head_args(data).index("--python-env") + 1] == "wheelhouse:s3://team-wheels-111111111111/py311/"
    )
    data["network"]["internet_egress"] = "nat"
    assert "wheelhouse:s3://" in head_args(data)[head_args(data).index("--python-env") + 1]  # the wheelhouse wins
    del data["cluster"]["python_wheelhouse"]
    data["cluster"]["python_version"] = "3.12"
    args = head_args(data)
    assert args[args.index("--python-env") + 1] == "internet"
    assert args[args.index("--python") + 1] == "python3.12"
    data["cluster"]["fsx"] = None  # nowhere shared to put it
    assert "--python-env" not in head_args(data)


def test_ssh_key_and_existing_file_system() -> None:
    def edit(cluster: dict[str, Any]) -> None:
        cluster["ssh_key_name"] = "ops-key"
        cluster["fsx"] = {"file_system_id": "fs-0123456789abcdef0", "mount_dir": "/shared"}
        cluster["containers"]["nemo_image"] = "/shared/containers/nemo.sqsh"  # images live on the shared mount

    spec = parse_spec(with_cluster(edit))
    config = build_cluster_config(spec, example_refs(spec))
    assert config["HeadNode"]["Ssh"] == {"KeyName": "ops-key"}
    assert config["SharedStorage"][0]["FsxLustreSettings"] == {"FileSystemId": "fs-0123456789abcdef0"}
    assert config["SharedStorage"][0]["MountDir"] == "/shared"


def test_custom_resource_properties() -> None:
    spec = load_spec()
    properties = custom_resource_properties(spec, example_refs(spec))
    assert properties["ClusterName"] == "llm-demo" == cluster_name(spec)
    assert properties["ClusterName"] != spec.stack_names["cluster"]
    assert properties["DeletionPolicy"] == "Delete"
    assert properties["ClusterConfiguration"]["HeadNode"]["InstanceType"] == "m6i.2xlarge"


def test_spec_without_cluster_is_refused() -> None:
    data = spec_dict()
    del data["cluster"]
    spec = parse_spec(data)
    with pytest.raises(ValueError, match=r"^cluster: the spec has no cluster section$"):
        build_cluster_config(spec, example_refs(spec))


def test_cli_prints_yaml_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(example("p5-capacity-block.yaml"))]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["Scheduling"]["SlurmQueues"][0]["CapacityType"] == "CAPACITY_BLOCK"
    assert main(["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["HeadNode"]["InstanceType"] == "m6i.2xlarge"


def test_cli_reports_a_bad_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = with_cluster(lambda c: c["queues"][0].update(instance_type="p9.96xlarge"))
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    assert main([str(bad)]) == 2
    assert "cluster.queues[0].instance_type: 'p9.96xlarge' is not in the facts table" in capsys.readouterr().err


def test_refs_dataclass_is_frozen() -> None:
    refs = example_refs(load_spec())
    assert replace(refs, head_payload_uri=None).head_payload_uri is None


def test_slurm_runs_the_health_prolog_at_allocation_and_requeues_after_it_fails() -> None:
    spec = load_spec()
    settings = build_cluster_config(spec, example_refs(spec))["Scheduling"]["SlurmSettings"]
    assert {"PrologFlags": "Alloc"} in settings["CustomSlurmSettings"]
    assert {"SchedulerParameters": "nohold_on_prolog_fail"} in settings["CustomSlurmSettings"]


def test_node_checks_know_the_shared_and_scratch_paths() -> None:
    spec = load_spec()
    queue = build_cluster_config(spec, example_refs(spec))["Scheduling"]["SlurmQueues"][0]
    args = queue["CustomActions"]["OnNodeConfigured"]["Sequence"][0]["Args"]
    assert args[args.index("--shared-dir") + 1] == "/fsx"
    assert args[args.index("--scratch-dir") + 1] == "/scratch"


def key_paths(node: Any, path: str = "") -> set[str]:
    """Every key of a config as a dotted path (list items as `[]`); a CloudFormation function is a leaf value."""
    if isinstance(node, dict) and not (len(node) == 1 and next(iter(node)).startswith(("Fn::", "Ref"))):
        return {p for key, value in node.items() for p in {f"{path}.{key}", *key_paths(value, f"{path}.{key}")}}
    if isinstance(node, list):
        return {p for item in node for p in key_paths(item, f"{path}[]")}
    return set()


@pytest.mark.synth
def test_the_printed_config_has_the_keys_the_cluster_stack_deploys(default_assembly: Assembly) -> None:
    """`python -m cluster.config_builder` stands example ids in for the references; its keys are the deployed
    config's (SecurityGroups, the network stack's cluster group replacing ParallelCluster's, and no other)."""
    (resource,) = default_assembly.resources("cluster", "Custom::PclusterCluster").values()
    deployed = key_paths(resource["Properties"]["ClusterConfiguration"])
    printed = key_paths(build_cluster_config(default_assembly.spec, example_refs(default_assembly.spec)))
    assert (sorted(printed - deployed), sorted(deployed - printed)) == ([], [])


def contained(shown: Any, built: Any, path: str = "") -> list[str]:
    """Where `shown` (a doc's excerpt) says something `built` does not: each key and list item it has, equal."""
    if isinstance(shown, dict):
        if not isinstance(built, dict):
            return [f"{path}: {built!r} is not a mapping"]
        return [
            problem
            for key, value in shown.items()
            for problem in (
                contained(value, built[key], f"{path}.{key}") if key in built else [f"{path}.{key}: not built"]
            )
        ]
    if isinstance(shown, list):
        if not isinstance(built, list) or len(built) < len(shown):
            return [f"{path}: {built!r} has fewer items"]
        return [problem for i, item in enumerate(shown) for problem in contained(item, built[i], f"{path}[{i}]")]
    return [] if shown == built else [f"{path}: the doc shows {shown!r}, the builder makes {built!r}"]


def test_the_config_cluster_md_shows_is_what_the_builder_prints_for_the_default_spec() -> None:
    text = (REPO / "docs" / "cluster.md").read_text()
    (excerpt,) = [
        yaml.safe_load(body)
        for body in re.findall(r"^```yaml\n(.*?)^```", text, flags=re.S | re.M)
        if "HeadNode:" in body
    ]
    spec = load_spec()
    assert contained(excerpt, build_cluster_config(spec, example_refs(spec))) == []


def test_kill_wait_lets_the_longest_stop_finish_its_save() -> None:
    """Issue 42: Slurm's KillWait (30 s unless set) killed a TERM-triggered save long before an 8B checkpoint was on
    FSx. The builder sets it from cluster.stop_save at the file system's throughput: the default spec's 1200 GiB at
    250 MB/s/TiB (293 MB/s) writes 113 GB in 386 s; 30 s of step and 30 s of exit make 446 s."""
    spec = load_spec()
    settings = build_cluster_config(spec, example_refs(spec))["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"]
    (kill_wait,) = [item["KillWait"] for item in settings if "KillWait" in item]
    assert kill_wait == 446
    faster = parse_spec(with_cluster(lambda c: c["fsx"].update(storage_gib=4800, throughput_mb_per_tib=1000)))
    assert build_cluster_config(faster, example_refs(faster))["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"][
        -1
    ] == {"KillWait": 85}  # 30 + 113 GB at 4688 MB/s (24.1 s) + 30, rounded up
    no_fsx = parse_spec(with_cluster(lambda c: c.update(fsx=None)))
    built = build_cluster_config(no_fsx, example_refs(no_fsx))["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"]
    assert not [item for item in built if "KillWait" in item]  # nothing to save to: Slurm's default stands


def test_the_default_stop_save_covers_the_runbooks_8b_model_on_nemo() -> None:
    """The spec's default stop is at least the planner's for Llama 3 8B on nemo (14 bytes per parameter) with the
    planner's step on the default queue's two p5 nodes (about 1 s)."""
    from planner.stop_window import stop_window
    from training.models.registry import get_model_args

    spec = load_spec()
    assert spec.cluster is not None and spec.cluster.fsx is not None
    planned = stop_window(get_model_args("llama3-8b"), "nemo", spec.cluster.fsx, step_s=2.0)
    assert spec.cluster.stop_save.checkpoint_gb * 1e9 >= planned.checkpoint_bytes
    kill_wait = kill_wait_s(spec.cluster)
    assert kill_wait is not None and kill_wait >= planned.lead_s


def test_fsx_keeps_automatic_backups_by_default() -> None:
    """The FSx API's default is no backups; a PERSISTENT file system the cluster creates keeps a week of them."""
    spec = load_spec()
    (storage,) = build_cluster_config(spec, example_refs(spec))["SharedStorage"]
    settings = storage["FsxLustreSettings"]
    assert (settings["AutomaticBackupRetentionDays"], settings["CopyTagsToBackups"]) == (7, True)
    assert "DailyAutomaticBackupStartTime" not in settings

    def timed(cluster: dict[str, Any]) -> None:
        cluster["fsx"].update(automatic_backup_retention_days=30, daily_automatic_backup_start_time="03:30")

    timed_spec = parse_spec(with_cluster(timed))
    (storage,) = build_cluster_config(timed_spec, example_refs(timed_spec))["SharedStorage"]
    assert storage["FsxLustreSettings"]["AutomaticBackupRetentionDays"] == 30
    assert storage["FsxLustreSettings"]["DailyAutomaticBackupStartTime"] == "03:30"

    offs: list[dict[str, Any]] = [
        {"automatic_backup_retention_days": 0},
        {"deployment_type": "SCRATCH_2", "throughput_mb_per_tib": None},
    ]
    for off in offs:

        def switch_off(cluster: dict[str, Any], off: dict[str, Any] = off) -> None:
            cluster["fsx"].update(off)

        spec_off = parse_spec(with_cluster(switch_off))
        (storage,) = build_cluster_config(spec_off, example_refs(spec_off))["SharedStorage"]
        assert "AutomaticBackupRetentionDays" not in storage["FsxLustreSettings"], off
        assert "CopyTagsToBackups" not in storage["FsxLustreSettings"], off


def test_node_checks_get_free_space_floors_from_the_stop_save() -> None:
    """The prolog's floors: one stop's checkpoint on the shared file system (113 GB: 106 GiB), 20 GiB of scratch."""
    spec = load_spec()
    queue = build_cluster_config(spec, example_refs(spec))["Scheduling"]["SlurmQueues"][0]
    args = queue["CustomActions"]["OnNodeConfigured"]["Sequence"][0]["Args"]
    assert args[args.index("--min-fsx-free-gib") + 1] == "106"
    assert args[args.index("--min-scratch-free-gib") + 1] == "20"
    trn1 = load_spec(next(p for p in ALL_SPECS if p.name == "trn1-neuron.yaml"))
    queue = build_cluster_config(trn1, example_refs(trn1))["Scheduling"]["SlurmQueues"][0]
    args = queue["CustomActions"]["OnNodeConfigured"]["Sequence"][0]["Args"]
    assert trn1.cluster is not None
    assert args[args.index("--min-fsx-free-gib") + 1] == str(health_floors_gib(trn1.cluster)[0])
