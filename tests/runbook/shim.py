"""Stands on PATH for a program a doc block calls but this machine cannot really run against its system (AWS, a
cluster): `shim.py NAME ARGS...` checks the call with that program's own parser and records the verdict.

- aws: the AWS CLI v1 (.awscli-venv) against an endpoint nothing listens on: only the connection may fail.
- npx cdk: the pinned CDK CLI; synth/ls run; deploy/destroy/diff/bootstrap run against the app synthesized with the
  command's own `-c spec=...`, with no reachable AWS: only the AWS calls may fail (an unknown option or a stack the
  app does not have fails first). A deploy's --outputs-file is written from the template's outputs.
- pcluster: ParallelCluster 3.16.1's own CLI parser (.pcluster-venv, cluster/verify/pcluster/parse_commands.py).
- Slurm's clients: Debian's slurm-wlm binaries with a slurm.conf whose controller and database do not answer;
  srun's pyxis options are checked against tests/runbook/pyxis_options.json first.
- make: `make -n`; python: our commands up to their argument parser (parse_only.py), `-c` code compiled,
  `-m pytest` collected; RUNBOOK_RUN_MODULES lists the offline commands that run for real.
- the head node's commands (llm-*, the release's python): their modules up to the parser.
- any other program named in RUNBOOK_PRESENT: present on the machine the block names, not run.
A call of aws, pcluster or npx cdk that its parser accepts and that would reach AWS must then say whose credentials it
runs with (credentials_problem).
Every call appends {"name", "argv", "ok", "why"} to $RUNBOOK_LOG; a refused call exits 97 with the reason."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REFUSED = 97
AWS_UNREACHABLE = "Could not connect to the endpoint URL"
SLURM_UNREACHABLE = re.compile(r"Unable to contact slurm controller|Connection refused|Unexpected message received")
# Past parsing and stack selection: the first AWS call, or (destroy) the confirmation only a terminal can give.
CDK_REACHED_AWS = re.compile(
    r"Need to perform AWS calls|Could not connect|ECONNREFUSED|Unable to resolve AWS account|no credentials"
    r"|unable to get a confirmation from the user"
)
CDK_REFUSED = re.compile(r"Unknown option|No stacks? match|No stack found|Unknown command|Unknown arguments?")
SLURM_TOOLS = {
    "sinfo",
    "squeue",
    "scontrol",
    "scancel",
    "sacct",
    "sacctmgr",
    "sreport",
    "sbatch",
    "srun",
    "sshare",
    "sprio",
}
PLACEHOLDER_OUTPUT = "dummy-0123456789abcdef0"


def record(name: str, argv: list[str], why: str | None) -> int:
    with open(os.environ["RUNBOOK_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"name": name, "argv": argv, "ok": why is None, "why": why}) + "\n")
    if why is not None:
        print(f"runbook: {name} {shlex.join(argv)}: {why}", file=sys.stderr)
        return REFUSED
    return 0


def run(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[int, str, str]:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=600, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout, done.stderr


def last_lines(text: str, count: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-count:])


# ---- credentials ------------------------------------------------------------------------------------------------
NO_CREDENTIALS = (
    "no credentials named: add --profile (compute, data or management; pcluster has none), or start the block with "
    "export AWS_PROFILE=..."
)


def credentials_problem(argv: list[str]) -> str | None:
    """A workstation holds profiles for several accounts: a call that reaches AWS names its own (--profile), or the
    block exports AWS_PROFILE, or the environment carries keys (the rehearsal's). The default profile is nobody's
    choice, so relying on it is refused, though the sandbox has one (the real CLI would go on with it). A node's
    calls (head-node blocks) run with its instance role."""
    if any(arg == "--profile" or arg.startswith("--profile=") for arg in argv):
        return None
    if os.environ.get("AWS_PROFILE") or os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("RUNBOOK_INSTANCE_ROLE"):
        return None
    return NO_CREDENTIALS


# ---- AWS CLI ----------------------------------------------------------------------------------------------------
def aws(argv: list[str]) -> int:
    local_source_for_upload(argv)
    code, out, err = run([os.environ["RUNBOOK_AWS"], *argv])
    if AWS_UNREACHABLE in err:
        if (problem := credentials_problem(argv)) is not None:
            return record("aws", argv, problem)
        if "--query" in argv or "--output" in argv:
            print(PLACEHOLDER_OUTPUT)
        return record("aws", argv, None)
    return record("aws", argv, f"the AWS CLI refused it (exit {code}): {last_lines(err or out)}")


def local_source_for_upload(argv: list[str]) -> None:
    """`aws s3 sync|cp LOCAL s3://...` reads LOCAL before any request: an empty stand-in for what the block's
    previous (dry-run) build step makes."""
    if argv[:1] == ["s3"] and len(argv) >= 4 and argv[1] in {"sync", "cp"} and argv[3].startswith("s3://"):
        source = Path(argv[2])
        if not source.exists():
            if argv[1] == "sync":
                source.mkdir(parents=True)
            else:
                source.parent.mkdir(parents=True, exist_ok=True)
                source.write_text("")


# ---- CDK CLI ----------------------------------------------------------------------------------------------------
def context_spec(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg in {"-c", "--context"} and i + 1 < len(argv) else arg
        if value.startswith("spec=") and (arg in {"-c", "--context"} or arg.startswith("--context=")):
            return value.removeprefix("spec=")
        if arg.startswith("--context=spec="):
            return arg.removeprefix("--context=spec=")
    return None


def cdk_env() -> dict[str, str]:
    return {**os.environ, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1", "CDK_DISABLE_VERSION_CHECK": "1"}


def assembly(spec: str | None) -> Path:
    """The app synthesized for `spec` by the real CLI, once per spec content."""
    if spec and not Path(spec).is_file():
        raise SystemExit(record("npx", ["cdk", "-c", f"spec={spec}"], f"the spec file {spec} does not exist"))
    key = hashlib.sha256(Path(spec).read_bytes() if spec else b"embedded default").hexdigest()[:16]
    out = Path(os.environ["RUNBOOK_ASSEMBLIES"]) / key
    if not (out / "manifest.json").exists():
        context = ["-c", f"spec={spec}"] if spec else []
        code, _, err = run([os.environ["RUNBOOK_CDK"], "synth", "-q", *context, "-o", str(out)], env=cdk_env())
        if code != 0:
            raise SystemExit(record("npx", ["cdk", "synth", *context], f"synth failed: {last_lines(err)}"))
    return out


def write_outputs(argv: list[str], app: Path) -> None:
    """What `cdk deploy --outputs-file F` writes: each deployed stack's outputs (ids shaped like AWS's)."""
    path = argv[argv.index("--outputs-file") + 1]
    manifest = json.loads((app / "manifest.json").read_text())
    stacks = [name for name in manifest["artifacts"] if name in argv]
    outputs: dict[str, dict[str, str]] = {}
    for number, stack in enumerate(stacks):
        template = json.loads((app / f"{stack}.template.json").read_text())
        outputs[stack] = {
            key: ("vpc-0" if key == "VpcId" else "vpce-0") + f"{number}{index:x}".rjust(16, "0")
            for index, key in enumerate(template.get("Outputs", {}))
            if not key.startswith("Export")
        }
    Path(path).write_text(json.dumps(outputs, indent=2))


def npx(argv: list[str]) -> int:
    if argv[:1] != ["cdk"]:
        return record("npx", argv, "only the pinned CDK CLI (npx cdk) is installed by this repo")
    sub = argv[1] if len(argv) > 1 else ""
    cli = os.environ["RUNBOOK_CDK"]
    if sub in {"synth", "ls", "list"}:
        code, out, err = run([cli, *argv[1:]], env=cdk_env())
        if code == 0 and not CDK_REFUSED.search(err):
            sys.stdout.write(out)
            return record("npx", argv, None)
        return record("npx", argv, f"the CDK CLI failed (exit {code}): {last_lines(err)}")
    spec = context_spec(argv)
    app = ["-a", str(assembly(spec))] if sub != "bootstrap" else []
    code, out, err = run([cli, *argv[1:], *app], env=cdk_env())
    said = out + err
    if CDK_REFUSED.search(said) or not CDK_REACHED_AWS.search(said):
        return record("npx", argv, f"the CDK CLI refused it before any AWS call (exit {code}): {last_lines(said)}")
    if (problem := credentials_problem(argv)) is not None:
        return record("npx", argv, problem)
    if sub == "deploy" and "--outputs-file" in argv:
        write_outputs(argv, Path(app[1]))
    return record("npx", argv, None)


# ---- ParallelCluster --------------------------------------------------------------------------------------------
def pcluster(argv: list[str]) -> int:
    done = subprocess.run(
        [os.environ["RUNBOOK_PCLUSTER_PYTHON"], str(REPO / "cluster" / "verify" / "pcluster" / "parse_commands.py")],
        input=json.dumps({"commands": [argv]}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        return record("pcluster", argv, f"parse_commands.py failed: {last_lines(done.stderr)}")
    (problem,) = json.loads(done.stdout)
    if problem is None and argv[:1] != ["version"]:
        problem = credentials_problem(argv)
    return record("pcluster", argv, problem)


# ---- Slurm ------------------------------------------------------------------------------------------------------
def without_pyxis(argv: list[str]) -> tuple[list[str], str | None]:
    options = json.loads((HERE / "pyxis_options.json").read_text())
    kept: list[str] = []
    args = iter(argv)
    for arg in args:
        if not arg.startswith("--") or "container" not in arg:
            kept.append(arg)
            continue
        name, has_value, _ = arg[2:].partition("=")
        if name in options["with_value"]:
            if not has_value and next(args, None) is None:
                return kept, f"--{name} needs a value"
        elif name not in options["flags"] or has_value:
            return kept, f"--{name} is not a pyxis option ({options['source']})"
    return kept, None


def slurm(name: str, argv: list[str]) -> int:
    args = argv
    if name == "srun":
        args, problem = without_pyxis(argv)
        if problem:
            return record(name, argv, problem)
    code, out, err = run(
        [f"/usr/bin/{name}", *args], env={**os.environ, "SLURM_CONF": os.environ["RUNBOOK_SLURM_CONF"]}
    )
    if code == 0 or SLURM_UNREACHABLE.search(err):
        if name in {"sbatch"} or "--parsable" in argv:
            print("12345")
        return record(name, argv, None)
    return record(name, argv, f"{name} refused it (exit {code}): {last_lines(err or out)}")


# ---- make, python, our commands ---------------------------------------------------------------------------------
def make(argv: list[str]) -> int:
    code, out, err = run(["/usr/bin/make", "-n", *argv])
    return record("make", argv, None if code == 0 else f"make -n failed (exit {code}): {last_lines(err or out)}")


def parse_only(name: str, target: str, argv: list[str], python: str) -> int:
    code, out, err = run([python, str(HERE / "parse_only.py"), target, *argv])
    return record(name, [*argv], None if code == 0 else f"{target} refused its arguments: {last_lines(err or out)}")


def python(name: str, argv: list[str]) -> int:
    interpreter = os.environ["RUNBOOK_PYTHON"]
    if argv[:1] == ["-c"] and len(argv) > 1:
        try:
            compile(argv[1], "<-c>", "exec")
        except SyntaxError as error:
            return record(name, argv, f"python -c: {error}")
        return record(name, argv, None)
    if argv[:1] == ["-m"] and len(argv) > 1:
        module, rest = argv[1], argv[2:]
        if module == "pytest":
            code, out, err = run([interpreter, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *rest])
            found = re.search(r"(\d+) tests? collected", out)
            ok = code == 0 and found is not None and int(found.group(1)) > 0
            return record(name, argv, None if ok else f"pytest collected nothing (exit {code}): {last_lines(out)}")
        if module in os.environ.get("RUNBOOK_RUN_MODULES", "").split():
            code, out, err = run([interpreter, *argv])
            sys.stdout.write(out)
            sys.stderr.write(err)
            return record(name, argv, None if code == 0 else f"exit {code}: {last_lines(err)}")
        return parse_only(name, module, rest, interpreter)
    if argv and argv[0].endswith(".py"):
        return parse_only(name, argv[0], argv[1:], interpreter)
    return record(name, argv, "a python call the runbook test does not know how to check")


REPO_RELATIVE = re.compile(r"^(training|launch|planner|spec|cluster|slurm|policies)/")  # cluster/payload.py PACKAGES


def launcher(name: str, argv: list[str]) -> int:
    scripts = json.loads(os.environ["RUNBOOK_LAUNCHERS"])
    relative = [arg for arg in argv if REPO_RELATIVE.match(arg.partition("=")[2] or arg)]
    if relative:
        # A head-node login starts in the user's home, not in the repo.
        return record(name, argv, f"{relative[0]} is relative to the repo: name it through $LLM_TRAINING_HOME")
    return parse_only(name, scripts[name], argv, os.environ["RUNBOOK_PYTHON"])


def main() -> int:
    name, argv = Path(sys.argv[1]).name, sys.argv[2:]
    if name == "aws":
        return aws(argv)
    if name == "npx":
        return npx(argv)
    if name == "pcluster":
        return pcluster(argv)
    if name in SLURM_TOOLS:
        return slurm(name, argv)
    if name == "make":
        return make(argv)
    if name in {"python", "python3"}:
        return python(name, argv)
    if name in json.loads(os.environ.get("RUNBOOK_LAUNCHERS", "{}")):
        return launcher(name, argv)
    if name in os.environ.get("RUNBOOK_PRESENT", "").split():
        return record(name, argv, None)
    return record(name, argv, "not a program the runbook test knows on this machine")


if __name__ == "__main__":
    sys.exit(main())
