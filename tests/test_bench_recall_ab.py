"""scripts/bench_recall_ab.py runs end to end on two small kept vaults, real
daemons over their sockets, with the mixed load, and refuses a home that
holds no vault."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench_recall_ab.py"
sys.path.insert(0, str(ROOT / "scripts"))

from bench_recall import Daemon  # noqa: E402  # a script's module, beside it


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Short: a socket's path under pytest's tmp_path passes the 108 bytes allowed.
    path = Path(tempfile.mkdtemp(prefix="mv-ab-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _kept_home(workdir: Path, n: int) -> Path:
    """A home holding `n` memories with their own vectors, as `bench_recall.py --keep` leaves."""
    (workdir / "one").mkdir()
    daemon = Daemon(workdir / "one" / "home")
    vectors = np.random.default_rng(7).normal(size=(n, 384)).astype(np.float32)
    try:
        daemon.start()
        with daemon.client() as client:
            client.remember_batch([{"text": f"note {i} about the garden", "vector": v.tolist(),
                                    "topic": f"bench.{i}", "category": ["even", "odd"][i % 2]}
                                   for i, v in enumerate(vectors)])
    finally:
        daemon.stop()
    return daemon.home


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args],
                          env=dict(os.environ, HF_HUB_OFFLINE="1"),
                          capture_output=True, text=True, timeout=600)


def test_two_sides_are_timed_in_alternation(workdir: Path) -> None:
    home = _kept_home(workdir, 60)
    other = workdir / "two" / "home"
    shutil.copytree(home, other, symlinks=True)
    done = _run("--side", "a", str(ROOT), str(home), "--side", "b", str(ROOT), str(other),
                "--rounds", "2", "--queries", "4", "--mixed")
    assert done.returncode == 0, done.stderr
    rounds = [line.split("round ", 1)[1] for line in done.stderr.splitlines()
              if line.startswith("[bench] round ")]
    assert rounds == ["1 of 2: a", "1 of 2: b", "2 of 2: b", "2 of 2: a"]  # each begins anew
    figures = json.loads(done.stdout.splitlines()[-1])
    assert figures["rounds"] == 2 and set(figures["sides"]) == {"a", "b"}
    for side in figures["sides"].values():
        for kind in ("hybrid", "filtered", "vector"):
            assert 0 < side[f"{kind}_p50_ms"] <= side[f"{kind}_p99_ms"], kind
        assert len(side["start_s"]) == len(side["stop_s"]) == len(side["rss_mb"]) == 2
        assert len(side["steal_share"]) == 2 and all(0 <= s < 1 for s in side["steal_share"])
        assert side["calm_rounds"] == sum(s < 0.02 for s in side["steal_share"])
        assert ("hybrid_p99_calm_ms" in side) == (side["calm_rounds"] > 0)
        assert all(mb > 50 for mb in side["rss_mb"])
        assert len(side["mixed_1_per_s"]) == len(side["mixed_8_per_s"]) == 2
        assert all(rate > 0 for rate in side["mixed_1_per_s"] + side["mixed_8_per_s"])
    for path in (home, other):  # each round's mixed load remembered 320 memories
        daemon = Daemon(path)
        try:
            daemon.start()
            with daemon.client() as client:
                assert client.status().memory_count == 60 + 2 * 320
        finally:
            daemon.stop()
    assert "round 2 of 2: b" in done.stderr
    assert "filtered p50 ms" in done.stdout
    assert "mixed_8_per_s (median)" in done.stdout


def test_a_home_without_a_vault_is_refused(workdir: Path) -> None:
    empty = workdir / "empty"
    empty.mkdir()
    done = _run("--side", "a", str(ROOT), str(empty), "--side", "b", str(ROOT), str(empty))
    assert done.returncode == 2
    assert f"{empty}: no vault here" in done.stderr
    assert list(empty.iterdir()) == []
