"""Regenerate docs/planner-vs-published.png and the predicted-vs-published table in docs/planner.md.

python -m planner.plot [--png PATH] [--doc PATH]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from planner.compare import Comparison, compare_all
from slurm.backends import STACKS
from spec.cli import OneLineParser, user_errors

TABLE_START = "<!-- predicted-vs-published:start (python -m planner.plot) -->"
TABLE_END = "<!-- predicted-vs-published:end -->"
DEFAULT_PNG = Path("docs/planner-vs-published.png")
DEFAULT_DOC = Path("docs/planner.md")

PRIMARY = {"fsdp": "tokens_per_s_per_device", "megatron": "tflops_per_device", "trainium": "sequences_per_s"}
PRIMARY |= {"ddp-scaling": "speedup", "fms-fsdp": "tokens_per_s_per_device", "llm-foundry": "tokens_per_s_per_device"}
PRIMARY |= {"megatron-bridge": "tokens_per_s_per_device", "torchtitan": "tokens_per_s_per_device"}
PRIMARY |= {"ours-gpu": "tokens_per_s_per_device", "llama3-paper": "mfu", "nemo-24.07": "tokens_per_s_per_device"}
PRIMARY |= {"bloom": "tokens_per_s_per_device", "megatron-readme": "mfu"}
LABELS = {
    "fsdp": "PyTorch FSDP blog, FSDP/HSDP: tokens/s/GPU",
    "fms-fsdp": "fms-fsdp README FSDP/HSDP: tokens/s/GPU",
    "llm-foundry": "llm-foundry FSDP: tokens/s/GPU",
    "megatron": "Megatron-LM paper: TFLOP/s/GPU",
    "trainium": "Trainium NeoX/Pythia blog, trn1: sequences/s",
    "ddp-scaling": "SageMaker scaling talk, DDP: speedup",
    "megatron-bridge": "Megatron-Bridge, DGX-H100 FP8: tokens/s/GPU",
    "torchtitan": "torchtitan H100, bf16/float8: tokens/s/GPU",
    "ours-gpu": "this repo's GPU benchmarks, 1 H100/H200: tokens/s/GPU",
    "llama3-paper": "Llama 3 paper, 8K-16K H100: MFU",
    "nemo-24.07": "NeMo 24.07, DGX-H100 FP8: tokens/s/GPU",
    "bloom": "BLOOM 176B, 384 A100: tokens/s/GPU",
    "megatron-readme": "Megatron-LM README, H100: MFU",
}
# Colour says the backend (each has its own fitted efficiency); the marker says the source.
# matplotlib's default colour cycle (C0 tab:blue, C1 tab:orange, ...) in the order of slurm.backends.STACKS: a new
# stack gets the next colour.
BACKEND_COLORS: dict[str, str] = {stack: f"C{index}" for index, stack in enumerate(STACKS)}
MARKERS = dict(zip(PRIMARY, "osD^v<>PX*hpd", strict=True))


def _format(value: float) -> str:
    if value >= 1e5:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def error_summary(comparisons: Sequence[Comparison]) -> list[str]:
    """Mean and max absolute error: fitted vs held out, then per table."""

    def stats(chosen: list[Comparison]) -> str:
        errors = [abs(c.error) for c in chosen]
        return f"mean {sum(errors) / len(errors):.1%}, max {max(errors):.1%} ({len(errors)} values)"

    lines = [
        f"- fitted rows: {stats([c for c in comparisons if not c.row.holdout])}",
        f"- held-out rows: {stats([c for c in comparisons if c.row.holdout])}",
    ]
    for backend in BACKEND_COLORS:
        chosen = [c for c in comparisons if c.row.backend == backend]
        if chosen:
            lines.append(f"- backend {backend}: {stats(chosen)}")
    for table in PRIMARY:
        chosen = [c for c in comparisons if c.row.table == table]
        if chosen:
            lines.append(f"- {LABELS[table].split(':')[0]}: {stats(chosen)}")
    hsdp = [c for c in comparisons if c.row.layout == "hsdp"]
    if hsdp:
        lines.append(f"- HSDP rows (all held out): {stats(hsdp)}")
    return lines


def markdown_table(comparisons: Sequence[Comparison] | None = None) -> str:
    comparisons = compare_all() if comparisons is None else comparisons
    lines = [
        "Absolute error of predicted against published:",
        "",
        *error_summary(comparisons),
        "",
        "| row | backend | published (as printed) | metric | published | predicted | error | fitted / held out |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for c in comparisons:
        words = c.row.words.replace("|", "/")
        lines.append(
            f"| {c.row.key} | {c.row.backend} | {words} | {c.metric} | {_format(c.published)} | "
            f"{_format(c.predicted)} | {c.error:+.1%} | {'held out' if c.row.holdout else 'fitted'} |"
        )
    return "\n".join(lines)


def update_doc(doc: Path, table: str) -> bool:
    """Replace the block between the markers; False when the markers are missing."""
    text = doc.read_text(encoding="utf-8")
    if TABLE_START not in text or TABLE_END not in text:
        return False
    head, rest = text.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    doc.write_text(f"{head}{TABLE_START}\n{table}\n{TABLE_END}{tail}", encoding="utf-8")
    return True


def plot(path: Path, comparisons: Sequence[Comparison] | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    comparisons = compare_all() if comparisons is None else comparisons
    figure, (scatter, ratios) = plt.subplots(1, 2, figsize=(16, 7), gridspec_kw={"width_ratios": [1, 1.6]})

    for table, metric in PRIMARY.items():
        rows = [c for c in comparisons if c.row.table == table and c.metric == metric]
        for held in (False, True):
            chosen = [c for c in rows if c.row.holdout == held]
            if chosen:
                color = BACKEND_COLORS[chosen[0].row.backend]
                scatter.scatter(
                    [c.published for c in chosen],
                    [c.predicted for c in chosen],
                    marker=MARKERS[table],
                    facecolors="none" if held else color,
                    edgecolors=color,
                    label=f"{chosen[0].row.backend}: {LABELS[table]} ({'held out' if held else 'fitted'})",
                )
    low = min(min(c.published, c.predicted) for c in comparisons if c.metric in PRIMARY.values()) / 1.5
    high = max(max(c.published, c.predicted) for c in comparisons if c.metric in PRIMARY.values()) * 1.5
    scatter.plot([low, high], [low, high], color="black", linewidth=0.8)
    for factor in (0.85, 1.15):
        scatter.plot([low, high], [low * factor, high * factor], color="grey", linewidth=0.6, linestyle="--")
    scatter.set(xscale="log", yscale="log", xlim=(low, high), ylim=(low, high))
    scatter.set(xlabel="published", ylabel="predicted", title="Predicted vs published (dashed: ±15 %)")
    scatter.legend(fontsize=6, loc="lower right")

    # Right: every value, the backends side by side (fsdp, nemo, neuron), each in its own band.
    ordered = sorted(comparisons, key=lambda c: list(BACKEND_COLORS).index(c.row.backend))
    positions = list(range(len(ordered)))
    colors = [BACKEND_COLORS[c.row.backend] for c in ordered]
    ratios.scatter(positions, [c.ratio for c in ordered], c=colors, s=14)
    for position, c in zip(positions, ordered, strict=True):
        if c.row.holdout:
            ratios.scatter([position], [c.ratio], facecolors="none", edgecolors="black", s=40, linewidths=0.6)
    spread = max(abs(c.error) for c in comparisons)
    top = 1 + max(0.2, spread + 0.03)
    for backend in BACKEND_COLORS:
        mine = [p for p, c in zip(positions, ordered, strict=True) if c.row.backend == backend]
        if mine:
            ratios.axvline(mine[-1] + 0.5, color="grey", linewidth=0.6)
            ratios.text((mine[0] + mine[-1]) / 2, top * 0.98, backend, ha="center", va="top",
                        color=BACKEND_COLORS[backend], fontsize=9)  # fmt: skip
    comparisons = ordered
    ratios.axhline(1.0, color="black", linewidth=0.8)
    ratios.axhspan(0.85, 1.15, color="grey", alpha=0.15)
    ratios.set_xticks(positions, [f"{c.row.key} {c.metric}" for c in comparisons], rotation=90, fontsize=5)
    ratios.set_ylim(1 - max(0.2, spread + 0.03), top)
    ratios.set(ylabel="predicted / published", title="Every compared value by backend (ringed: held out, band: ±15 %)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=130)
    plt.close(figure)
    return path


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m planner.plot", description=__doc__.split("\n")[1])
    parser.add_argument("--png", type=Path, default=DEFAULT_PNG)
    parser.add_argument("--doc", type=Path, default=DEFAULT_DOC)
    options = parser.parse_args(argv)
    comparisons = compare_all()
    print(f"wrote {plot(options.png, comparisons)}")
    if options.doc.exists() and update_doc(options.doc, markdown_table(comparisons)):
        print(f"updated the table in {options.doc}")
    else:
        print(f"{options.doc}: no table markers, not updated", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
