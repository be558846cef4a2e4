"""The executable runbook: every fenced block of README.md and docs/*.md says what it is, and every shell block is
checked from the files themselves, in document order, in one scratch checkout per doc (a reader follows a doc top
to bottom):

- ```bash here: runs as written on this machine (the venv's python first on PATH, as after `make`);
  ```bash here long: the test suite itself or tens of minutes: make -n, pytest --collect-only, our parsers.
- ```bash aws: the AWS CLI, the CDK CLI and pcluster through their own parsers with no reachable AWS (only the
  connection may fail); our offline commands run (phase two writes the spec the next deploy synthesizes).
- ```bash head-node: the head node's login environment as head_node.sh builds it; our commands up to their parser,
  Slurm's clients (Debian's slurm-wlm) against a controller that does not answer, srun's pyxis options against
  pyxis's own option table; a program the head node does not have fails.
docs/runbook-tests.md explains the tags for doc writers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cluster.image_config import image_id
from cluster.slurm_names import spec_partitions
from spec import DeploymentSpec, load_spec
from tests.environments import ready
from tests.rehearsal import readme
from tests.runbook.blocks import DOCS, REPO, Block, all_blocks, blocks_in
from tests.runbook.sandbox import calls, env_for, prepare, run_block
from tests.stacks.conftest import Assembly


def spec_node_names(spec: DeploymentSpec) -> list[str]:
    return [name for partition in spec_partitions(spec) for name in partition.node_names()]


SHELL_DOCS = sorted({block.path for block in all_blocks() if block.language == "bash"})


def test_every_fence_says_what_it_is() -> None:
    problems = [problem for block in all_blocks() if (problem := block.problem()) is not None]
    assert problems == []


def test_every_doc_is_read() -> None:
    assert {path.name for path in DOCS} >= {"README.md", "cluster.md", "jobs.md"}
    assert len([b for b in all_blocks() if b.language == "bash"]) >= 40


@pytest.fixture(scope="module")
def runbook_tools() -> None:
    """The real parsers the aws and head-node blocks go through, and the wheelhouse the scratch checkouts link
    (tests/runbook/sandbox.LINKED): built, or waited for while `make test` builds them."""
    for target in ("awscli-venv", "pcluster-venv", "wheelhouse-test"):
        ready(target)


def check_doc(blocks: list[Block], root: Path) -> list[str]:
    """Every shell block of one doc in order; the findings, one line each (file:line, the call, why)."""
    repo, base = prepare(root)
    findings: list[str] = []
    log = Path(base["RUNBOOK_LOG"])
    for block in blocks:
        if block.language != "bash":
            continue
        log.write_text("")
        result = run_block(block, repo, env_for(block, root, repo, base))
        refused = [
            f"{block.where}: {call['name']} {call['argv']}: {call['why']}" for call in calls(log) if not call["ok"]
        ]
        findings += refused
        if result.returncode != 0 and not refused:
            tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-4:])
            findings.append(f"{block.where} ({block.info}): exit {result.returncode}: {tail}")
        if result.returncode == 0 and (block.tag != "here" or block.long) and not calls(log):
            findings.append(f"{block.where} ({block.info}): no command was checked")
    return findings


@pytest.mark.runbook
@pytest.mark.parametrize("doc", SHELL_DOCS, ids=lambda path: str(path.relative_to(REPO)))
def test_doc_blocks_run_or_parse(doc: Path, tmp_path: Path, runbook_tools: None) -> None:
    assert check_doc(blocks_in(doc), tmp_path) == []


MISTAKES = [
    (
        "here",
        "python -m planner.plan --model llama3-8b --instance p5.48xlarge --nodes 8 --sequence 8192",
        "--sequence",
    ),
    ("aws", "aws s3 ls s3://my-bucket/ --recurse --profile compute", "--recurse"),
    ("aws", "npx cdk deploy -c spec=my-deployment.yaml llm-demo-netwerk --profile compute", "llm-demo-netwerk"),
    ("aws", "AWS_PROFILE=compute pcluster describe-cluster --name llm-demo --region us-east-1", "describe-cluster"),
    # The same programs with no credentials named (the workstation's default profile is nobody's choice).
    ("aws", "aws ec2 describe-instances --region us-east-1", "no credentials"),
    ("aws", "npx cdk deploy -c spec=my-deployment.yaml llm-demo-network", "no credentials"),
    ("aws", "pcluster describe-compute-fleet --cluster-name llm-demo --region us-east-1", "no credentials"),
    (
        "head-node",
        "llm-submit --backend fsdp --model x.yaml --nodes 2 --data-prefix p --run-dir r --dryrun",
        "--dryrun",
    ),
    ("head-node", "llm-plan --model training/configs/1b.yaml --instance p5.48xlarge --nodes 1", "relative"),
    ("head-node", "sinfo --long-format", "--long-format"),
    ("head-node", "srun --container-imag=/fsx/containers/x.sqsh hostname", "--container-imag"),
    ("head-node", "nvidia-smi", "nvidia-smi"),
]


@pytest.mark.runbook
def test_a_broken_flag_or_name_in_any_kind_of_block_fails(tmp_path: Path, runbook_tools: None) -> None:
    """The checks can fail: one deliberate mistake per program, each reported with its block's line."""
    doc = tmp_path / "broken.md"
    doc.write_text("".join(f"```bash {tag}\n{line}\n```\n\n" for tag, line, _ in MISTAKES) + "```bash\necho\n```\n")
    blocks = blocks_in(doc)
    assert [block.problem() is None for block in blocks] == [True] * len(MISTAKES) + [False]
    findings = check_doc(blocks[: len(MISTAKES)], tmp_path / "sandbox")
    for block, (_, _, word) in zip(blocks, MISTAKES, strict=False):
        assert [line for line in findings if line.startswith(block.where) and word in line], (block.where, findings)
    assert len(findings) == len(MISTAKES), findings


@pytest.mark.runbook
def test_an_aws_call_names_its_credentials_on_a_workstation_not_on_the_head_node(
    tmp_path: Path, runbook_tools: None
) -> None:
    """A workstation's call says which account's profile it uses; the head node's calls use its instance role."""
    call = "aws ec2 describe-instances --region us-east-1\n"
    doc = tmp_path / "credentials.md"
    doc.write_text(
        f"```bash aws\n{call}```\n\n```bash aws\nexport AWS_PROFILE=compute\n{call}```\n\n"
        f"```bash aws\nAWS_ACCESS_KEY_ID=AKIAEXAMPLE AWS_SECRET_ACCESS_KEY=x {call}```\n\n```bash head-node\n{call}```\n"
    )
    bare, exported, keys, head_node = blocks_in(doc)
    findings = check_doc([bare, exported, keys, head_node], tmp_path / "sandbox")
    assert len(findings) == 1 and findings[0].startswith(f"{bare.where}: aws "), findings
    assert "no credentials named" in findings[0]


@pytest.mark.runbook
def test_readmes_here_blocks_run_without_the_venv_until_they_activate_it(tmp_path: Path, runbook_tools: None) -> None:
    """README's reader starts in a fresh shell where `make` built the venv but nothing activated it: a python call
    fails there until a block sources .venv/bin/activate. The other docs' readers come from README, venv active."""
    python = "python -c 'import pydantic, torch'\n"
    readme = tmp_path / "README.md"
    readme.write_text(f"```bash here\n{python}```\n\n```bash here\nsource .venv/bin/activate\n{python}```\n")
    without, activated = blocks_in(readme)
    findings = check_doc([without, activated], tmp_path / "readme")
    assert len(findings) == 1 and findings[0].startswith(f"{without.where} (bash here): exit 127"), findings
    other = tmp_path / "jobs.md"
    other.write_text(f"```bash here\n{python}```\n")
    assert check_doc(blocks_in(other), tmp_path / "jobs") == []


ACTIVATES_THE_VENV = re.compile(r"^\s*(source|\.) \.venv/bin/activate\b", re.M)
CALLS_PYTHON = re.compile(r"(?<![\w/.-])(python3?|torchrun)\b")


def test_readme_activates_the_venv_before_its_first_python_command() -> None:
    """Its `bash aws` blocks' python is a stand-in that works anyway: the order is checked here."""
    script = "".join(block.script() for block in blocks_in(REPO / "README.md") if block.language == "bash")
    first_python, activation = CALLS_PYTHON.search(script), ACTIVATES_THE_VENV.search(script)
    assert first_python is not None and activation is not None, "README runs no python, or never activates the venv"
    assert activation.start() < first_python.start(), script[first_python.start() - 200 : first_python.end() + 80]


def test_the_names_shell_blocks_use_are_the_apps(default_assembly: Assembly) -> None:
    """Every `<name>-...` the docs' commands name (stacks, access points, buckets, roles, repositories, nodes,
    images) is one the synthesized default deployment, its spec or ParallelCluster's Slurm naming really makes."""
    spec = default_assembly.spec
    made = "\n".join(json.dumps(template) for template in default_assembly.templates.values())
    made += "\n".join(
        [
            *(f"{spec.name}-{stack}" for stack in default_assembly.templates),
            *spec_node_names(spec),
            spec.model_dump_json(),
            image_id(load_spec(REPO / "spec" / "examples" / "trn1-neuron.yaml")),  # the Neuron AMI's build id
        ]
    )
    used = {
        (block.where, name)
        for block in all_blocks()
        if block.language == "bash"
        for name in re.findall(rf"(?<![\w-]){re.escape(spec.name)}-[a-z0-9-]*[a-z0-9]", block.body)
    }
    assert used, "the docs name nothing of the default deployment"
    assert sorted((where, name) for where, name in used if name not in made) == []


# Values for the placeholders of README's inline tear-down commands (ids noted in its step 0).
TEARDOWN_PLACEHOLDERS = {
    "NAME": "llm-demo-datasets-222222222222",
    "KEY_ID": "1234abcd-12ab-34cd-56ef-1234567890ab",
    "ID": "llm-demo-accounting-final",
}


def teardown_inline_commands() -> list[str]:
    """The commands README's tear-down names outside its blocks (the table of what is retained, the prose after it),
    placeholders filled."""
    teardown = readme.section((REPO / "README.md").read_text(), readme.TEARDOWN_SECTION)
    prose = re.sub(r"^```.*?^```", "", teardown, flags=re.S | re.M)
    placeholder = re.compile(rf"\b({'|'.join(TEARDOWN_PLACEHOLDERS)})\b")
    commands = [placeholder.sub(lambda m: TEARDOWN_PLACEHOLDERS[m[1]], c) for c in readme.INLINE_COMMAND.findall(prose)]
    # An id shown elided (`fs-...`) gets one of its real shape: the AWS CLI checks the length of some before sending.
    return [command.replace("fs-...", "fs-0123456789abcdef0") for command in commands]


@pytest.mark.runbook
def test_readmes_inline_tear_down_commands_parse_like_an_aws_block(tmp_path: Path, runbook_tools: None) -> None:
    """Checked as `bash aws` blocks are (the AWS CLI's own parser, ours for python -m); a misspelt option fails."""
    commands = teardown_inline_commands()
    assert len(commands) >= 8 and any(c.startswith("python -m cluster.empty_bucket") for c in commands)
    doc = tmp_path / "teardown.md"
    # Not --profil: the AWS CLI takes an option's unambiguous prefix.
    broken = commands[-1].replace(" --region ", " --regoin ")
    doc.write_text("".join(f"```bash aws\n{command}\n```\n\n" for command in [*commands, broken]))
    findings = check_doc(blocks_in(doc), tmp_path / "sandbox")
    assert len(findings) == 1 and "--regoin" in findings[0] and "the AWS CLI refused it" in findings[0], findings
