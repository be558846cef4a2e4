"""README's "First job on the cluster" and "After pretraining", run as written the way the head node runs them.

    python -m tests.rehearsal.head_node --work DIR     (root; the report lands in DIR/report.json)

What stands for the head node, in a private mount namespace of its own (`unshare --mount`), so nothing outside
it sees /fsx, the user or the mounts:
- /fsx: a directory of the work dir bind-mounted there; the local SLURM cluster's jobs see the same.
- the release: cluster/bootstrap/head_node.sh lays this repo's payload (the default spec as deployment.yaml) onto
  /fsx and builds its env from requirements-node.txt out of an offline wheelhouse (`make wheelhouse-node-cpu`,
  torch's CPU build), exactly as at boot; then the release tree is remounted read-only, as a user meets it.
- the user: the spec's first user without sudo (the default spec's researcher, bob), whom head_node.sh's accounts
  script (users/accounts.sh) makes for real, with their home, in a copy of /etc and an empty /home bind-mounted over
  the real ones, as on a head node; README's connect step logs in as that account. The block runs as that user
  (setpriv) in a login environment: the profile head_node.sh wrote, base PATH.
- the cluster: a real slurmctld and two slurmd (Debian's slurm-wlm) shaped like the spec's first queue: its
  partition name and node names, 8 CPUs a node for the 8 ranks `llm-submit` starts on a p5, and 8 stand-in GPUs
  (GRES) a node, which every GPU job requests.
- your corpus: README's real model reads /fsx/data/corpus_text_document, which a reader prepares and stages
  from S3; the rehearsal writes one there (random tokens, 20M, llama3's vocabulary) as that user.

Each block's placeholders (`JOB=12345   # the job id llm-submit printed`, or llm-eval's) get the id the command
before them printed, as a reader would type it: the block runs in pieces, one per placeholder. "After pretraining"
runs once the first block's jobs have ended: it scores first-tiny, prepares the demo instructions, fine-tunes
first-tiny with LoRA and scores the result. Every job the block submits is waited for; the report holds each one's
Slurm state, exit code, the trainer's exit status and the tail of its log. What a CPU host cannot do is reached
and named, not skipped: the fabric check's all_reduce_perf is a CUDA build (stops there), and llama3-8b's
training state needs GPU memory (the trainer refuses it before materializing a weight, after its config and
data checks passed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cluster.image_config import BOOTSTRAP_DIR
from cluster.payload import build_payload
from cluster.slurm_names import spec_partitions
from cluster.verify.local_slurm import LocalSlurm
from spec import load_spec
from tests.runbook.blocks import REPO, Block, blocks_in
from training.data.writer import TokenizerInfo, write_dataset

WHEELHOUSE = REPO / "build" / "wheelhouse-node-cpu"
SECTION = "## First job on the cluster"
AFTER_SECTION = "## After pretraining: evaluate and fine-tune"
PLACEHOLDER = re.compile(r"^(?P<name>JOB)=\S+(?P<comment>\s+# the job id llm-(?:submit|eval) printed.*)$", re.M)
SUBMITTED = re.compile(r"^(?P<id>\d+) (?P<script>/\S+\.sbatch)$", re.M)
GPUS_PER_NODE = 8  # a p5.48xlarge's: the ranks llm-submit starts per node
IN_NAMESPACE = "LLM_REHEARSAL_NAMESPACE"
VISIBLE = Path("/mnt/head-node-rehearsal")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BLOCK_TIMEOUT_S = 3600  # a safety net for a wedged job; the block waits on the jobs themselves (llm-follow)


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    home: Path

    def env(self, slurm_conf: Path) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "USER": self.name,
            "LOGNAME": self.name,
            "SHELL": "/bin/bash",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "SLURM_CONF": str(slurm_conf),  # ParallelCluster's clients find theirs at /opt/slurm/etc
        }


def section_block(section: str, readme: Path = REPO / "README.md", containing: str = "") -> Block:
    """The one `bash head-node` block of README's `section` whose script holds `containing`."""
    text = readme.read_text(encoding="utf-8")
    start = text.index(section)
    end = text.find("\n## ", start + len(section))
    first, last = text.count("\n", 0, start) + 1, text.count("\n", 0, end if end > 0 else len(text)) + 1
    found = [
        block
        for block in blocks_in(readme, text)
        if block.tag == "head-node" and first < block.line < last and containing in block.script()
    ]
    if len(found) != 1:
        raise SystemExit(
            f"README.md: '{section}' has {len(found)} bash head-node blocks with {containing!r}; the rehearsal expects one"
        )
    return found[0]


def first_job_block(readme: Path = REPO / "README.md") -> Block:
    # The section's other block prepares a large corpus on the cluster: tests/launch/test_prepare_cluster_slurm.py
    # runs that command on the local cluster.
    return section_block(SECTION, readme, containing="llm-submit")


def after_pretraining_block(readme: Path = REPO / "README.md") -> Block:
    return section_block(AFTER_SECTION, readme)


def split_at_placeholders(script: str) -> list[str]:
    """The block in pieces: what runs before the first placeholder, then each placeholder (`JOB={job_id}`, to fill
    in with the id printed just before it) with what follows it up to the next."""
    matches = list(PLACEHOLDER.finditer(script))
    if not matches:
        raise SystemExit("README.md: a block the rehearsal runs has no `JOB=...   # the job id llm-... printed` line")
    pieces = [script[: matches[0].start()]]
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        rest = script[match.end() : following.start() if following else len(script)]
        pieces.append("JOB={job_id}" + match["comment"] + rest)
    return pieces


def split_at_placeholder(script: str) -> tuple[str, str]:
    """(what runs before the reader learns the job id, the rest with `JOB={id}` to fill in)."""
    pieces = split_at_placeholders(script)
    if len(pieces) != 2:
        raise SystemExit(f"README.md: the first job's block has {len(pieces) - 1} job-id placeholders; it expects one")
    return pieces[0], pieces[1]


def run_in_pieces(
    user: User, script: str, profile: Path, slurm: LocalSlurm, work: Path, name: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each piece in turn, its placeholder filled with the id the piece before printed; stops at a failing piece."""
    results: list[dict[str, Any]] = []
    submitted: list[str] = []
    for index, piece in enumerate(split_at_placeholders(script)):
        if index and not submitted:
            break
        text = piece.format(job_id=submitted[-1]) if index else piece
        result = run_as(user, text, profile, slurm.conf_path, work / f"{name}-{index}.log")
        results.append(result)
        submitted += job_ids(result["stdout"])
        if result["returncode"] != 0:
            break
    return results, submitted


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def private_accounts(work: Path) -> None:
    """A copy of /etc and an empty /home bind-mounted over the real ones (this namespace only): the accounts script
    head_node.sh runs (useradd, groupadd, sudoers, homes) changes these, and the host keeps its own. The whole /etc
    directory, not its passwd and group files: a package installed meanwhile (a system user's useradd renames a new
    /etc/passwd into place) lazily unmounts a file mounted over /etc/passwd in every namespace, and the user would
    vanish mid-rehearsal (Slurm: "getpwuid failed", its job requeued forever)."""
    etc, home = work / "etc-root", work / "home-root"
    subprocess.run(["cp", "-a", "/etc/.", str(etc)], check=True)
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    mount("--bind", str(etc), "/etc")
    mount("--bind", str(home), "/home")


def reader(spec_path: Path) -> User:
    """README's reader: the spec's first user without sudo, as the accounts script made them on this node."""
    cluster = load_spec(spec_path).cluster
    users = [user for user in cluster.users if not user.admin] if cluster else []
    if not users:
        raise SystemExit(f"{spec_path}: no cluster.users without admin: README's connect step logs in as one")
    entry = pwd.getpwnam(users[0].name)
    return User(entry.pw_name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))


def lay_out_release(work: Path, spec_path: Path) -> subprocess.CompletedProcess[str]:
    spec = load_spec(spec_path)
    spec_yaml = yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False)
    payload = build_payload(spec, spec_yaml, work / "build")
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    env.update(SLURM_ETC=str(work / "slurm-etc"), PROFILE_D=str(work / "profile.d"), PYTHON_INSTALL="false")
    # The system's python3.11, as on the head node: the venv links to it, and the reader must be able to run it
    # (an interpreter under /root would be out of its reach).
    env["PATH"] = SYSTEM_PATH
    args = ["--cluster-name-tag", "deployment", "--shared-dir", "/fsx", "--payload", str(payload)]
    args += ["--python", "python3.11", "--python-env", f"wheelhouse:{WHEELHOUSE}"]
    return subprocess.run(
        ["bash", str(BOOTSTRAP_DIR / "head_node.sh"), *args], env=env, capture_output=True, text=True, timeout=900
    )


def llama_sized_dataset(prefix: Path) -> Path:
    """Random token ids in megatron-core's format (20M tokens, 80 MB, llama3's vocabulary): llm-submit checks that the
    1 % validation split holds one evaluation batch of 8193-token samples (16 on two nodes) before it renders."""
    rng = np.random.default_rng(0)
    documents = ((0, rng.integers(0, 128_000, size=16_384, dtype=np.int64)) for _ in range(1250))
    tokenizer = TokenizerInfo(sha256="0" * 64, vocab_size=128_256, eod_id=128_001, eod_token="<|end_of_text|>")
    source = prefix.with_suffix(".jsonl")
    source.write_text("")  # the manifest records each source's checksum
    write_dataset(prefix, documents, tokenizer, [source])
    return prefix


def write_corpus(prefix: Path, user: User) -> None:
    """The reader's own corpus, theirs: written here, owned by the user who staged it."""
    llama_sized_dataset(prefix)
    for path in prefix.parent.glob(f"{prefix.name}*"):
        os.chown(path, user.uid, user.gid)


def run_as(user: User, script: str, profile: Path, slurm_conf: Path, log: Path) -> dict[str, Any]:
    command = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--init-groups"]
    command += ["bash", "-c", f"set -euo pipefail\nsource {profile}\n{script}"]
    began = time.monotonic()
    result = subprocess.run(
        command,
        env=user.env(slurm_conf),
        cwd=user.home,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )
    log.write_text(f"$ {script}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")
    return {
        "returncode": result.returncode,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "seconds": round(time.monotonic() - began, 1),
    }


def job_ids(output: str) -> list[str]:
    """Ids of the jobs a command submitted: llm-submit prints `<id> <script>`, sbatch `Submitted batch job <id>`."""
    return [m["id"] for m in SUBMITTED.finditer(output)] + re.findall(r"^Submitted batch job (\d+)$", output, re.M)


class JobWatcher(threading.Thread):
    """Keeps the last `scontrol show job` record of every job while the block runs: slurmctld forgets a finished job
    after MinJobAge (10 minutes here), and the fabric check ends long before the block does."""

    def __init__(self, slurm: LocalSlurm) -> None:
        super().__init__(daemon=True)
        self.slurm = slurm
        self.seen: dict[str, dict[str, str]] = {}
        self.stopping = threading.Event()

    def poll(self) -> None:
        shown = self.slurm.run(["scontrol", "show", "job", "-o"], check=False, timeout_s=120)
        for line in shown.stdout.splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            if "JobId" in fields:
                self.seen[fields["JobId"]] = fields

    def run(self) -> None:
        while not self.stopping.wait(2):
            self.poll()

    def stop(self) -> None:
        self.stopping.set()
        self.join()
        self.poll()


def job_record(job_id: str, fields: dict[str, str]) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": job_id,
        "name": fields.get("JobName"),
        "state": fields.get("JobState"),
        "exit_code": fields.get("ExitCode"),
        "partition": fields.get("Partition"),
        "nodes": fields.get("NodeList"),
        "user": fields.get("UserId", "").split("(")[0],
    }
    log = Path(fields.get("StdOut", ""))
    record["log_tail"] = log.read_text(errors="replace")[-6000:] if log.is_file() else None
    if log.parent.name != "logs":  # a run dir's job (llm-submit) logs under <run dir>/logs
        record["run_dir"] = record["exit_status"] = None
        return record
    run_dir = log.parent.parent
    status, metrics = run_dir / "exit_status.json", run_dir / "metrics.jsonl"
    record["run_dir"] = str(run_dir)
    record["exit_status"] = json.loads(status.read_text()) if status.is_file() else None
    if metrics.is_file():
        rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        train = [row for row in rows if row.get("kind") == "train"]
        record["last_step"] = max((row["step"] for row in train), default=None)
        record["max_mfu"] = max((row["mfu"] for row in train if "mfu" in row), default=None)
        steps = sorted(int(path.name.removeprefix("step-")) for path in (run_dir / "checkpoints").glob("step-*"))
        record["checkpoints"] = [f"step-{step}" for step in steps]
    return record


def after_pretraining_outcome(runs: Path) -> dict[str, Any]:
    """What README's "After pretraining" leaves: both runs' scores tables, the LoRA run's held-out SFT losses by step,
    its PEFT adapter and the merged checkpoint's files."""
    lora = runs / "first-lora"
    metrics = lora / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()] if metrics.is_file() else []
    scores = {
        run: (runs / run / "eval" / "scores.md").read_text() if (runs / run / "eval" / "scores.md").is_file() else None
        for run in ("first-tiny", "first-lora")
    }
    return {
        "scores": scores,
        "sft_validation_loss": {str(row["step"]): row["val_loss"] for row in rows if "val_loss" in row},
        "adapter": sorted(path.name for path in (lora / "export" / "adapter").glob("*")),
        "merged": sorted(path.name for path in (lora / "merged").glob("*")),
    }


def wait_for_jobs(slurm: LocalSlurm, ids: list[str], timeout_s: float = BLOCK_TIMEOUT_S) -> None:
    """Until none of `ids` is pending, running or completing (squeue lists them until then)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listed = slurm.run(["squeue", "-h", "-o", "%i", "-j", ",".join(ids)], check=False, timeout_s=120)
        if listed.returncode == 0 and not listed.stdout.split():
            return
        time.sleep(2)
    raise SystemExit(f"jobs {', '.join(ids)} still queued after {timeout_s:.0f} s")


def rehearse(work: Path, spec_path: Path) -> dict[str, Any]:
    report: dict[str, Any] = {"spec": str(spec_path)}
    spec = load_spec(spec_path)
    partition = spec_partitions(spec)[0]
    slurm = LocalSlurm(
        state_dir=work / "slurm",
        nodes=partition.node_names()[:2],
        partition=partition.name,
        cpus_per_node=GPUS_PER_NODE,
        gpus_per_node=GPUS_PER_NODE,  # stand-ins for the p5's GPUs, which GPU jobs request (--gpus-per-node)
    )
    Path("/fsx").mkdir(exist_ok=True)  # the mount point, removed afterwards if made here; what is mounted stays private
    private_accounts(work)
    try:
        slurm.up()
        mount("--bind", str(slurm.fsx_dir), "/fsx")
        bootstrap = lay_out_release(work, spec_path)
        report["bootstrap"] = {"returncode": bootstrap.returncode, "stderr": bootstrap.stderr[-4000:]}
        if bootstrap.returncode != 0:
            return report
        user = reader(spec_path)
        report["user"] = {"name": user.name, "home": str(user.home), "home_mode": oct(user.home.stat().st_mode & 0o777)}
        releases = Path("/fsx/llm-training.releases")
        mount("--bind", str(releases), str(releases))
        mount("-o", "remount,bind,ro", str(releases))
        profile = work / "profile.d" / "llm-training.sh"
        write_corpus(Path("/fsx/data/corpus_text_document"), user)

        before, after = split_at_placeholder(first_job_block().script())
        watcher = JobWatcher(slurm)
        watcher.start()
        try:
            first = run_as(user, before, profile, slurm.conf_path, work / "block-before-job-id.log")
            report["before_job_id"] = first
            submitted = job_ids(first["stdout"])
            if first["returncode"] != 0 or not submitted:
                return report
            rest = after.format(job_id=submitted[-1])
            second = run_as(user, rest, profile, slurm.conf_path, work / "block-rest.log")
            report["rest"] = second
            submitted += job_ids(second["stdout"])
            wait_for_jobs(slurm, submitted)
            if second["returncode"] == 0:
                began = time.monotonic()
                pieces, after_ids = run_in_pieces(
                    user, after_pretraining_block().script(), profile, slurm, work, "after"
                )
                wait_for_jobs(slurm, after_ids)
                report["after_pretraining"] = {"pieces": pieces, "seconds": round(time.monotonic() - began, 1)}
                submitted += after_ids
        finally:
            watcher.stop()
        report["jobs"] = [job_record(job_id, watcher.seen.get(job_id, {})) for job_id in submitted]
        report["outcome"] = after_pretraining_outcome(Path("/fsx/runs"))
        report["home_cache"] = sorted(str(p.relative_to(user.home)) for p in (user.home / ".cache").rglob("*.jsonl"))
        return report
    finally:
        slurm.down()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.rehearsal.head_node", description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="an empty directory for everything it makes")
    parser.add_argument("--spec", type=Path, default=REPO / "spec" / "default.yaml")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("error: the head-node rehearsal needs root (mount namespace, a user, SLURM daemons)", file=sys.stderr)
        return 2
    if not (WHEELHOUSE / ".complete").exists():
        print(f"error: {WHEELHOUSE} is missing: run `make wheelhouse-node-cpu`", file=sys.stderr)
        return 2
    if os.environ.get(IN_NAMESPACE) != "1":
        command = ["unshare", "--mount", "--propagation", "private", sys.executable, "-m", "tests.rehearsal.head_node"]
        env = {**os.environ, IN_NAMESPACE: "1"}
        made_mount_point = not Path("/fsx").exists()
        try:
            args_again = argv if argv is not None else sys.argv[1:]
            return subprocess.run([*command, *args_again], env=env, check=False).returncode
        finally:
            if made_mount_point:
                with contextlib.suppress(OSError):  # left as it is if anything else put files there meanwhile
                    Path("/fsx").rmdir()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    # The reader reaches the profile and slurm.conf through VISIBLE: the work dir may sit under a
    # directory only root may enter (pytest's). A tmpfs on /mnt, private to this namespace, holds the mount point.
    work.chmod(0o755)
    mount("-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/mnt")
    VISIBLE.mkdir()
    mount("--bind", str(work), str(VISIBLE))
    report = rehearse(VISIBLE, args.spec.resolve())
    (work / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"report: {work / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
