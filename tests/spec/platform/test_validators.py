from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from cluster.config_builder import ClusterRefs, build_cluster_config, example_refs
from spec import SpecError, load_spec
from spec.platform.validators import allows_all_traffic_with_itself, config_problems
from tests.cluster.conftest import ALL_SPECS, parse, spec_dict, with_cluster


def problems_of(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse(data)
    return [str(problem) for problem in caught.value.problems]


def queue0(cluster: dict[str, Any]) -> dict[str, Any]:
    queue: dict[str, Any] = cluster["queues"][0]
    return queue


@pytest.mark.parametrize("path", ALL_SPECS, ids=lambda p: p.name)
def test_shipped_specs_are_valid(path: Any) -> None:
    assert load_spec(path).cluster is not None


# ---------------------------------------------------------------- spec-level rules, exact messages


def test_unknown_queue_instance_type() -> None:
    data = with_cluster(lambda c: queue0(c).update(instance_type="p9.96xlarge"))
    assert problems_of(data) == [
        "cluster.queues[0].instance_type: 'p9.96xlarge' is not in the facts table (spec/platform/instances.py); "
        "known: p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge, p6-b200.48xlarge, "
        "p6-b300.48xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge"
    ]


def test_the_local_cpu_node_is_not_a_queue_instance_type() -> None:
    # local-cpu is the local SLURM cluster's node (spec.platform.instances.LOCAL_INSTANCE), never a deployable type.
    data = with_cluster(lambda c: queue0(c).update(instance_type="local-cpu"))
    (line,) = problems_of(data)
    assert line.startswith("cluster.queues[0].instance_type: 'local-cpu' is not in the facts table ")


def test_unknown_head_node_type() -> None:
    data = with_cluster(lambda c: c["head_node"].update(instance_type="t2.nano"))
    (line,) = problems_of(data)
    assert line.startswith(
        "cluster.head_node.instance_type: 't2.nano' is not in the facts table (spec/platform/instances.py); "
        "use one of c5.xlarge, c5.2xlarge, "
    )


def test_accelerated_head_node() -> None:
    data = with_cluster(lambda c: c["head_node"].update(instance_type="p5.48xlarge"))
    assert problems_of(data) == [
        "cluster.head_node.instance_type: 'p5.48xlarge' is an accelerated type; "
        "the head node needs a CPU type such as m6i.2xlarge"
    ]


def test_efa_queue_needs_an_explicit_placement_group_decision() -> None:
    data = with_cluster(lambda c: queue0(c).pop("placement_group"))
    assert problems_of(data) == [
        "cluster.queues[0].placement_group: None must be set to true or false: queue 'gpu' uses EFA, and "
        "ParallelCluster refuses an EFA queue without an explicit placement-group decision (false suits ODCRs)"
    ]


def test_efa_off_needs_no_placement_group_decision() -> None:
    def edit(cluster: dict[str, Any]) -> None:
        queue0(cluster).pop("placement_group")
        queue0(cluster)["efa"] = False

    assert parse(with_cluster(edit)).cluster is not None


def test_efa_on_a_type_without_efa() -> None:
    def edit(cluster: dict[str, Any]) -> None:
        cluster["queues"].append({"name": "cpu", "instance_type": "c6i.xlarge", "max_count": 2, "efa": True})

    assert problems_of(with_cluster(edit)) == [
        "cluster.queues[1].efa: True is true, but c6i.xlarge has no EFA interfaces"
    ]


def test_duplicate_queue_names() -> None:
    data = with_cluster(lambda c: c["queues"].append(dict(queue0(c))))
    assert problems_of(data) == ["cluster.queues[1].name: 'gpu' duplicates cluster.queues[0].name"]


def test_min_count_above_max_count() -> None:
    data = with_cluster(lambda c: queue0(c).update(min_count=3, max_count=2))
    assert problems_of(data) == ["cluster.queues[0].min_count: 3 is larger than max_count (2)"]


def block(cluster: dict[str, Any], **changes: Any) -> None:
    queue0(cluster).update(
        min_count=2,
        max_count=2,
        placement_group=False,
        capacity={
            "type": "capacity_block",
            "reservation_id": "cr-0123456789abcdef0",
            "availability_zone": "us-east-1a",
        },
    )
    queue0(cluster).update(changes)


def test_capacity_block_needs_min_equal_max() -> None:
    data = with_cluster(lambda c: block(c, min_count=1))
    assert problems_of(data) == [
        "cluster.queues[0].min_count: 1 must equal max_count (2) for a Capacity Block: "
        "its nodes are static for the block's life"
    ]


def test_capacity_block_needs_nodes() -> None:
    data = with_cluster(lambda c: block(c, min_count=0, max_count=1))
    assert problems_of(data) == [
        "cluster.queues[0].min_count: 0 must equal max_count (1) for a Capacity Block: "
        "its nodes are static for the block's life",
        "cluster.queues[0].min_count: 0 must be greater than 0 for a Capacity Block",
    ]


def test_capacity_block_refuses_an_allocation_strategy() -> None:
    data = with_cluster(lambda c: block(c, allocation_strategy="lowest-price"))
    assert problems_of(data) == [
        "cluster.queues[0].allocation_strategy: 'lowest-price' must be unset for a Capacity Block"
    ]


def test_capacity_block_refuses_a_placement_group() -> None:
    data = with_cluster(lambda c: block(c, placement_group=True))
    assert problems_of(data) == [
        "cluster.queues[0].placement_group: True must be false for a Capacity Block: its capacity is already "
        "co-located, and a placement group causes insufficient-capacity errors"
    ]


def test_capacity_block_needs_parallelcluster_3_8() -> None:
    def edit(cluster: dict[str, Any]) -> None:
        block(cluster)
        cluster["parallelcluster_version"] = "3.7.2"

    assert problems_of(with_cluster(edit)) == [
        "cluster.parallelcluster_version: '3.7.2' must be 3.8.0 or newer for Capacity Blocks (queue 'gpu')"
    ]


def test_reservation_az_must_match_the_subnet_az() -> None:
    data = with_cluster(lambda c: block(c))
    data["cluster"]["queues"][0]["capacity"]["availability_zone"] = "us-east-1b"
    assert problems_of(data) == [
        "cluster.queues[0].capacity.availability_zone: 'us-east-1b' differs from network.availability_zone "
        "(us-east-1a), the compute subnet's AZ; reserved instances launch only in the reservation's AZ"
    ]


def test_reservation_needs_id_and_az() -> None:
    data = with_cluster(lambda c: queue0(c).update(capacity={"type": "odcr"}))
    assert problems_of(data) == [
        "cluster.queues[0].capacity.reservation_id: None is required for capacity type 'odcr'",
        "cluster.queues[0].capacity.availability_zone: None is required for capacity type 'odcr' "
        "(the reservation's AZ)",
    ]


def test_on_demand_refuses_reservation_fields() -> None:
    data = with_cluster(lambda c: queue0(c).update(capacity={"reservation_id": "cr-0123456789abcdef0"}))
    assert problems_of(data) == [
        "cluster.queues[0].capacity.reservation_id: 'cr-0123456789abcdef0' is only read for capacity types "
        "odcr and capacity_block"
    ]


def trn1_spec() -> dict[str, Any]:
    return spec_dict(next(p for p in ALL_SPECS if p.name == "trn1-neuron.yaml"))


def test_trn1_queue_needs_a_neuron_version() -> None:
    data = trn1_spec()
    del data["cluster"]["neuron"]
    assert problems_of(data) == [
        "cluster.neuron: None is required: queue 'trn1' runs trn1.32xlarge and needs a pinned Neuron SDK "
        "(cluster.neuron.sdk_version)"
    ]


def test_unknown_neuron_release_needs_explicit_pins() -> None:
    data = trn1_spec()
    data["cluster"]["neuron"]["sdk_version"] = "2.28.0"
    assert problems_of(data) == [
        "cluster.neuron.sdk_version: '2.28.0' has no pins in spec/platform/neuron.py (known: 2.26.1); "
        "set cluster.neuron.packages"
    ]
    data["cluster"]["neuron"]["packages"] = {
        "aws-neuronx-dkms": "2.30.0.0",
        "aws-neuronx-runtime-lib": "2.34.0.0",
        "aws-neuronx-collectives": "2.34.0.0",
        "aws-neuronx-tools": "2.32.0.0",
        "torch-neuronx": "2.9.0.2.14.1",
        "neuronx-cc": "2.27.1.0",
    }
    assert parse(data).cluster is not None


def test_neuron_pins_must_cover_every_package() -> None:
    data = trn1_spec()
    data["cluster"]["neuron"]["packages"] = {"aws-neuronx-dkms": "2.24.7.0"}
    (line,) = problems_of(data)
    assert line.startswith("cluster.neuron.packages: {'aws-neuronx-dkms': '2.24.7.0'} must pin every Neuron package; ")


def test_trn1_without_egress_needs_a_neuron_ami() -> None:
    data = trn1_spec()
    del data["cluster"]["neuron"]["custom_ami"]
    assert problems_of(data) == [
        "cluster.neuron.custom_ami: None is required because network.internet_egress is 'none': trn1 nodes "
        "cannot reach Neuron's package repositories; build the AMI from cluster/bootstrap/neuron-image.yaml "
        "with pcluster build-image"
    ]
    data["network"]["internet_egress"] = "nat"
    assert parse(data).cluster is not None


def test_compile_cache_must_be_on_fsx() -> None:
    data = trn1_spec()
    data["cluster"]["neuron"]["compile_cache_dir"] = "/home/neuron-cache"
    assert problems_of(data) == [
        "cluster.neuron.compile_cache_dir: '/home/neuron-cache' must lie under the FSx mount (/fsx) "
        "so every node reuses compiled graphs"
    ]


def test_python_env_without_egress_defaults_to_the_artifacts_bucket() -> None:
    # Nothing reaches PyPI, so a spec without a wheelhouse gets the one in the artifacts stack's bucket
    # (spec.artifacts); the old "is required" error is gone.
    data = with_cluster(lambda c: c.pop("python_wheelhouse", None))
    assert data["network"]["internet_egress"] == "none"
    assert parse(data).cluster is not None
    data["network"]["internet_egress"] = "nat"
    assert parse(data).cluster is not None


def test_python_fields_name_the_bad_value() -> None:
    data = with_cluster(lambda c: c.update(python_version=3.10, python_wheelhouse="https://example.com/wheels"))
    assert problems_of(data) == [
        "cluster.python_version: 3.1 must be one of 3.11, 3.12, quoted (YAML reads 3.10 as 3.1)",
        "cluster.python_wheelhouse: 'https://example.com/wheels' must be an S3 prefix such as s3://my-bucket/wheelhouse/",
    ]
    parsed = parse(with_cluster(lambda c: c.update(python_version=3.12))).cluster
    assert parsed is not None and parsed.python_version == "3.12"
    (line,) = problems_of(with_cluster(lambda c: c.update(python_version="3.9")))
    assert line == "cluster.python_version: '3.9' input should be '3.11' or '3.12'"


@pytest.mark.parametrize("size", [1200, 2400, 4800, 9600])
def test_valid_fsx_sizes(size: int) -> None:
    assert parse(with_cluster(lambda c: c["fsx"].update(storage_gib=size))).cluster is not None


@pytest.mark.parametrize("size", [1300, 3600, 6000])
def test_fsx_size_increments(size: int) -> None:
    data = with_cluster(lambda c: c["fsx"].update(storage_gib=size))
    assert problems_of(data) == [f"cluster.fsx.storage_gib: {size} must be 1200 or a multiple of 2400 for PERSISTENT_2"]


def test_fsx_throughput_per_deployment_type() -> None:
    data = with_cluster(lambda c: c["fsx"].update(throughput_mb_per_tib=200))
    assert problems_of(data) == [
        "cluster.fsx.throughput_mb_per_tib: 200 must be one of 125, 250, 500, 1000 for PERSISTENT_2"
    ]
    data = with_cluster(lambda c: c["fsx"].update(deployment_type="SCRATCH_2"))
    assert problems_of(data) == ["cluster.fsx.throughput_mb_per_tib: 250 must be unset (null) for SCRATCH_2"]


def test_price_override_for_unknown_type() -> None:
    data = with_cluster(lambda c: c.update(prices={"x1.metal": 3.0}))
    assert problems_of(data) == [
        "cluster.prices.x1.metal: 'x1.metal' is not in the facts table (spec/platform/instances.py)"
    ]


def test_field_level_errors_name_the_path() -> None:
    data = with_cluster(lambda c: c.update(parallelcluster_version="3.5.0", bogus=1))
    assert problems_of(data) == [
        "cluster.parallelcluster_version: '3.5.0' must be 3.6.0 or newer (the cluster custom resource arrived in 3.6.0)",
        "cluster.bogus: 1 is not a known key (misspelled?)",
    ]


# ---------------------------------------------------------------- config-level rules over the builder's output


def built(path: Any = ALL_SPECS[0], refs: ClusterRefs | None = None) -> dict[str, Any]:
    spec = load_spec(path)
    return build_cluster_config(spec, refs or example_refs(spec))


@pytest.mark.parametrize("path", ALL_SPECS, ids=lambda p: p.name)
def test_builder_output_passes_the_config_rules(path: Any) -> None:
    assert config_problems(built(path)) == []


def test_config_rule_efa_placement_group() -> None:
    config = built()
    del config["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["Networking"]
    assert [str(p) for p in config_problems(config)] == [
        "Scheduling.SlurmQueues[0].ComputeResources[0].Networking.PlacementGroup: None must be explicit for an "
        "EFA compute resource (Enabled: true or false)"
    ]


def test_config_rules_capacity_block() -> None:
    config = built(next(p for p in ALL_SPECS if p.name == "p5-capacity-block.yaml"))
    queue = config["Scheduling"]["SlurmQueues"][0]
    resource = queue["ComputeResources"][0]
    resource["MinCount"] = 0
    resource["Instances"] = [{"InstanceType": "p5.48xlarge"}, {"InstanceType": "p5e.48xlarge"}]
    queue["AllocationStrategy"] = "lowest-price"
    del resource["CapacityReservationTarget"]
    resource["Networking"]["PlacementGroup"]["Enabled"] = True
    assert [str(p) for p in config_problems(config)] == [
        "Scheduling.SlurmQueues[0].ComputeResources[0].MinCount: 0 must equal MaxCount (2) for a Capacity Block",
        "Scheduling.SlurmQueues[0].ComputeResources[0].MinCount: 0 must be greater than 0 for a Capacity Block",
        "Scheduling.SlurmQueues[0].ComputeResources[0].Instances: ['p5.48xlarge', 'p5e.48xlarge'] must hold "
        "exactly one instance type for a Capacity Block",
        "Scheduling.SlurmQueues[0].AllocationStrategy: 'lowest-price' must be unset for a Capacity Block",
        "Scheduling.SlurmQueues[0].ComputeResources[0].CapacityReservationTarget.CapacityReservationId: None is "
        "required for a Capacity Block",
        "Scheduling.SlurmQueues[0].ComputeResources[0].Networking.PlacementGroup.Enabled: True must be false for "
        "a Capacity Block",
    ]


def described(group: str, inbound_self: bool, outbound_self: bool) -> dict[str, Any]:
    def rules(self_rule: bool) -> list[dict[str, Any]]:
        pairs = [{"GroupId": group}] if self_rule else []
        return [{"IpProtocol": "-1", "UserIdGroupPairs": pairs, "IpRanges": [{"CidrIp": "10.40.0.0/16"}]}]

    return {"GroupId": group, "IpPermissions": rules(inbound_self), "IpPermissionsEgress": rules(outbound_self)}


def test_config_rule_efa_security_group_self_rule() -> None:
    config = built()
    group = "${Token[TOKEN.42]}"  # a CDK token is compared as an opaque string
    for queue in config["Scheduling"]["SlurmQueues"]:
        queue["Networking"]["SecurityGroups"] = [group]
        queue["Networking"].pop("AdditionalSecurityGroups", None)
    missing_egress = {group: described(group, inbound_self=True, outbound_self=False)}
    assert [str(p) for p in config_problems(config, security_groups=missing_egress)] == [
        "Scheduling.SlurmQueues[0].Networking.SecurityGroups: ['${Token[TOKEN.42]}'] has no group that allows "
        "all traffic in from and out to itself; EFA needs that self rule"
    ]
    complete = {group: described(group, inbound_self=True, outbound_self=True)}
    assert config_problems(config, security_groups=complete) == []
    assert [str(p) for p in config_problems(config, security_groups={})] == [
        "Scheduling.SlurmQueues[0].Networking.SecurityGroups: ['${Token[TOKEN.42]}'] names security groups with "
        "no description to check"
    ]


def test_managed_security_groups_need_no_description() -> None:
    # Only AdditionalSecurityGroups: ParallelCluster's managed compute group carries the self rule.
    spec = load_spec(ALL_SPECS[0])
    refs = replace(example_refs(spec), security_group_ids=(), additional_security_group_ids=("sg-1",))
    config = built(refs=refs)
    assert "SecurityGroups" not in config["Scheduling"]["SlurmQueues"][0]["Networking"]
    assert config_problems(config, security_groups={}) == []


def test_self_rule_needs_all_protocols() -> None:
    tcp_only = described("sg-1", True, True)
    tcp_only["IpPermissions"][0]["IpProtocol"] = "tcp"
    assert not allows_all_traffic_with_itself("sg-1", tcp_only)
    assert allows_all_traffic_with_itself("sg-1", described("sg-1", True, True))


def test_config_rule_subnet_az_matches_reservation_az() -> None:
    config = built(next(p for p in ALL_SPECS if p.name == "p4d-odcr.yaml"))
    subnet = config["Scheduling"]["SlurmQueues"][0]["Networking"]["SubnetIds"][0]
    reservation = {"cr-0a1b2c3d4e5f67890": "us-east-1a"}
    assert config_problems(config, subnet_azs={subnet: "us-east-1a"}, reservation_azs=reservation) == []
    assert [
        str(p) for p in config_problems(config, subnet_azs={subnet: "us-east-1c"}, reservation_azs=reservation)
    ] == [
        "Scheduling.SlurmQueues[0].Networking.SubnetIds[0]: 'subnet-0123456789abcdef0' is in us-east-1c, but "
        "capacity reservation cr-0a1b2c3d4e5f67890 is in us-east-1a"
    ]


def test_head_node_os_must_offer_the_python_its_bootstrap_asks_for() -> None:
    """The trn1 queue's custom AMI does not change the head node: on ubuntu2204 (Python 3.10, no dnf) the
    head node's bootstrap cannot get python3.11."""
    data = trn1_spec()
    data["cluster"]["os"] = "ubuntu2204"
    assert problems_of(data) == [
        "cluster.python_version: '3.11' is not available on the head node's OS ubuntu2204 (it offers no "
        "supported Python; a queue's custom AMI does not change the head node): use os alinux2023 or rhel9 or "
        "rocky9, or a cluster.custom_ami that has python3.11"
    ]
    data["cluster"]["custom_ami"] = "ami-0fedcba9876543210"  # a cluster-wide AMI does boot the head node
    assert parse(data).cluster is not None
    data = trn1_spec()
    data["cluster"].update(os="ubuntu2404", python_version="3.12")
    assert parse(data).cluster is not None


# ---------------------------------------------------------------- issue 35: which stack each accelerator runs


def test_trn1_refuses_a_neuron_release_after_the_last_one_with_nxdt() -> None:
    """trn1 trains with NxDT, and Neuron 2.28 is the last release that ships it (2.29 ends it, 2.30 maintenance)."""
    data = trn1_spec()
    data["cluster"]["neuron"]["sdk_version"] = "2.29.0"
    data["cluster"]["neuron"]["packages"] = {
        "aws-neuronx-dkms": "2.30.0.0",
        "aws-neuronx-runtime-lib": "2.34.0.0",
        "aws-neuronx-collectives": "2.34.0.0",
        "aws-neuronx-tools": "2.32.0.0",
        "torch-neuronx": "2.9.0.2.14.1",
        "neuronx-cc": "2.27.1.0",
    }
    assert problems_of(data) == [
        "cluster.neuron.sdk_version: '2.29.0' is newer than Neuron 2.28, the last release that ships NxD Training "
        "(NxDT), which trn1 queues train with (queue 'trn1'): Neuron moved training to native PyTorch "
        "(TorchNeuron) on trn2/trn3 only; keep trn1 on 2.28 or older"
    ]


def test_a_trn2_queue_is_a_valid_cluster() -> None:
    data = trn1_spec()
    queue0(data["cluster"]).update(name="trn2", instance_type="trn2.48xlarge")
    assert parse(data).cluster is not None


def blackwell_spec(instance_type: str, framework: str) -> dict[str, Any]:
    def edit(cluster: dict[str, Any]) -> None:
        queue0(cluster).update(name="b200", instance_type=instance_type)
        cluster["containers"] = {"nemo_framework": framework}

    return with_cluster(edit)


@pytest.mark.parametrize("instance_type", ["p6-b200.48xlarge", "p6-b300.48xlarge"])
@pytest.mark.parametrize("framework", ["megatron-bridge-26.08", "nemo-25.07"])
def test_both_nemo_containers_carry_a_cuda_with_blackwell_kernels(instance_type: str, framework: str) -> None:
    assert parse(blackwell_spec(instance_type, framework)).cluster is not None


def test_a_container_whose_cuda_predates_the_queues_gpu_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from spec.containers import FRAMEWORKS

    # A NeMo release on CUDA 12.6 (as nemo:24.12 was): no sm_100 kernels in its CUDA libraries.
    monkeypatch.setitem(FRAMEWORKS, "nemo-25.07", replace(FRAMEWORKS["nemo-25.07"], cuda=(12, 6)))
    assert problems_of(blackwell_spec("p6-b200.48xlarge", "nemo-25.07")) == [
        "cluster.containers.nemo_framework: 'nemo-25.07' carries CUDA 12.6, too old for queue 'b200' "
        "(p6-b200.48xlarge, B200, sm_100 needs CUDA 12.8 or newer); use megatron-bridge-26.08 (CUDA 13.0)"
    ]


def test_fsx_backups_only_on_persistent_file_systems() -> None:
    def scratch(cluster: dict[str, Any]) -> None:
        cluster["fsx"].update(
            deployment_type="SCRATCH_2", throughput_mb_per_tib=None, automatic_backup_retention_days=7
        )

    assert problems_of(with_cluster(scratch)) == [
        "cluster.fsx.automatic_backup_retention_days: 7 must be 0 or unset for SCRATCH_2: FSx backs up only "
        "PERSISTENT file systems"
    ]
    data = with_cluster(
        lambda c: c["fsx"].update(automatic_backup_retention_days=0, daily_automatic_backup_start_time="03:00")
    )
    assert problems_of(data) == [
        "cluster.fsx.daily_automatic_backup_start_time: '03:00' needs automatic backups "
        "(automatic_backup_retention_days above 0)"
    ]
    assert problems_of(with_cluster(lambda c: c["fsx"].update(automatic_backup_retention_days=91))) == [
        "cluster.fsx.automatic_backup_retention_days: 91 input should be less than or equal to 90"
    ]
    assert problems_of(with_cluster(lambda c: c["fsx"].update(daily_automatic_backup_start_time="3am"))) == [
        "cluster.fsx.daily_automatic_backup_start_time: '3am' must be a UTC time HH:MM such as 03:00"
    ]


def test_the_stop_save_must_fit_slurms_kill_wait_and_the_file_system() -> None:
    data = with_cluster(
        lambda c: (
            c["stop_save"].update(checkpoint_gb=1300)
            if "stop_save" in c
            else c.update(stop_save={"checkpoint_gb": 1300})
        )
    )
    assert problems_of(data) == [
        "cluster.stop_save.checkpoint_gb: 1300.0 does not fit cluster.fsx.storage_gib 1200: the prolog keeps one "
        "checkpoint's room free"
    ]

    # A step of 70,000 s (nothing real): the stop could never fit Slurm's KillWait.
    (line,) = problems_of(with_cluster(lambda c: c.update(stop_save={"step_s": 70_000})))
    assert line == (
        "cluster.stop_save.checkpoint_gb: 113.0 takes 70416 s to stop at 293 MB/s, past Slurm's KillWait limit of "
        "65533 s; raise cluster.fsx.throughput_mb_per_tib or storage_gib"
    )
    assert problems_of(with_cluster(lambda c: c.update(stop_save={"checkpoint_gb": 0}))) == [
        "cluster.stop_save.checkpoint_gb: 0 input should be greater than 0"
    ]
