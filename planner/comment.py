"""The job-comment contract between submission and the report: what `llm-submit` planned, in the job's comment.

`launch.submit` writes `llm-plan:v1,backend=...,usd=...,hours=...,steps=...` as `#SBATCH --comment=`; Slurm stores it
(AccountingStoreFlags=job_comment) and sacct returns it as Comment, where `llm-report` (planner.report) reads it back.
A module of its own so the submitter need not import the report command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PLAN_PREFIX = "llm-plan:v1"
_PLAN_KEYS = ("backend", "usd", "hours", "steps")


@dataclass(frozen=True)
class Plan:
    usd: float
    hours: float
    steps: int | None = None
    # The backend that ran and whose speed was planned: a slurm.backends.BACKENDS name (fsdp, nemo2, bridge, neuron);
    # `nemo` in comments written before NeMo 2 and Megatron Bridge were told apart; None in older ones still.
    backend: str | None = None


def plan_comment(plan: Plan) -> str:
    """The job comment launch.submit writes (and sacct returns):
    `llm-plan:v1,backend=bridge,usd=12.5,hours=3.2,steps=1000`.

    No spaces, so it needs no quoting in an `#SBATCH --comment=` line."""
    backend = f",backend={plan.backend}" if plan.backend is not None else ""
    steps = f",steps={plan.steps}" if plan.steps is not None else ""
    return f"{PLAN_PREFIX}{backend},usd={plan.usd:.6g},hours={plan.hours:.6g}{steps}"


def parse_plan(comment: str) -> Plan | None:
    """The plan in a job comment; None when the comment carries none (or a malformed one)."""
    if not comment.startswith(PLAN_PREFIX):
        return None
    values: dict[str, str] = {}
    for item in re.split(r"[\s,]+", comment[len(PLAN_PREFIX) :].strip(" ,")):
        key, _, value = item.partition("=")
        if key in _PLAN_KEYS:
            values[key] = value
    try:
        steps = int(values["steps"]) if "steps" in values else None
        return Plan(float(values["usd"]), float(values["hours"]), steps, values.get("backend") or None)
    except (KeyError, ValueError):
        return None
