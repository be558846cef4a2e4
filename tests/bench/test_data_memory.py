"""The peak-memory benchmark of the dataset writer measures the writing process, not the bench that starts it."""

from pathlib import Path

import numpy as np

from bench.data_memory import DOCUMENT_TOKENS, peak_rss_bytes
from training.data.indexed import idx_path, read_index

_PARENT_PEAK_BYTES = 512 << 20


def test_a_child_reports_its_own_peak_not_the_benchs(tmp_path: Path) -> None:
    # Linux carries ru_maxrss across fork and exec: a child reading it would report this process's peak.
    ballast = np.ones(_PARENT_PEAK_BYTES, dtype=np.uint8)
    prefix = tmp_path / "small_text_document"
    peak = peak_rss_bytes("ours", 1_000, prefix)
    assert int(ballast[-1]) == 1
    assert 0 < peak < _PARENT_PEAK_BYTES // 2
    index = read_index(idx_path(prefix))
    assert (index.document_count, index.token_count) == (1_000, 1_000 * (DOCUMENT_TOKENS + 1))
