"""A cluster update while a job is queued (issue 42, fault 7): the job pins its release's real path (llm-submit renders
WORKDIR and PYTHON into it), so head_node.sh must keep that release through any number of updates while Slurm still
holds the job, and remove it once no job names it.

Real pieces: the head-node bootstrap laying three payloads onto a directory standing for /fsx, each with its Python
env built from the local wheelhouse; the local SLURM cluster holding, releasing and running the job; squeue and
scontrol answering head_node.sh."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cluster.payload import build_payload
from cluster.verify.local_slurm import LocalSlurm
from tests.cluster.test_head_node_env import WHEELHOUSE, clean_env, deployment, head_node
from tests.environments import ready
from tests.launch.slurm_helpers import wait_for_end

# Three release envs built from the wheelhouse (a minute each under CI's load) and a job: a ceiling above 900 s.
pytestmark = [pytest.mark.slurm, pytest.mark.bootstrap, pytest.mark.timeout(1800)]


def pinned_job(release: Path, out: Path) -> str:
    """A batch script pinned as llm-submit pins one (tests/cluster/test_head_node_env.py checks the rendering): the
    release's real path in WORKDIR and PYTHON; it imports the submit command from that release's env."""
    return (
        "#!/bin/bash\n"
        f"WORKDIR={release}\n"
        f"PYTHON={release}/.venv/bin/python\n"
        'cd "$WORKDIR" || exit 1\n'
        f"\"$PYTHON\" -I -c 'import launch.submit as s, sys; print(sys.prefix); print(s.__file__)' > {out}\n"
    )


def test_a_queued_job_runs_from_its_release_after_two_updates(local_slurm: LocalSlurm, tmp_path: Path) -> None:
    ready("wheelhouse-test")
    (tmp_path / "fsx").mkdir()
    current = tmp_path / "fsx" / "llm-training"
    # head_node.sh asks this cluster's controller which jobs it holds (on a head node: /opt/slurm/bin).
    env = clean_env(tmp_path, SLURM_CONF=str(local_slurm.conf_path), SLURM_BIN="/usr/bin")
    python_env = f"wheelhouse:{WHEELHOUSE}"

    def update(max_count: int) -> tuple[Path, str]:
        spec, spec_yaml = deployment(max_count)
        payload = build_payload(spec, spec_yaml, tmp_path / f"build-{max_count}")
        started = time.monotonic()
        result = head_node(tmp_path, payload, python_env, env)
        assert result.returncode == 0, result.stderr
        print(f"update to max_count {max_count}: {time.monotonic() - started:.0f} s")
        return current.resolve(), result.stderr

    first, _ = update(2)
    out = tmp_path / "job.out"
    script = tmp_path / "pinned.sbatch"
    script.write_text(pinned_job(first, out))
    submitted = ["sbatch", "--parsable", "--hold", "-N", "1", "-o", str(tmp_path / "slurm.out"), str(script)]
    job_id = local_slurm.run(submitted).stdout.strip()
    assert local_slurm.job(job_id)["JobState"] == "PENDING"

    second, _ = update(3)
    third, log = update(4)
    assert len({first, second, third}) == 3 and current.resolve() == third
    releases = tmp_path / "fsx" / "llm-training.releases"
    assert sorted(p.name for p in releases.iterdir()) == sorted([first.name, second.name, third.name])
    assert f"head_node: release {first.name} kept: job(s) {job_id} use it" in log
    assert (first / ".venv" / "bin" / "python").exists()

    released = time.monotonic()
    local_slurm.run(["scontrol", "release", job_id])
    job = wait_for_end(local_slurm, job_id)
    print(f"released to {job['JobState']}: {time.monotonic() - released:.0f} s")
    assert job["JobState"] == "COMPLETED", (job, (tmp_path / "slurm.out").read_text())
    prefix, module = out.read_text().splitlines()
    assert (prefix, module) == (str(first / ".venv"), str(first / "launch" / "submit.py"))

    # With the job gone, the next switch (back to the second release, already built) removes the first.
    again, log = update(3)
    assert again == second
    assert sorted(p.name for p in releases.iterdir()) == sorted([second.name, third.name])
    assert "kept: job(s)" not in log
