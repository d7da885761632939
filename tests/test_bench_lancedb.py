"""scripts/bench_lancedb.py runs end to end at a tiny size: a real daemon over
its socket and LanceDB in memory, on scripts/bench_recall.py's vectors, and
its last line is the JSON the decision record's figures come from."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench_lancedb.py"


def test_the_comparison_runs_at_a_tiny_size() -> None:
    # A short temporary directory of its own: the daemon's socket path under
    # pytest's tmp_path passes the 108 bytes a unix socket's name may have.
    tmp = Path(tempfile.mkdtemp(prefix="mv-"))
    try:
        done = subprocess.run([sys.executable, str(SCRIPT), "--n", "300", "--queries", "10"],
                              env=dict(os.environ, TMPDIR=str(tmp), HF_HUB_OFFLINE="1"),
                              capture_output=True, text=True, timeout=600)
        left = list(tmp.glob("memvault-bench-*"))  # torch leaves its own
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.splitlines()[-1])
    assert figures["n"] == 300
    # Below 20k memories the daemon scans exactly; so does a flat table.
    assert figures["memvault_recall_at_10"] == 1.0
    for kind in ("memvault_cached", "memvault_filtered", "memvault_vector", "lancedb_flat",
                 "lancedb_indexed", "lancedb_tuned", "lancedb_indexed_filtered",
                 "lancedb_after_adds"):
        assert 0 < figures[f"{kind}_p50_ms"] <= figures[f"{kind}_p99_ms"], kind
        assert figures["samples"][kind] == 10, kind
    assert 0 <= figures["lancedb_recall_at_10"] <= 1 and figures["lancedb_build_s"] > 0
    assert "LanceDB IVF_HNSW_SQ" in done.stdout
    assert left == [], "the temporary directory was left behind"
