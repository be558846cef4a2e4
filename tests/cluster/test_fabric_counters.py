"""The EFA counter sampler (bash, from lib.sh) on fixture sysfs trees, and the differences read from its files."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from cluster.fabric.counters import ERROR_COUNTERS, RETRANSMIT_COUNTERS, SampleError, diff, read_sample, read_samples

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "cluster" / "fabric" / "lib.sh"

# What the EFA driver exposes (drivers/infiniband/hw/efa): port 1's counters and the device's own.
PORT_COUNTERS = (
    "tx_bytes", "tx_pkts", "rx_bytes", "rx_pkts", "rx_drops", "send_bytes", "send_wrs", "recv_bytes", "recv_wrs",
    "rdma_read_wrs", "rdma_read_bytes", "rdma_read_wr_err", "rdma_read_resp_bytes", "rdma_write_wrs",
    "rdma_write_bytes", "rdma_write_wr_err", "rdma_write_recv_bytes", "retrans_bytes", "retrans_pkts",
    "retrans_timeout_events", "unresponsive_remote_events", "impaired_remote_conn_events",
)  # fmt: skip
DEVICE_COUNTERS = (
    "submitted_cmds", "completed_cmds", "cmds_err", "no_completion_cmds", "keep_alive_rcvd", "alloc_pd_err",
    "create_qp_err", "create_cq_err", "reg_mr_err", "alloc_ucontext_err", "create_ah_err", "mmap_err", "lifespan",
)  # fmt: skip


@contextmanager
def memory_scratch(fallback: Path) -> Iterator[Path]:
    """Scratch space in memory (/dev/shm) where the host has it: a p5 node's tree is over a thousand small files."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield fallback
        return
    directory = Path(tempfile.mkdtemp(prefix="fabric-test-", dir=shm))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def device_names(count: int) -> list[str]:
    return [f"rdmap{16 + index}s0" for index in range(count)]


def efa_tree(sysfs: Path, devices: int, value: int = 1000) -> Path:
    """A node's /sys with `devices` EFA devices, every counter at `value`."""
    for name in device_names(devices):
        device = f"{sysfs}/class/infiniband/{name}"
        os.makedirs(f"{device}/ports/1/hw_counters")
        os.makedirs(f"{device}/hw_counters")
        files = [f"{device}/ports/1/hw_counters/{counter}" for counter in PORT_COUNTERS]
        files += [f"{device}/hw_counters/{counter}" for counter in DEVICE_COUNTERS]
        for file in files:  # plain open(): a p5 node is 32 devices of 35 files
            with open(file, "w") as out:
                out.write(f"{value}\n")
        with open(f"{device}/ports/1/state", "w") as out:
            out.write("4: ACTIVE\n")
    return sysfs


def bump(sysfs: Path, counter: str, amount: int, devices: list[str] | None = None) -> None:
    """Adds `amount` to `counter` on the named devices (default: all), as traffic or an error would."""
    for device in sorted((sysfs / "class" / "infiniband").iterdir()):
        if devices is not None and device.name not in devices:
            continue
        level = "hw_counters" if counter in DEVICE_COUNTERS else "ports/1/hw_counters"
        file = device / level / counter
        file.write_text(f"{int(file.read_text()) + amount}\n")


def sample_nodes(trees: Mapping[str, Path], directory: Path) -> Path:
    """Runs lib.sh's fabric_sample_counters (the code each node of the job runs) on fixture trees: DIR/<node>.txt."""
    directory.mkdir(parents=True, exist_ok=True)
    script = f'RESULT_ROOT=/unused; source "{LIB}"; while (($#)); do fabric_sample_counters "$1" "$2"; shift 2; done'
    pairs = [str(item) for node, tree in trees.items() for item in (tree, directory / f"{node}.txt")]
    result = subprocess.run(["bash", "-c", script, "sample", *pairs], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return directory


def sample(sysfs: Path, dest: Path) -> Path:
    sample_nodes({dest.stem: sysfs}, dest.parent)
    return dest


def test_the_sampler_writes_every_port_and_device_counter_of_every_device(tmp_path: Path) -> None:
    sysfs = efa_tree(tmp_path / "sys", devices=4, value=7)
    dest = sample(sysfs, tmp_path / "before" / "n1.txt")
    lines = dest.read_text().splitlines()
    assert lines[0] == f"# sysfs {sysfs}"
    assert "rdmap16s0 ports/1/hw_counters/tx_bytes 7" in lines
    assert "rdmap19s0 hw_counters/reg_mr_err 7" in lines
    assert len(lines) == 1 + 4 * (len(PORT_COUNTERS) + len(DEVICE_COUNTERS))
    assert not dest.with_name("n1.txt.tmp").exists()

    node = read_sample(dest)
    assert (node.node, node.sysfs_root) == ("n1", str(sysfs))
    assert sorted(node.devices) == device_names(4)
    assert node.devices["rdmap17s0"]["tx_bytes"] == 7 and node.devices["rdmap17s0"]["cmds_err"] == 7


def test_a_node_without_efa_devices_gives_an_empty_sample(tmp_path: Path) -> None:
    (tmp_path / "sys").mkdir()
    node = read_sample(sample(tmp_path / "sys", tmp_path / "n2.txt"))
    assert node.devices == {} and node.sysfs_root == str(tmp_path / "sys")


def test_differences_total_traffic_and_find_idle_devices_and_grown_errors(tmp_path: Path) -> None:
    sysfs = efa_tree(tmp_path / "sys", devices=4)
    before = read_sample(sample(sysfs, tmp_path / "before" / "n1.txt"))
    busy = device_names(4)[:3]
    bump(sysfs, "tx_bytes", 5 << 30, busy)
    bump(sysfs, "rx_bytes", 4 << 30, busy)
    bump(sysfs, "retrans_pkts", 12, ["rdmap16s0"])
    bump(sysfs, "unresponsive_remote_events", 2, ["rdmap18s0"])
    bump(sysfs, "reg_mr_err", 1, ["rdmap17s0"])
    after = read_sample(sample(sysfs, tmp_path / "after" / "n1.txt"))

    delta = diff(before, after)
    assert delta.tx_bytes == 3 * (5 << 30) and delta.rx_bytes == 3 * (4 << 30)
    assert delta.idle_devices() == ["rdmap19s0"]
    assert delta.grown(ERROR_COUNTERS) == [
        ("rdmap17s0", "reg_mr_err", 1),
        ("rdmap18s0", "unresponsive_remote_events", 2),
    ]
    assert delta.grown(RETRANSMIT_COUNTERS) == [("rdmap16s0", "retrans_pkts", 12)]
    assert delta.backwards == () and delta.vanished == () and delta.appeared == ()


def test_counters_that_went_backwards_and_devices_that_vanished_are_reported(tmp_path: Path) -> None:
    sysfs = efa_tree(tmp_path / "sys", devices=3)
    before = read_sample(sample(sysfs, tmp_path / "before" / "n1.txt"))
    (sysfs / "class/infiniband/rdmap16s0/ports/1/hw_counters/tx_bytes").write_text("3\n")  # the driver reloaded
    for file in (sysfs / "class/infiniband/rdmap18s0").rglob("*"):
        if file.is_file():
            file.unlink()
    after = read_sample(sample(sysfs, tmp_path / "after" / "n1.txt"))
    delta = diff(before, after)
    assert delta.backwards == ("rdmap16s0 tx_bytes",)
    assert delta.devices["rdmap16s0"]["tx_bytes"] == 0  # no negative traffic
    assert delta.vanished == ("rdmap18s0",)


def test_samples_are_read_per_node_and_malformed_lines_name_file_and_line(tmp_path: Path) -> None:
    for node in ("n1", "n2"):
        sample(efa_tree(tmp_path / node, devices=2), tmp_path / "before" / f"{node}.txt")
    assert sorted(read_samples(tmp_path / "before")) == ["n1", "n2"]

    bad = tmp_path / "bad" / "n3.txt"
    bad.parent.mkdir()
    bad.write_text("# sysfs /sys\nrdmap0s0 ports/1/hw_counters/tx_bytes 12\nrdmap0s0 tx_bytes\n")
    with pytest.raises(SampleError) as error:
        read_samples(bad.parent)
    assert str(error.value) == f"{bad}:3: 'rdmap0s0 tx_bytes' is not '<device> <counter path> <value>'"


def test_reading_sysfs_directly_gives_what_the_bash_sampler_writes(tmp_path: Path) -> None:
    """The EFA exporter's read (read_sysfs) and the fabric check's sampler agree counter for counter."""
    from cluster.fabric.counters import read_sysfs

    sysfs = efa_tree(tmp_path / "sys", devices=3, value=5)
    bump(sysfs, "reg_mr_err", 2, ["rdmap17s0"])
    bump(sysfs, "tx_bytes", 1 << 40)
    sampled = read_sample(sample(sysfs, tmp_path / "n1.txt"))
    direct = read_sysfs(sysfs, "n1")
    assert direct.devices == sampled.devices and direct.devices["rdmap17s0"]["reg_mr_err"] == 7
    assert read_sysfs(tmp_path / "empty").devices == {}
