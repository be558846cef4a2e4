import json
from pathlib import Path

from bench.machine import Machine
from bench.report import GPU_ROWS_NAME, gpu_section, markdown_document, read_gpu_rows, text_table, write_reports
from bench.result import BenchResult

MACHINE = Machine(
    date="2026-11-21 12:00 UTC",
    cpu_model="AMD EPYC",
    cores=2,
    memory_gib=23.4,
    os="Debian GNU/Linux 12 (bookworm)",
    kernel="6.1.0",
    python="3.11.2",
    torch="2.13.0",
    numpy="2.4.6",
    commit="abc123",
)
RESULTS = [
    BenchResult("loader_tokens_per_s", 5e8, "tokens/s", "raw", 1e9, 0.5, ">= 0.9", "8 x 4096", ["profile line"]),
    BenchResult("synth_seconds", 16.3, "s", "empty", 8.2, 1.988, "", "cdk synth"),
]


def test_the_json_has_every_result_with_its_baseline_and_ratio(tmp_path: Path) -> None:
    write_reports(RESULTS, MACHINE, 312.0, tmp_path / "b.json", tmp_path / "b.md")
    document = json.loads((tmp_path / "b.json").read_text())
    assert document["bench_seconds"] == 312.0
    assert document["machine"]["cpu_model"] == "AMD EPYC"
    first = document["results"][0]
    assert {k: first[k] for k in ("name", "value", "baseline_name", "baseline_value", "ratio", "holds")} == {
        "name": "loader_tokens_per_s",
        "value": 5e8,
        "baseline_name": "raw",
        "baseline_value": 1e9,
        "ratio": 0.5,
        "holds": False,
    }
    assert document["results"][1]["holds"] is None


def test_the_markdown_names_the_machine_the_duration_and_every_figure() -> None:
    text = markdown_document(RESULTS, MACHINE, 312.0, ["Shared machine."])
    assert "AMD EPYC, 2 cores, 23.4 GiB memory, Debian GNU/Linux 12 (bookworm)" in text
    assert "Commit: abc123" in text and "5.2 minutes (312 s" in text
    assert "| loader_tokens_per_s | 500.0 Mtokens/s | raw | 1,000.0 Mtokens/s | 0.500 | >= 0.9 | **no** |" in text
    assert "| synth_seconds | 16.300 s | empty | 8.200 s | 1.988 | - | - |" in text
    assert "### loader_tokens_per_s" in text and "profile line" in text
    assert "No row yet" in text


GPU_ROW = {
    "date": "2026-11-26T16:09:30+00:00",
    "gpu": "NVIDIA H100 80GB HBM3",
    "gpus": 1,
    "commit": "1a762d5",
    "torch": "2.11.0+cu130",
    "micro_batch": 4,
    "seq_len": 4096,
    "ac": "none",
    "steps": 40,
    "warmup": 10,
    "flops_per_token": 9.03e9,
    "peak_flops": 989e12,
    "results": [
        {
            "framework": "ours",
            "compiled": True,
            "steps_timed": 30,
            "tokens_per_s_per_gpu": 51503.8,
            "mfu": 0.47,
            "own_mfu": 0.47,
            "peak_memory_gib": 42.53,
        }
    ],
    "torchtitan_skipped": "torch 2.11 lacks DataParallelMeshDims",
}


def test_every_recorded_gpu_run_is_a_table_row_and_a_missing_peer_says_why(tmp_path: Path) -> None:
    rows = tmp_path / GPU_ROWS_NAME
    rows.write_text(json.dumps(GPU_ROW) + "\n" + json.dumps({**GPU_ROW, "commit": "def456"}) + "\n")
    text = gpu_section(read_gpu_rows(rows))
    assert (
        "| 2026-11-26 | NVIDIA H100 80GB HBM3 x1 | 1a762d5 | 2.11.0+cu130 | ours | bf16 | true | 51,504 | 47.0% |"
        in text
    )
    assert "| def456 |" in text and "No row yet" not in text
    assert "torchtitan did not run: torch 2.11 lacks DataParallelMeshDims." in text
    assert read_gpu_rows(tmp_path / "absent.jsonl") == []


def test_write_reports_takes_the_gpu_rows_beside_the_markdown(tmp_path: Path) -> None:
    (tmp_path / GPU_ROWS_NAME).write_text(json.dumps(GPU_ROW) + "\n")
    write_reports(RESULTS, MACHINE, 312.0, tmp_path / "b.json", tmp_path / "b.md")
    assert "| ours | bf16 | true | 51,504 |" in (tmp_path / "b.md").read_text()


def test_fp8_results_are_compared_with_the_same_runs_compiled_bf16() -> None:
    bf16 = {**GPU_ROW["results"][0], "precision": "bf16", "final_loss": 6.6698}  # type: ignore[dict-item]
    fp8 = {**bf16, "precision": "fp8-tensorwise", "tokens_per_s_per_gpu": 62504.4, "peak_memory_gib": 37.69,
           "final_loss": 6.6822}  # fmt: skip
    eager = {**bf16, "compiled": False, "tokens_per_s_per_gpu": 1.0}
    text = gpu_section([{**GPU_ROW, "results": [eager, bf16, fp8]}])
    assert "| fp8-tensorwise | true | 62,504 |" in text and "| 37.7 | 6.6822 | 30 |" in text
    assert (
        "  - fp8-tensorwise against bf16, both compiled: +21.4% tokens/s, -11.4% peak memory, final loss 6.6822 "
        "against 6.6698 (+0.0124)." in text
    )


def test_the_committed_benchmarks_page_shows_every_committed_gpu_row() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs"
    page = (docs / "benchmarks.md").read_text()
    section = page[page.index("## GPU: our trainer against torchtitan") :]
    assert section == gpu_section(read_gpu_rows(docs / GPU_ROWS_NAME))


def test_the_text_table_aligns_columns_without_markdown_emphasis() -> None:
    lines = text_table(RESULTS).splitlines()
    assert lines[0].split() == ["benchmark", "ours", "baseline", "baseline", "value", "ratio", "target", "holds"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].endswith("no") and "**" not in lines[2]
    assert lines[2].index("0.500") == lines[0].index("ratio") == lines[3].index("1.988")
