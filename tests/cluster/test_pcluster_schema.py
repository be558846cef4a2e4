"""Every config the builder makes, checked by aws-parallelcluster 3.16.1's own schema (isolated venv)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cluster.config_builder import build_cluster_config, cluster_name, example_refs
from cluster.image_config import build_image_config
from cluster.verify.pcluster.runner import pcluster_python, schema_errors
from spec import load_spec, parse_spec
from tests.cluster.conftest import ALL_SPECS, spec_dict, with_cluster

pytestmark = pytest.mark.pcluster


def variant_configs() -> dict[str, dict[str, Any]]:
    """The shipped specs plus variants that switch on the optional keys."""
    specs = {path.stem: load_spec(path) for path in ALL_SPECS}
    nat = spec_dict(next(p for p in ALL_SPECS if p.name == "trn1-neuron.yaml"))
    nat["network"]["internet_egress"] = "nat"
    del nat["cluster"]["neuron"]["custom_ami"]
    specs["trn1-with-egress"] = parse_spec(nat)

    def extras(cluster: dict[str, Any]) -> None:
        cluster["ssh_key_name"] = "ops-key"
        cluster["custom_ami"] = "ami-0fedcba9876543210"
        cluster["fsx"] = {"file_system_id": "fs-0123456789abcdef0"}
        cluster["queues"][0].update(placement_group_name="llm-demo-pg", allocation_strategy="lowest-price")
        cluster["queues"].append(
            {"name": "a100", "instance_type": "p4de.24xlarge", "max_count": 2, "placement_group": False}
        )

    specs["ssh-ami-existing-fsx-two-queues"] = parse_spec(with_cluster(extras))

    def backups(cluster: dict[str, Any]) -> None:
        # Issue 42: FSx backups at a set hour, and a long stop (KillWait) on a slower file system.
        cluster["fsx"].update(automatic_backup_retention_days=35, daily_automatic_backup_start_time="02:30")
        cluster["fsx"].update(deployment_type="PERSISTENT_1", throughput_mb_per_tib=50)
        cluster["stop_save"] = {"checkpoint_gb": 980, "step_s": 60}

    specs["timed-backups-long-stop"] = parse_spec(with_cluster(backups))
    return {name: build_cluster_config(spec, example_refs(spec)) for name, spec in specs.items()}


def test_every_variant_passes_parallelclusters_schema(pcluster_venv: Path) -> None:
    configs = variant_configs()
    assert len(configs) == 9
    errors = schema_errors(configs)
    assert errors == dict.fromkeys(configs)


def test_the_schema_check_runs_without_a_network(pcluster_venv: Path) -> None:
    """In a network namespace with no interface (unshare -n; as root, else in a user namespace), every variant,
    reservations included (ParallelCluster prefetches them from EC2), validates with nothing logged: no AWS call
    was tried."""
    configs = variant_configs()
    assert any("CapacityReservationTarget" in json.dumps(config) for config in configs.values())
    request = [{"kind": "cluster", "name": name, "config": config} for name, config in configs.items()]
    unshare = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--net"]
    script = Path(__file__).resolve().parents[2] / "cluster" / "verify" / "pcluster" / "validate_config.py"
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}  # no AWS_* settings: the script brings its own
    done = subprocess.run(
        [*unshare, str(pcluster_python()), str(script)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert {item["name"]: item["errors"] for item in json.loads(done.stdout)} == dict.fromkeys(configs)


def test_offline_answers_the_reservation_prefetch_and_refuses_any_other_aws_call(pcluster_venv: Path) -> None:
    code = """
import boto3, offline
offline.refuse_aws_calls()
ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
print(ec2.describe_capacity_reservations(CapacityReservationIds=["cr-0123456789abcdef0"])["CapacityReservations"])
ec2.describe_instance_types(InstanceTypes=["p5.48xlarge"])
"""
    folder = Path(__file__).resolve().parents[2] / "cluster" / "verify" / "pcluster"
    done = subprocess.run(
        [str(pcluster_python()), "-c", code],
        cwd=folder,
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(folder)},
        timeout=120,
        check=False,
    )
    assert done.stdout == "[]\n"
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "offline.AwsCallRefused: ec2.DescribeInstanceTypes: an AWS call; ParallelCluster's checks here run offline "
        "(offline.py)"
    )


def test_kill_wait_and_fsx_backups_reach_parallelclusters_checks(pcluster_venv: Path) -> None:
    """The settings issue 42 adds are the ones ParallelCluster validates: KillWait is not on its CustomSlurmSettings
    deny list, and its FsxBackupOptionsValidator refuses backups on a SCRATCH file system."""
    configs = variant_configs()
    timed = configs["timed-backups-long-stop"]
    assert {"KillWait": 16_816} in timed["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"]  # 980 GB at 59 MB/s
    lustre = timed["SharedStorage"][0]["FsxLustreSettings"]
    assert (lustre["AutomaticBackupRetentionDays"], lustre["DailyAutomaticBackupStartTime"]) == (35, "02:30")
    scratch = json.loads(json.dumps(configs["default"]))
    scratch["SharedStorage"][0]["FsxLustreSettings"].update(DeploymentType="SCRATCH_2")
    del scratch["SharedStorage"][0]["FsxLustreSettings"]["PerUnitStorageThroughput"]
    errors = schema_errors({"scratch-with-backups": scratch})["scratch-with-backups"]
    assert errors == {
        "SharedStorage": {
            "0": [
                "FsxBackupOptionsValidator: FSx automatic backup features can be used only with ['PERSISTENT_1', "
                "'PERSISTENT_2'] file systems."
            ]
        }
    }


def test_the_schema_check_can_fail(pcluster_venv: Path) -> None:
    spec = load_spec()
    config = build_cluster_config(spec, example_refs(spec))
    config["HeadNode"]["Imds"]["Secure"] = True  # misspelled key
    config["Scheduling"]["SlurmQueues"][0]["CapacityType"] = "RESERVED"
    config["SharedStorage"][0]["FsxLustreSettings"]["DeploymentType"] = "PERSISTENT_3"
    errors = schema_errors({cluster_name(spec): config})[cluster_name(spec)]
    assert errors["HeadNode"]["Imds"] == {"Secure": ["Unknown field."]}
    assert errors["Scheduling"]["SlurmQueues"]["0"]["CapacityType"] == [
        "Must be one of: CAPACITY_BLOCK, ONDEMAND, SPOT."
    ]
    assert "DeploymentType" in errors["SharedStorage"]["0"]["FsxLustreSettings"]


def test_neuron_image_config_passes_the_image_builder_schema(pcluster_venv: Path) -> None:
    spec = load_spec(next(p for p in ALL_SPECS if p.name == "trn1-neuron.yaml"))
    config = build_image_config(spec, parent_image="ami-0123456789abcdef0", component_uri="s3://bucket/neuron.sh")
    assert schema_errors({"neuron-image": config}, kind="image") == {"neuron-image": None}
    config["Build"]["Components"][0]["Type"] = "ansible"
    assert schema_errors({"neuron-image": config}, kind="image")["neuron-image"] is not None


ACCOUNTING = {
    "enabled": True,
    "qos": [{"name": "small", "max_gpus_per_user": 8}],
    "teams": [{"name": "research", "members": ["alice"], "qos": ["small"]}],
}


def accounting_config(**section: Any) -> dict[str, Any]:
    def edit(cluster: dict[str, Any]) -> None:
        # ACCOUNTING's member is no user of the default spec's cluster.users: accounting alone here
        cluster.update(accounting={**ACCOUNTING, **section}, users=[], groups=[])

    spec = parse_spec(with_cluster(edit))
    return build_cluster_config(spec, example_refs(spec))


def test_accounting_database_and_slurm_settings_pass_the_schema_and_the_deny_list(pcluster_venv: Path) -> None:
    configs = {
        "aurora": accounting_config(),
        "rds-basic-priority": accounting_config(
            database={"engine": "rds-mysql"}, fair_share={"enabled": False}, enforce=False
        ),
    }
    settings = configs["aurora"]["Scheduling"]["SlurmSettings"]
    assert settings["Database"]["Uri"].endswith(":3306")
    assert settings["Database"]["UserName"] == "slurm_admin"
    assert settings["Database"]["DatabaseName"] == "slurm_acct_db"
    assert settings["Database"]["PasswordSecretArn"].startswith("arn:aws:secretsmanager:")
    assert {"PriorityType": "priority/multifactor"} in settings["CustomSlurmSettings"]
    assert schema_errors(configs) == dict.fromkeys(configs)


def test_the_deny_list_check_runs_parallelclusters_own_validators(pcluster_venv: Path) -> None:
    config = accounting_config()
    settings = config["Scheduling"]["SlurmSettings"]
    settings["CustomSlurmSettings"] += [{"JobAcctGatherType": "jobacct_gather/none"}, {"SlurmctldHost": "x"}]
    settings["Database"]["Uri"] = "mysql://db.example.com:3306"
    errors = schema_errors({"denied": config})["denied"]
    assert errors == {
        "Scheduling": {
            "SlurmSettings": [
                "CustomSlurmSettingsValidator: Using the following custom Slurm settings at SlurmConf level is not "
                "allowed: SlurmctldHost",
                "CustomSlurmSettingsValidator: Using the following custom Slurm settings at SlurmConf level is not "
                "allowed: JobAcctGatherType",
                "DatabaseUriValidator: Invalid URI specified. Please do not provide a scheme ('mysql://')",
            ]
        }
    }


def _with_queue_type(path_name: str, instance_type: str) -> dict[str, Any]:
    def edit(cluster: dict[str, Any]) -> None:
        cluster["queues"][0]["instance_type"] = instance_type

    spec = parse_spec(with_cluster(edit, next(p for p in ALL_SPECS if p.name == path_name)))
    return build_cluster_config(spec, example_refs(spec))


def test_parallelcluster_accepts_blackwell_and_trn2_queues(pcluster_venv: Path) -> None:
    """Issue 35: ParallelCluster 3.16.1's schema and its offline instance-type/OS check accept each new queue type
    (its own code names p6-b300: card 0 ENA only, every OS supported; p6-b200 and trn2 need no special case)."""
    configs = {
        "p6-b200": _with_queue_type("default.yaml", "p6-b200.48xlarge"),
        "p6-b300": _with_queue_type("default.yaml", "p6-b300.48xlarge"),
        "trn2": _with_queue_type("trn1-neuron.yaml", "trn2.48xlarge"),
    }
    for config in configs.values():
        (queue,) = config["Scheduling"]["SlurmQueues"]
        (resource,) = queue["ComputeResources"]
        assert resource["Efa"] == {"Enabled": True}  # ParallelCluster puts EFA on every card that has it
    assert schema_errors(configs) == dict.fromkeys(configs)


def test_parallelclusters_instance_type_os_check_runs_and_can_refuse(pcluster_venv: Path) -> None:
    """The same check refuses what ParallelCluster 3.16.1 refuses: p6e-gb200 on RHEL 9 (out of scope here)."""
    config = _with_queue_type("default.yaml", "p6-b200.48xlarge")
    config["Image"]["Os"] = "rhel9"
    config["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["InstanceType"] = "p6e-gb200.36xlarge"
    errors = schema_errors({"gb200": config})["gb200"]
    assert errors is not None
    (message,) = errors["Scheduling"]["SlurmQueues"]
    assert message.startswith("InstanceTypeOSCompatibleValidator: The instance type p6e-gb200.36xlarge is not")
