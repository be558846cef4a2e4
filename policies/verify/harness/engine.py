"""The IAM engine (@cloud-copilot/iam-simulate) behind one Node process per batch.

`run_batch` sends every simulation of a batch to policies/verify/engine/simulate.mjs at once and returns
the parsed results; results are cached by the simulation's content, so a policy mutation only
re-evaluates the simulations it changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
ENTRY = REPO / "policies" / "verify" / "engine" / "simulate.mjs"

Decision = str  # "Allowed" | "ImplicitlyDenied" | "ExplicitlyDenied"
ALLOWED: Decision = "Allowed"
IMPLICITLY_DENIED: Decision = "ImplicitlyDenied"
EXPLICITLY_DENIED: Decision = "ExplicitlyDenied"


class EngineError(RuntimeError):
    """The engine could not run, or rejected a simulation (the message names which one and why)."""


@dataclass(frozen=True)
class StatementVerdict:
    """How one statement fared against a request."""

    sid: str
    policy: str
    effect: str
    action_match: bool
    resource_match: bool
    principal_match: str
    condition_match: str
    failed_conditions: tuple[str, ...]
    matched_conditions: tuple[str, ...]

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> StatementVerdict:
        return cls(
            sid=raw["sid"],
            policy=str(raw.get("policy") or ""),
            effect=raw["effect"],
            action_match=bool(raw["actionMatch"]),
            resource_match=bool(raw["resourceMatch"]),
            principal_match=str(raw["principalMatch"]),
            condition_match=str(raw["conditionMatch"]),
            failed_conditions=tuple(raw.get("failedConditions", ())),
            matched_conditions=tuple(raw.get("matchedConditions", ())),
        )

    def why_not(self) -> str:
        """Why a statement whose action and resource matched still did not apply."""
        reasons = []
        if self.principal_match == "NoMatch":
            reasons.append("principal")
        reasons.extend(self.failed_conditions)
        return ", ".join(reasons) or "no reason reported"


@dataclass(frozen=True)
class PolicyAnalysis:
    result: str
    allow: tuple[StatementVerdict, ...]
    deny: tuple[StatementVerdict, ...]
    near_misses: tuple[StatementVerdict, ...]

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> PolicyAnalysis:
        return cls(
            result=raw["result"],
            allow=tuple(StatementVerdict.parse(s) for s in raw.get("allow", ())),
            deny=tuple(StatementVerdict.parse(s) for s in raw.get("deny", ())),
            near_misses=tuple(StatementVerdict.parse(s) for s in raw.get("nearMisses", ())),
        )


@dataclass(frozen=True)
class EngineResult:
    decision: Decision
    ignored_context_keys: frozenset[str]
    resource_type: str | None
    analyses: Mapping[str, PolicyAnalysis]
    discovery: Mapping[str, Any] | None = None  # Discovery mode only: the conditions it could not decide

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> EngineResult:
        analyses = {name: PolicyAnalysis.parse(a) for name, a in raw["analyses"].items() if a is not None}
        return cls(
            decision=raw["overallResult"],
            ignored_context_keys=frozenset(raw.get("ignoredContextKeys", ())),
            resource_type=raw.get("resourceType"),
            analyses=analyses,
            discovery=raw.get("discovery"),
        )


@dataclass(frozen=True)
class LintResult:
    unknown_actions: tuple[str, ...]
    unknown_condition_keys: tuple[str, ...]


def simulation_key(simulation: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(simulation, sort_keys=True).encode()).hexdigest()


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise EngineError("node: not found on PATH; the policy engine needs Node.js 20 or later")
    if not (REPO / "node_modules" / "@cloud-copilot" / "iam-simulate").is_dir():
        raise EngineError("node_modules/@cloud-copilot/iam-simulate: not installed; run `make setup` (npm ci)")
    return node


def _start(payload: Mapping[str, Any]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [_node(), str(ENTRY)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    return process, json.dumps(payload)


def _finish(process: subprocess.Popen[str], payload: str | None) -> dict[str, Any]:
    stdout, stderr = process.communicate(payload, timeout=900)
    if process.returncode != 0:
        tail = stderr.strip().splitlines()[-1:] or ["no output"]
        raise EngineError(f"{ENTRY.name}: exited with {process.returncode}: {tail[0]}")
    return json.loads(stdout)


def _invoke(payload: Mapping[str, Any]) -> dict[str, Any]:
    process, text = _start(payload)
    return _finish(process, text)


def _invoke_parallel(payloads: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Several batches at once, one Node process each (the engine is single-threaded)."""
    started = [_start(payload) for payload in payloads]
    # Feed every process before reading any, so that they all compute at the same time.
    threads = []
    results: list[dict[str, Any] | BaseException] = [RuntimeError("not run")] * len(started)

    def finish(index: int) -> None:
        try:
            results[index] = _finish(*started[index])
        except BaseException as error:  # re-raised below, in the caller's thread
            results[index] = error

    for index in range(len(started)):
        thread = threading.Thread(target=finish, args=(index,))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


# Batches larger than this are split over PARALLEL_PROCESSES Node processes.
SPLIT_ABOVE = 1500
PARALLEL_PROCESSES = max(1, min(2, os.cpu_count() or 1))


@dataclass
class Engine:
    """Runs simulations in batches and remembers every result by the simulation's content."""

    cache: dict[str, EngineResult] = field(default_factory=dict)
    processes: int = 0
    simulations_run: int = 0
    version: str | None = None

    def run_batch(self, simulations: Mapping[str, Mapping[str, Any]]) -> dict[str, EngineResult]:
        """`simulations`: id -> iam-simulate Simulation. One Node process for everything not cached."""
        keys = {sid: simulation_key(sim) for sid, sim in simulations.items()}
        results = self.run_keyed({keys[sid]: sim for sid, sim in simulations.items()}, names=keys)
        return {sid: results[keys[sid]] for sid in simulations}

    def run_keyed(
        self, simulations: Mapping[str, Mapping[str, Any]], names: Mapping[str, str] | None = None
    ) -> dict[str, EngineResult]:
        """`simulations`: simulation_key(sim) -> sim. `names` (id -> key) only makes errors readable."""
        missing = {key: sim for key, sim in simulations.items() if key not in self.cache}
        if missing:
            entries = [{"id": key, "simulation": sim} for key, sim in missing.items()]
            chunks = PARALLEL_PROCESSES if len(entries) > SPLIT_ABOVE else 1
            responses = _invoke_parallel([{"simulations": entries[i::chunks]} for i in range(chunks)])
            self.processes += chunks
            self.simulations_run += len(missing)
            self.version = responses[0]["engine"]["version"]
            raw_results = [raw for response in responses for raw in response["results"]]
            errors = [r for r in raw_results if r["resultType"] != "single"]
            if errors:
                by_key = {key: name for name, key in (names or {}).items()}
                first = errors[0]
                raise EngineError(
                    f"simulation {by_key.get(first['id'], first['id'])}: rejected by the engine: "
                    f"{json.dumps(first.get('errors', {}), sort_keys=True)[:400]}"
                )
            for raw in raw_results:
                self.cache[raw["id"]] = EngineResult.parse(raw)
        return {key: self.cache[key] for key in simulations}

    def lint(self, actions: Iterable[str], condition_keys: Iterable[str]) -> LintResult:
        response = _invoke({"lint": {"actions": sorted(set(actions)), "conditionKeys": sorted(set(condition_keys))}})
        self.processes += 1
        lint = response["lint"]
        return LintResult(tuple(lint["unknownActions"]), tuple(lint["unknownConditionKeys"]))


def run_discovery(simulation: Mapping[str, Any]) -> EngineResult:
    """One simulation in Discovery mode (what Strict mode cannot see); for the engine's own tests."""
    response = _invoke({"simulations": [{"id": "discovery", "simulation": simulation, "mode": "Discovery"}]})
    raw = response["results"][0]
    if raw["resultType"] != "single":
        raise EngineError(f"simulation discovery: rejected by the engine: {json.dumps(raw.get('errors'))[:400]}")
    return EngineResult.parse(raw)


def policy_actions_and_keys(documents: Sequence[Mapping[str, Any]]) -> tuple[set[str], set[str]]:
    """Every action and condition key named in `documents` (for the lint the engine lacks)."""
    actions: set[str] = set()
    keys: set[str] = set()
    for document in documents:
        statements = document.get("Statement", [])
        for statement in statements if isinstance(statements, list) else [statements]:
            for field_name in ("Action", "NotAction"):
                value = statement.get(field_name)
                if value is not None:
                    actions.update([value] if isinstance(value, str) else value)
            for block in statement.get("Condition", {}).values():
                keys.update(block)
    return actions, keys
