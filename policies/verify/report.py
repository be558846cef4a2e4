"""`python -m policies.verify.report`: the access matrix as a reviewer reads it (markdown).

Reads the synthesized templates (cdk.out), evaluates every case of the matrix and every mutant,
and writes who may do what, through which access point, and why each denial holds: which layer,
which statement. Exits 1 when a case does not hold, the mutation score is below 100 %, or the
templates drift from the policy builders.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from policies.principals import PRINCIPALS
from policies.verify.extract import ExtractedPolicies, ExtractionError, drift_from_builders, extract_from_assembly
from policies.verify.harness.engine import ALLOWED, Engine, EngineError
from policies.verify.harness.layers import LAYER_ORDER
from policies.verify.harness.model import ApiRequest, KmsRequest, S3Request
from policies.verify.matrix import Case, CaseResult, build_cases, evaluate, matrix_context, policy_set
from policies.verify.mutations import MutationReport
from policies.verify.mutations import run as run_mutations
from spec import DeploymentSpec, load_spec
from spec.cli import OneLineParser, user_errors
from spec.errors import UserError

# The shared families' sections; each principal with a family of its own adds its section (policies/principals.py).
SHARED_GROUP_TITLES = {
    "grant": "Dataset grants and their nearest denials",
    "perimeter": "Perimeter threats",
    "platform": "What the nodes need through the endpoint, and where it stops",
    "endpoints": "Interface endpoints: what the platform calls, and the ways out they close",
    "guardrails": "Guardrail SCPs (policies/guardrails.py)",
}
GROUP_TITLES = {
    **SHARED_GROUP_TITLES,
    **{entry.case_group: entry.case_group_title for entry in PRINCIPALS if entry.case_group},
}
LAYER_NOTES = {
    "identity": "the caller's identity policies (compute account), on the requested ARN",
    "scp": "the organization's service control policies (spec perimeter.scps)",
    "endpoint": "the S3 gateway endpoint policy, on the requested ARN",
    "endpoint-bucket": "the same endpoint policy, on the bucket ARN behind an access point",
    "interface-endpoint": "the policy of the interface endpoint a call to another service passes (logs, ecr, sts, ...)",
    "access-point": "the access point policy (data account)",
    "bucket": "the bucket policy, on the bucket ARN (access point keys decided by the harness)",
    "rcp": "the organization's resource control policies (spec perimeter.rcps)",
    "kms-identity": "the caller's identity policies, on the kms call S3 makes for it",
    "key": "the dataset key's policy, on that kms call",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _target(case: Case) -> str:
    request = case.request
    if isinstance(request, KmsRequest):
        via = f" via {request.via_service}" if request.via_service else " (direct)"
        context = f", for `{request.s3_arn_context}`" if request.s3_arn_context else ""
        return f"`{request.key_arn.rsplit(':', 1)[-1]}`{via}{context}"
    if isinstance(request, ApiRequest):
        path = f"the {request.endpoint} endpoint" if request.endpoint else "no VPC endpoint"
        extra = "".join(f", {k} = `{v}`" for k, v in request.context)
        return f"`{request.resource}` through {path}{extra}"
    assert isinstance(request, S3Request)
    where = f"`{request.key}`" if request.key is not None else f"prefix `{request.list_prefix or ''}`"
    where += "".join(f" ({k.removeprefix('s3:x-amz-')}: `{v}`)" for k, v in request.headers)
    through = f"access point `{request.access_point.name}`" if request.access_point else f"bucket `{request.bucket}`"
    network = []
    if not request.network.tls:
        network.append("no TLS")
    if request.network.origin != "VPC":
        network.append(f"{request.network.origin} origin")
    if request.network.other_endpoint is not None:
        network.append(f"through another S3 endpoint `{request.network.other_endpoint}`")
    elif not request.network.through_endpoint:
        network.append("not through the VPC endpoint")
    suffix = f" ({', '.join(network)})" if network else ""
    return f"{where} through {through}{suffix}"


def _why(result: CaseResult) -> str:
    if result.decision == ALLOWED:
        return "allowed by " + ", ".join(
            f"{layer.layer} ({', '.join(layer.allow_sids) or 'no statement needed'})" for layer in result.layers
        )
    parts = []
    for layer in sorted(result.layers, key=lambda layer: LAYER_ORDER.index(layer.layer)):
        if layer.decision == ALLOWED:
            continue
        kind = "explicit Deny" if layer.deny_sids else "no Allow"
        parts.append(f"**{layer.layer}** ({kind}): {'; '.join(layer.reasons)}")
    return "<br>".join(parts)


def _case_table(results: Sequence[CaseResult]) -> list[str]:
    lines = [
        "| Case | Who | Action | What, through which path | Decision | Why |",
        "|---|---|---|---|---|---|",
    ]
    for result in results:
        case = result.case
        layers = len(result.denials)
        decision = "Allowed" if result.decision == ALLOWED else f"Denied ({layers} layer{'s' if layers > 1 else ''})"
        mark = "" if result.as_expected else " **NOT AS EXPECTED**"
        lines.append(
            f"| `{case.case_id}` | {_cell(case.request.principal.label)} | `{case.request.action}` | "
            f"{_cell(_target(case))} | {decision}{mark} | {_cell(_why(result))} |"
        )
    return lines


def _mutation_section(report: MutationReport) -> list[str]:
    lines = [
        "## Mutation testing",
        "",
        f"**{report.summary()}.** Each mutant weakens one policy in one place; it is killed when at least one",
        "case of the matrix no longer holds (its decision, or the set of layers and statements that deny it).",
        "",
        "| Policy | Operator | Mutants | Killed |",
        "|---|---|---|---|",
    ]
    counts = Counter((r.mutation.policy_id, r.mutation.operator) for r in report.results)
    killed = Counter((r.mutation.policy_id, r.mutation.operator) for r in report.results if r.killed)
    for (policy_id, operator), count in sorted(counts.items()):
        lines.append(f"| `{policy_id}` | {operator} | {count} | {killed[(policy_id, operator)]} |")
    lines += ["", "Not generated, because such a mutant cannot change any decision:", ""]
    lines += [f"- {rule}" for rule in report.equivalence_rules]
    lines += ["", "<details><summary>Every mutant and the first case that caught it</summary>", ""]
    lines += ["| Policy | Mutation | Caught by |", "|---|---|---|"]
    for result in report.results:
        caught = f"`{result.killed_by[0]}` (+{len(result.killed_by) - 1})" if result.killed else "**SURVIVED**"
        lines.append(f"| `{result.mutation.policy_id}` | {_cell(result.mutation.description)} | {caught} |")
    lines += ["", "</details>", ""]
    return lines


def render(
    spec: DeploymentSpec,
    extracted: ExtractedPolicies,
    results: Sequence[CaseResult],
    mutations: MutationReport | None,
    engine_version: str | None,
) -> str:
    allowed = sum(r.decision == ALLOWED for r in results)
    failing = [r for r in results if not r.as_expected]
    drift = drift_from_builders(extracted, spec)
    lines = [
        f"# Access matrix: {spec.name}",
        "",
        "Generated by `make policy-report` (`python -m policies.verify.report`) from the synthesized templates; do not edit.",
        f"Engine: @cloud-copilot/iam-simulate {engine_version or 'unknown'}. See docs/security.md for the model.",
        "",
        f"- **{len(results)} cases**: {allowed} allowed, {len(results) - allowed} denied; "
        + ("all as expected." if not failing else f"**{len(failing)} not as expected.**"),
        f"- Denied on two or more layers: {sum(len(r.denials) >= 2 for r in results if r.denials)} of "
        f"{len(results) - allowed}.",
        f"- Template vs builders: {'no drift' if not drift else '; '.join(drift)}.",
    ]
    if mutations is not None:
        lines.append(f"- {mutations.summary()}.")
    lines += ["", "## Layers", "", "| Layer | What it evaluates |", "|---|---|"]
    lines += [f"| {layer} | {note} |" for layer, note in LAYER_NOTES.items()]
    lines += [
        "",
        "Each layer is a separate engine simulation with every other policy neutral; a request is allowed only",
        "when every layer allows. 'no Allow' is an implicit denial (no statement grants it, the statements",
        "that came closest are named with what failed); 'explicit Deny' names the Deny statement.",
        "",
    ]
    for group, title in GROUP_TITLES.items():
        members = [r for r in results if r.case.group == group]
        if members:
            lines += [f"## {title}", "", *_case_table(members), ""]
    if mutations is not None:
        lines += _mutation_section(mutations)
    return "\n".join(lines).rstrip() + "\n"


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cdk-out", type=Path, default=Path("cdk.out"), help="the synthesized cloud assembly")
    parser.add_argument("--spec", default=None, help="spec file (default: the embedded default spec)")
    parser.add_argument("--output", type=Path, default=None, help="markdown file to write (default: stdout)")
    parser.add_argument("--no-mutations", action="store_true", help="skip mutation testing (faster)")
    args = parser.parse_args(argv)
    try:
        spec = load_spec(args.spec)
        extracted = extract_from_assembly(args.cdk_out, spec)
        context = matrix_context(spec, extracted)
        policies = policy_set(extracted, spec)
        cases = build_cases(spec, context)
        engine = Engine()
        if args.no_mutations:
            mutations, results = None, evaluate(cases, policies, context, engine)
        else:
            mutations, results = run_mutations(cases, policies, context, engine)
    except FileNotFoundError as error:
        raise UserError(f"{error.filename}: not found; run `make synth` first") from None
    except (ExtractionError, EngineError) as error:
        raise UserError(str(error)) from None
    text = render(spec, extracted, results, mutations, engine.version)
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
    failing = [r.case.case_id for r in results if not r.as_expected]
    problems = []
    if failing:
        problems.append(f"{len(failing)} cases not as expected: {', '.join(failing[:5])}")
    if mutations is not None and mutations.score < 100.0:
        problems.append(
            f"{mutations.summary()}; survivors: {[r.mutation.description for r in mutations.survivors][:5]}"
        )
    problems += drift_from_builders(extracted, spec)
    summary = f"{len(results)} cases" + (f", {mutations.summary()}" if mutations else "")
    print(summary + (f" -> {args.output}" if args.output else ""), file=sys.stderr)
    for problem in problems:
        print(f"policy report: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
