"""The SLURM prolog/epilog health checks, run as real bash against fixture trees (sysfs, /dev, fake tools)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cluster.health.facts import HealthSettings, main
from cluster.verify.local_slurm.install import ensure_shellcheck
from spec.platform.instances import instance_facts

REPO = Path(__file__).resolve().parents[2]
HEALTH = REPO / "cluster" / "health"
STRANGER_UID = 64999  # no account uses it: processes and files with it are this test's own

FAKE_NVIDIA_SMI = """#!/bin/bash
# Answers the two queries the checks make, from FAKE_GPUS and FAKE_ECC ("index:count,...").
[[ -n "${FAKE_HANG:-}" ]] && sleep 30
for arg in "$@"; do
  case "$arg" in
    --query-gpu=index) for ((i = 0; i < FAKE_GPUS; i++)); do echo "$i"; done ;;
    --query-gpu=index,ecc.errors.uncorrected.volatile.total)
      for ((i = 0; i < FAKE_GPUS; i++)); do
        n=0
        for pair in ${FAKE_ECC//,/ }; do [[ "${pair%%:*}" == "$i" ]] && n="${pair##*:}"; done
        echo "$i, $n"
      done ;;
  esac
done
"""

FAKE_NEURON_LS = """#!/bin/bash
# neuron-ls --json-output: one object per device.
printf '['
for ((i = 0; i < FAKE_NEURON; i++)); do
  ((i)) && printf ','
  printf '{"neuron_device": %d, "bdf": "10:1c.0", "nc_count": 2, "memory_size": 34359738368}' "$i"
done
printf ']\\n'
"""

RECORDER = """#!/bin/bash
printf '%s\\n' "$*" >> "$RECORD_FILE"
[[ "$1" == show ]] && printf '%s\\n' "${FAKE_NODE_SHOW:-}"
exit 0
"""


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


class Node:
    """A fixture node: sysfs and /dev trees, fake tools, and the environment that points the checks at them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sysfs = root / "sys"
        self.dev = root / "dev"
        self.fsx = root / "fsx"
        self.scratch = root / "scratch"
        for directory in (self.sysfs, self.dev / "shm", self.fsx, self.scratch):
            directory.mkdir(parents=True)
        self.record = root / "scontrol.log"
        self.env: dict[str, str] = {
            "PATH": os.environ["PATH"],
            "HEALTH_CONFIG": str(root / "none.env"),
            "HEALTH_SYSFS_ROOT": str(self.sysfs),
            "HEALTH_DEV_ROOT": str(self.dev),
            "HEALTH_FSX_PATH": str(self.fsx),
            "HEALTH_MIN_FSX_FREE_GIB": "0",
            "HEALTH_SCRATCH_PATH": str(self.scratch),
            "HEALTH_MIN_SCRATCH_FREE_GIB": "0",
            "HEALTH_TIMEOUT_S": "2",
            "NVIDIA_SMI": "",
            "NEURON_LS": "",
            "SCONTROL": str(_script(root / "scontrol", RECORDER)),
            "SQUEUE": str(_script(root / "squeue", "#!/bin/bash\nprintf '%s' \"${FAKE_SQUEUE:-}\"\n")),
            "RECORD_FILE": str(self.record),
            "SLURMD_NODENAME": "p5-st-1",
            "SLURM_JOB_ID": "77",
        }

    def gpus(self, count: int, expected: int | None = None, ecc: str = "") -> None:
        self.env["NVIDIA_SMI"] = str(_script(self.root / "nvidia-smi", FAKE_NVIDIA_SMI))
        self.env.update(FAKE_GPUS=str(count), FAKE_ECC=ecc, HEALTH_EXPECTED_GPUS=str(expected or count))

    def neuron_devices(self, count: int, expected: int | None = None, use_neuron_ls: bool = False) -> None:
        for index in range(count):
            (self.dev / f"neuron{index}").touch()
            (self.sysfs / "devices" / "virtual" / "neuron_device" / f"neuron{index}" / "stats" / "hardware").mkdir(
                parents=True
            )
        if use_neuron_ls:
            self.env["NEURON_LS"] = str(_script(self.root / "neuron-ls", FAKE_NEURON_LS))
            self.env["FAKE_NEURON"] = str(count)
        self.env["HEALTH_EXPECTED_NEURON"] = str(expected or count)

    def efa(self, count: int, expected: int | None = None, down: tuple[int, ...] = ()) -> None:
        for index in range(count):
            port = self.sysfs / "class" / "infiniband" / f"rdmap{index}s0" / "ports" / "1"
            port.mkdir(parents=True)
            (port / "state").write_text("1: DOWN\n" if index in down else "4: ACTIVE\n")
        self.env["HEALTH_EXPECTED_EFA"] = str(expected or count)

    def run(self, stage: str = "prolog", **extra_env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(HEALTH / f"{stage}.sh")],
            env={**self.env, **extra_env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def drain_calls(self) -> list[str]:
        calls = self.record.read_text().splitlines() if self.record.exists() else []
        return [call for call in calls if call.startswith("update ")]


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def _assert_fails(node: Node, message: str, stage: str = "prolog") -> None:
    result = node.run(stage)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"FAIL {message}" in result.stdout
    calls = node.drain_calls()
    assert len(calls) == 1
    assert calls[0].startswith(f"update nodename=p5-st-1 state=drain reason=health-{stage}: ")
    assert message in calls[0]


def test_scripts_are_shellcheck_clean() -> None:
    shellcheck = ensure_shellcheck()
    result = subprocess.run(
        [shellcheck, "-x", "lib.sh", "prolog.sh", "epilog.sh"], cwd=HEALTH, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_healthy_gpu_node_passes_without_draining(node: Node) -> None:
    node.gpus(8)
    node.efa(32)
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert "ok   gpu count 8 (nvidia-smi)" in result.stdout
    assert "ok   gpu ecc: no uncorrected errors" in result.stdout
    assert "ok   efa count 32" in result.stdout
    assert node.drain_calls() == []


def test_healthy_neuron_node_passes(node: Node) -> None:
    node.neuron_devices(16, use_neuron_ls=True)
    node.efa(8)
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert "ok   neuron device count 16 (neuron-ls)" in result.stdout
    assert "ok   neuron ecc: no uncorrected errors" in result.stdout


def test_missing_gpu_drains_the_node(node: Node) -> None:
    node.gpus(7, expected=8)
    _assert_fails(node, "gpu count 7, expected 8 (nvidia-smi)")


def test_gpu_count_falls_back_to_device_files(node: Node) -> None:
    for index in range(3):
        (node.dev / f"nvidia{index}").touch()
    (node.dev / "nvidiactl").touch()  # the control device is not a GPU
    node.env["HEALTH_EXPECTED_GPUS"] = "4"
    _assert_fails(node, f"gpu count 3, expected 4 ({node.dev}/nvidia*)")


def test_uncorrected_ecc_errors_drain_the_node(node: Node) -> None:
    node.gpus(8, ecc="3:2")
    _assert_fails(node, "gpu 3: 2 uncorrected ECC errors (volatile)")


def test_a_hung_nvidia_smi_fails_instead_of_blocking(node: Node) -> None:
    node.gpus(8)
    node.env["FAKE_HANG"] = "1"
    _assert_fails(node, f"gpu: {node.env['NVIDIA_SMI']} failed or hung")


def test_missing_neuron_device_drains_the_node(node: Node) -> None:
    node.neuron_devices(15, expected=16)
    _assert_fails(node, f"neuron device count 15, expected 16 ({node.dev}/neuron*)")


def test_neuron_ecc_counter_drains_the_node(node: Node) -> None:
    node.neuron_devices(16)
    counter = node.sysfs / "devices/virtual/neuron_device/neuron5/stats/hardware/mem_ecc_uncorrected"
    counter.mkdir()
    (counter / "total").write_text("4\n")
    _assert_fails(node, "neuron5: 4 mem ecc uncorrected errors")


def test_missing_efa_interface_drains_the_node(node: Node) -> None:
    node.efa(31, expected=32)
    _assert_fails(node, "efa count 31, expected 32")


def test_efa_port_down_drains_the_node(node: Node) -> None:
    node.efa(8, down=(2,))
    _assert_fails(node, "efa port not ACTIVE on rdmap2s0")


def test_unmounted_fsx_drains_the_node(node: Node) -> None:
    node.fsx.rmdir()
    _assert_fails(node, f"fsx: {node.fsx} is missing (not mounted?)")


def test_full_scratch_drains_the_node(node: Node) -> None:
    node.env["HEALTH_MIN_SCRATCH_FREE_GIB"] = str(10**9)
    result = node.run()
    assert result.returncode == 1
    assert f"FAIL scratch: {node.scratch} has " in result.stdout
    assert f"below {10**9} GiB" in node.drain_calls()[0]


def test_every_failure_is_in_the_drain_reason(node: Node) -> None:
    node.gpus(6, expected=8)
    node.efa(3, expected=4)
    result = node.run()
    assert result.returncode == 1
    (call,) = node.drain_calls()
    assert "gpu count 6, expected 8" in call and "efa count 3, expected 4" in call


def test_settings_file_is_read_last_line_wins_and_environment_wins(node: Node) -> None:
    config = node.root / "health.env"
    config.write_text("# rendered\nHEALTH_EXPECTED_GPUS=2\nHEALTH_EXPECTED_EFA='4'\nHEALTH_EXPECTED_GPUS=8\n")
    node.gpus(8)
    node.efa(4)
    del node.env["HEALTH_EXPECTED_GPUS"], node.env["HEALTH_EXPECTED_EFA"]
    node.env["HEALTH_CONFIG"] = str(config)
    assert node.run().returncode == 0
    node.env["HEALTH_EXPECTED_EFA"] = "5"  # the environment overrides the file
    _assert_fails(node, "efa count 4, expected 5")


def test_a_bad_setting_is_a_failure_naming_it(node: Node) -> None:
    node.env["HEALTH_EXPECTED_GPUS"] = "eight"
    _assert_fails(node, "config: HEALTH_EXPECTED_GPUS=eight is not a non-negative integer")


def test_report_only_mode_does_not_drain(node: Node) -> None:
    node.gpus(7, expected=8)
    result = node.run(HEALTH_DRAIN="0")
    assert result.returncode == 1
    assert "not drained" in result.stdout
    assert node.drain_calls() == []


def test_prolog_makes_a_job_scratch_dir_and_epilog_removes_it(node: Node) -> None:
    assert node.run("prolog").returncode == 0
    job_dir = node.scratch / "slurm-77"
    assert job_dir.is_dir() and (job_dir.stat().st_mode & 0o777) == 0o700
    (job_dir / "partial.bin").write_bytes(b"x")
    result = node.run("epilog")
    assert result.returncode == 0, result.stdout
    assert not job_dir.exists()


def _stranger_files(node: Node) -> tuple[Path, Path]:
    mine = node.dev / "shm" / "nccl-abc"
    mine.write_bytes(b"x")
    os.chown(mine, STRANGER_UID, STRANGER_UID)
    system = node.dev / "shm" / "sem.system"
    system.write_bytes(b"x")
    return mine, system


def test_epilog_removes_the_job_users_shared_memory(node: Node) -> None:
    mine, system = _stranger_files(node)
    result = node.run("epilog", SLURM_JOB_UID=str(STRANGER_UID), SLURM_JOB_USER="stranger")
    assert result.returncode == 0, result.stdout
    assert not mine.exists() and system.exists()
    assert "removed 1 shared-memory entries" in result.stdout


def test_epilog_keeps_shared_memory_while_the_user_has_another_job_here(node: Node) -> None:
    mine, _ = _stranger_files(node)
    result = node.run("epilog", SLURM_JOB_UID=str(STRANGER_UID), SLURM_JOB_USER="stranger", FAKE_SQUEUE="77\n78\n")
    assert result.returncode == 0
    assert mine.exists()


def test_epilog_kills_the_job_users_leftover_processes(node: Node) -> None:
    leftover = subprocess.Popen(
        ["setpriv", f"--reuid={STRANGER_UID}", f"--regid={STRANGER_UID}", "--clear-groups", "sleep", "60"]
    )
    try:
        result = node.run("epilog", SLURM_JOB_UID=str(STRANGER_UID), SLURM_JOB_USER="stranger", HEALTH_KILL_STRAY="1")
        assert result.returncode == 0, result.stdout
        assert leftover.wait(timeout=10) == -9
    finally:
        leftover.kill()


def test_epilog_never_touches_root(node: Node) -> None:
    root_file = node.dev / "shm" / "root-owned"
    root_file.write_bytes(b"x")
    result = node.run("epilog", SLURM_JOB_UID="0", SLURM_JOB_USER="root", HEALTH_KILL_STRAY="1")
    assert result.returncode == 0
    assert root_file.exists()


def test_epilog_keeps_the_reason_of_a_failed_prolog(node: Node) -> None:
    node.gpus(7, expected=8)
    node.env["FAKE_NODE_SHOW"] = (
        "NodeName=p5-st-1 Arch=x86_64\n   State=IDLE+DRAIN ThreadsPerCore=1\n"
        "   Reason=health-prolog: gpu count 7, expected 8 [root@2026-01-01T00:00:00]"
    )
    result = node.run("epilog")
    assert result.returncode == 1
    assert "already drained: health-prolog: gpu count 7, expected 8" in result.stdout
    assert node.drain_calls() == []


def test_epilog_drains_a_node_that_broke_during_the_job(node: Node) -> None:
    node.gpus(7, expected=8)
    _assert_fails(node, "gpu count 7, expected 8 (nvidia-smi)", stage="epilog")


@pytest.mark.parametrize(
    ("instance_type", "gpus", "neuron", "efa"),
    [
        ("p5.48xlarge", 8, 0, 32),
        ("p4d.24xlarge", 8, 0, 4),
        ("trn1.32xlarge", 0, 16, 8),
        ("m6i.2xlarge", 0, 0, 0),
        ("p6-b200.48xlarge", 8, 0, 8),
        ("p6-b300.48xlarge", 8, 0, 16),  # card 0 is ENA only: 16 EFA devices on 17 cards
        ("trn2.48xlarge", 0, 16, 16),
    ],
)
def test_settings_follow_the_instance_facts(instance_type: str, gpus: int, neuron: int, efa: int) -> None:
    settings = HealthSettings.for_instance(instance_facts(instance_type))
    assert (settings.expected_gpus, settings.expected_neuron, settings.expected_efa) == (gpus, neuron, efa)
    assert f"HEALTH_EXPECTED_EFA={efa}\n" in settings.render()


def test_rendered_settings_drive_the_prolog(node: Node, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--instance-type", "trn1.32xlarge", "--fsx-path", str(node.fsx), "--scratch-path", ""]) == 0
    config = node.root / "health.env"
    config.write_text(capsys.readouterr().out)
    node.env = {k: v for k, v in node.env.items() if not k.startswith("HEALTH_") or k.endswith("_ROOT")}
    node.env.update(HEALTH_CONFIG=str(config), HEALTH_MIN_FSX_FREE_GIB="0")
    node.neuron_devices(16)
    node.efa(7, expected=8)
    del node.env["HEALTH_EXPECTED_NEURON"], node.env["HEALTH_EXPECTED_EFA"]
    _assert_fails(node, "efa count 7, expected 8")


def test_unknown_instance_type_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--instance-type", "p9.huge"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --instance-type: instance type 'p9.huge' is not in the facts table")
    assert err.count("\n") == 1
