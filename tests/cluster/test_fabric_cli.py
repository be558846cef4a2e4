"""`python -m cluster.fabric render|check`: the rendered scripts (bash -n, shellcheck, content), the check's exit
codes on fixture runs, and the one-line errors for bad arguments."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cluster.fabric.cli import main
from cluster.verify.local_slurm.install import ensure_shellcheck
from tests.cluster.conftest import with_cluster
from tests.cluster.test_fabric_counters import bump, efa_tree, memory_scratch, sample_nodes
from tests.cluster.test_fabric_parsers import FIXTURES

REPO = Path(__file__).resolve().parents[2]
TRN1_SPEC = REPO / "spec" / "examples" / "trn1-neuron.yaml"
GIB = 1 << 30


@pytest.fixture(autouse=True)
def _no_deployed_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLM_TRAINING_SPEC", raising=False)


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    with memory_scratch(tmp_path) as directory:
        yield directory


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def clean_bash(script: Path) -> None:
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    result = subprocess.run([ensure_shellcheck(), str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_gpu_script_runs_nccl_tests_with_the_efa_env(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run_main(["render", "--queue", "gpu", "--nodes", "2", "--dry-run"], capsys)
    assert code == 0
    script = tmp_path / "gpu.sbatch"
    script.write_text(out)
    clean_bash(script)
    lines = out.splitlines()
    for line in (
        "#SBATCH --job-name=fabric-nccl-gpu",
        "#SBATCH --partition=gpu",
        "#SBATCH --nodes=2",
        "#SBATCH --exclusive",
        "#SBATCH --output=/fsx/fabric-checks/logs/%x-%j.out",
        "#SBATCH --no-requeue",
        "CHECK_TOOL=all_reduce_perf",
        "INSTANCE_TYPE=p5.48xlarge",
        "RESULT_ROOT=/fsx/fabric-checks",
        f"PYTHON={sys.executable}",
        "GPUS_PER_NODE=8",
        "SRUN_MPI=pmix",
        "TEST_ARGS=(-b 8 -e 16G -f 2 -g 1)",
        "export FI_PROVIDER=efa",
        "export FI_EFA_USE_HUGE_PAGE=0",
        "export NCCL_SOCKET_IFNAME='^docker,lo,veth'",
        "export NCCL_BUFFSIZE=8388608",
        "export NCCL_P2P_NET_CHUNKSIZE=524288",
        "export NCCL_DEBUG=INFO",
        "export NCCL_NET='AWS Libfabric'",  # no silent fallback to sockets
        ': "${NCCL_TESTS_DIR:=/opt/nccl-tests/build}" "${OFI_NCCL_DIR:=/opt/amazon/ofi-nccl}" "${NCCL_LIB_DIR:=}"',
        'export LD_LIBRARY_PATH="${NCCL_LIB_DIR:+$NCCL_LIB_DIR:}$OFI_NCCL_DIR/lib:/opt/amazon/efa/lib:'
        '/opt/amazon/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"',
        ': "${FABRIC_SYSFS_ROOT:=/sys}"',
    ):
        assert line in lines, line
    assert "export FI_EFA_USE_DEVICE_RDMA=1" not in lines  # libfabric >= 1.18 needs no such setting
    assert "ntasks-per-node" not in out.split("# ---- settings ----")[0]  # srun places one rank per GPU


def test_trn1_script_runs_nccom_test_with_the_neuron_env(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["render", "--queue", "trn1", "--nodes", "4", "--spec", str(TRN1_SPEC), "--output", str(tmp_path / "out"),
            "--min-fraction", "0.5", "--time", "00:30:00", "--dry-run"]  # fmt: skip
    code, out, _ = run_main(argv, capsys)
    assert code == 0
    script = tmp_path / "trn1.sbatch"
    script.write_text(out)
    clean_bash(script)
    lines = out.splitlines()
    for line in (
        "#SBATCH --job-name=fabric-nccom-trn1",
        "#SBATCH --nodes=4",
        "#SBATCH --time=00:30:00",
        f"#SBATCH --output={tmp_path}/out/logs/%x-%j.out",
        "CHECK_TOOL=nccom-test",
        "INSTANCE_TYPE=trn1.32xlarge",
        "MIN_FRACTION=0.5",
        "WORKERS_PER_NODE=32",
        "NCCOM_ARGS=(-b 8 -e 4GB -f 2 -n 20 -w 5 -d fp32 --check --non-interactive)",
        "NCCOM_ITERS=20",
        "export FI_PROVIDER=efa",
        "export FI_EFA_USE_DEVICE_RDMA=1",
        "export FI_EFA_FORK_SAFE=1",
        "export NEURON_RT_STOCHASTIC_ROUNDING_EN=1",
        "export NEURON_COMPILE_CACHE_URL=/fsx/neuron-cache",
        ': "${NEURON_BIN_DIR:=/opt/aws/neuron/bin}"',
    ):
        assert line in lines, line
    assert not (tmp_path / "out").exists()  # --dry-run writes nothing


def _spec_file(tmp_path: Path, edit: object) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(with_cluster(edit)))  # type: ignore[arg-type]
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--queue", "gpu", "--nodes", "0"], "--nodes: 0 must be at least 2 (the check measures traffic between nodes over EFA)"),
        (["--queue", "gpu", "--nodes", "3"], "--nodes: 3 is more than queue 'gpu' can start (max_count 2)"),
        (["--queue", "cpu", "--nodes", "2"], "--queue: no queue named 'cpu' (known: gpu)"),
        (["--queue", "gpu", "--nodes", "2", "--mpi", "openmpi"], "--mpi: 'openmpi' is not one of pmix, pmi2"),
        (["--queue", "gpu", "--nodes", "2", "--time", "90"], "--time: '90' is not [D-]HH:MM:SS"),
        (["--queue", "gpu", "--nodes", "2", "--min-fraction", "70"], "--min-fraction: 70.0 must be above 0 and at most 1"),
        (["--queue", "gpu", "--nodes", "2", "--nccl-debug", "LOUD"], "--nccl-debug: 'LOUD' is not one of VERSION, WARN, INFO, TRACE"),
        (["--queue", "gpu", "--nodes", "2", "--sbatch-arg", "account=ml"], "--sbatch-arg: 'account=ml' is not an sbatch option (write --sbatch-arg=--account=NAME)"),
        (["--queue", "gpu", "--nodes", "2", "--spec", "missing.yaml"], None),
    ],
)  # fmt: skip
def test_render_errors_are_one_line(argv: list[str], message: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["render", *argv, "--dry-run"], capsys)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1
    if message is None:
        assert err.startswith("error: --spec: ") and "missing.yaml" in err
    else:
        assert err == f"error: {message}\n"


def test_an_output_directory_it_cannot_write_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A user's render on a head node where --output (default <fsx>/fabric-checks) is not theirs to write."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(SystemExit) as exit_:  # a file in the way is refused as the option is parsed
        run_main(["render", "--queue", "gpu", "--nodes", "2", "--output", str(blocked / "checks")], capsys)
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        f"python -m cluster.fabric render: error: argument --output: {str(blocked / 'checks')!r} is not a directory "
        f"({str(blocked)!r} is a file)\n"
    )


def test_render_refuses_queues_without_efa_or_shared_storage(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def no_efa(cluster: dict) -> None:
        cluster["queues"][0]["efa"] = False
        cluster["queues"][0]["placement_group"] = False

    spec = _spec_file(tmp_path, no_efa)
    code, _, err = run_main(["render", "--queue", "gpu", "--nodes", "2", "--spec", str(spec), "--dry-run"], capsys)
    assert code == 2
    assert err == "error: --queue: 'gpu' has EFA turned off in the spec; the fabric check measures EFA\n"

    spec = _spec_file(tmp_path, lambda cluster: cluster.update(fsx=None))
    code, _, err = run_main(["render", "--queue", "gpu", "--nodes", "2", "--spec", str(spec), "--dry-run"], capsys)
    assert code == 2
    assert err == (
        "error: --output: the spec has no shared file system (cluster.fsx); name a directory all nodes see\n"
    )


def _counter_dirs(base: Path, devices: int, traffic_per_device: int) -> tuple[Path, Path]:
    trees = {node: efa_tree(base / "sys" / node, devices) for node in ("n1", "n2")}
    sample_nodes(trees, base / "before")
    for tree in trees.values():
        bump(tree, "tx_bytes", traffic_per_device)
        bump(tree, "rx_bytes", traffic_per_device)
    sample_nodes(trees, base / "after")
    return base / "before", base / "after"


def _check_argv(output: str, before: Path, after: Path, *extra: str) -> list[str]:
    tool = "nccom-test" if output.startswith("nccom") else "all_reduce_perf"
    instance = "trn1.32xlarge" if tool == "nccom-test" else "p5.48xlarge"
    return ["check", "--tool", tool, "--instance-type", instance, "--nodes", "2", "--output", str(FIXTURES / output),
            "--before", str(before), "--after", str(after), *extra]  # fmt: skip


def test_check_exits_0_on_a_pass_and_1_on_a_failure(fast_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = _counter_dirs(fast_tmp / "moved", 32, 21 * GIB)
    code, out, _ = run_main(_check_argv("all_reduce_perf-2x-p5.48xlarge.txt", before, after), capsys)
    assert code == 0 and out.splitlines()[-1] == "fabric check: PASSED"

    before, after = _counter_dirs(fast_tmp / "silent", 32, 0)
    code, out, _ = run_main(_check_argv("all_reduce_perf-2x-p5.48xlarge-sockets.txt", before, after), capsys)
    assert code == 1
    assert out.splitlines()[-3:] == [
        "FAIL: busbw 2.9 GB/s < 389.6 GB/s expected for 2 x p5.48xlarge (80 % of the published 487 GB/s)",
        "FAIL: EFA counters did not move: NCCL used sockets (check FI_PROVIDER, the aws-ofi-nccl plugin, "
        "the security group's self rule)",
        "fabric check: FAILED (2 problems)",
    ]


def test_check_reads_the_nccl_debug_logs_and_the_iterations_of_nccom_test(
    fast_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = _counter_dirs(fast_tmp / "trn1", 8, 11 * GIB)
    code, out, _ = run_main(_check_argv("nccom-test-2x-trn1.32xlarge.txt", before, after, "--iters", "20"), capsys)
    assert code == 0, out
    # Ten times the iterations need ten times the traffic: the same counters no longer prove EFA carried the test.
    code, out, _ = run_main(_check_argv("nccom-test-2x-trn1.32xlarge.txt", before, after, "--iters", "200"), capsys)
    assert code == 1 and "less than the 800.0 GiB each way this test needs" in out

    logs = fast_tmp / "nccl-debug"
    logs.mkdir()
    (logs / "ip-10-1-33-17.5511.log").write_text("ip-10-1-33-17:5511:5511 [0] NCCL INFO Using network Socket\n")
    before, after = _counter_dirs(fast_tmp / "p5", 32, 21 * GIB)
    argv = _check_argv("all_reduce_perf-2x-p5.48xlarge.txt", before, after, "--nccl-debug-dir", str(logs))
    code, out, _ = run_main(argv, capsys)
    assert code == 1 and "FAIL: NCCL chose the Socket transport on 1 ranks" in out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--instance-type": "p9.96xlarge"}, "--instance-type: instance type 'p9.96xlarge' is not in the facts table"),
        ({"--nodes": "0"}, "--nodes: 0 must be at least 2 (the check measures traffic between nodes over EFA)"),
        ({"--output": "/nonexistent/all_reduce_perf.out"}, "--output: cannot read '/nonexistent/all_reduce_perf.out' (No such file or directory)"),
        ({"--before": "/nonexistent"}, "--before: '/nonexistent' is not a directory"),
        ({"--min-fraction": "-0.1"}, "--min-fraction: -0.1 must be above 0 and at most 1"),
        ({"--iters": "0"}, "--iters: 0 must be at least 1"),
        ({"--tool": "nccom-test", "--instance-type": "trn1.32xlarge"}, "--iters: nccom-test prints no iteration count; pass the -n the test ran with"),
    ],
)  # fmt: skip
def test_check_errors_are_one_line(
    change: dict[str, str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    argv = _check_argv("all_reduce_perf-2x-p5.48xlarge.txt", tmp_path / "before", tmp_path / "after")
    for option, value in change.items():
        if option in argv:
            argv[argv.index(option) + 1] = value
        else:
            argv += [option, value]
    code, out, err = run_main(argv, capsys)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {message}")


def test_a_malformed_sample_names_its_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for phase in ("before", "after"):
        (tmp_path / phase).mkdir()
        (tmp_path / phase / "n1.txt").write_text("# sysfs /sys\nrdmap16s0 ports/1/hw_counters/tx_bytes twelve\n")
    argv = _check_argv("all_reduce_perf-2x-p5.48xlarge.txt", tmp_path / "before", tmp_path / "after")
    code, _, err = run_main(argv, capsys)
    assert code == 2
    assert err == (
        f"error: --before: {tmp_path}/before/n1.txt:2: 'rdmap16s0 ports/1/hw_counters/tx_bytes twelve' is not "
        "'<device> <counter path> <value>'\n"
    )


def test_the_module_runs_as_a_program() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cluster.fabric", "render", "--queue", "gpu", "--nodes", "0", "--dry-run"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("error: --nodes: 0 must be at least 2")


def test_one_gpu_node_renders_the_nvlink_check_and_trn1_refuses_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run_main(
        ["render", "--queue", "gpu", "--nodes", "1", "--output", str(tmp_path), "--dry-run"], capsys
    )
    assert code == 0 and "#SBATCH --nodes=1" in out.splitlines()
    code, _, err = run_main(
        [
            "render",
            "--queue",
            "trn1",
            "--nodes",
            "1",
            "--spec",
            str(REPO / "spec/examples/trn1-neuron.yaml"),
            "--dry-run",
        ],
        capsys,
    )
    assert (
        code == 2
        and err == "error: --nodes: 1 must be at least 2 (the check measures traffic between nodes over EFA)\n"
    )


def test_the_docs_check_by_hand_reads_the_results_directory_render_names() -> None:
    """docs/fabric-checks.md's `llm-fabric check` example: DIR is where render puts a GPU run of the default spec
    (the job writes its files there: tests/cluster/test_fabric_slurm.py compares them with the doc's list)."""
    from cluster.fabric.cli import _job, build_parser

    job = _job(build_parser().parse_args(["render", "--queue", "gpu", "--nodes", "2"]), "render")
    block = (REPO / "docs" / "fabric-checks.md").read_text().split("runs by hand on a finished run's directory", 1)[1]
    directory = re.search(r"^DIR=(\S+)", block, flags=re.M)
    assert directory is not None
    assert re.fullmatch(re.escape(f"{job.result_root}/{job.job_name}-") + r"\d+", directory.group(1))


def _doc_block(after: str) -> str:
    """The first ```bash block of docs/fabric-checks.md after `after`, continuation lines joined."""
    text = (REPO / "docs" / "fabric-checks.md").read_text().split(after, 1)[1]
    block = re.search(r"```bash[^\n]*\n(.*?)```", text, flags=re.S)
    assert block is not None, f"docs/fabric-checks.md: no bash block after {after!r}"
    return block.group(1).replace("\\\n", " ")


def test_the_docs_build_nccl_tests_from_what_upload_artifacts_put_in_the_bucket() -> None:
    """The install block copies the tarball `make nccl-tests-source` pins from the folder the head node may read
    (spec.artifacts, policies.artifacts), unpacks it where the build runs, builds on the GPU queue into the directory
    the render commands name, and links NCCL where the render commands point the job."""
    from policies.artifacts import folders_read_by
    from spec import load_spec
    from spec.artifacts import artifact_locations

    spec = load_spec()
    folder = artifact_locations(spec).nccl_tests
    assert folder is not None and ("NcclTestsSource", folder) in folders_read_by(spec, "head-node")
    version = re.search(r"^NCCL_TESTS_VERSION := (\S+)$", (REPO / "Makefile").read_text(), flags=re.M)
    assert version is not None
    tarball = f"nccl-tests-{version.group(1)}.tar.gz"
    install = _doc_block("Once, install the benchmark")
    copied = re.search(r'aws s3 cp "s3://\$BUCKET/(\S+)" (\S+)/ ', install)
    assert copied is not None and copied.group(1) == folder.prefix + tarball
    local = f"{copied.group(2)}/{tarball}"
    assert re.search(rf"-m tarfile -e {re.escape(local)} {re.escape(copied.group(2))}$", install, flags=re.M)
    build = re.search(r"^srun (.*) make -C (\S+) (.*)$", install, flags=re.M)
    assert build is not None
    source = f"{copied.group(2)}/{tarball.removesuffix('.tar.gz')}"  # GitHub's archive of a tag: <repo>-<version>/
    assert build.group(2) == source and "--partition=gpu" in build.group(1).split()
    variables = dict(word.split("=", 1) for word in build.group(3).split() if "=" in word)
    assert variables["MPI"] == "1" and {"MPI_HOME", "CUDA_HOME", "NCCL_HOME", "BUILDDIR"} <= set(variables)
    run = _doc_block("After the cluster comes up")
    assert f"NCCL_TESTS_DIR={variables['BUILDDIR']} NCCL_LIB_DIR={variables['NCCL_HOME']}/lib llm-fabric render" in run
    assert f"cp -s {variables['NCCL_HOME']}/lib/libnccl.so.2 {variables['NCCL_HOME']}/lib/libnccl.so" in install
