"""The model on sentence-transformers and torch: the fallback runtime, and
the source of the ONNX export (`onnx_cache.py`). Imported only when one of
them is needed: torch alone takes ~4 s and ~300 MB to import."""

from __future__ import annotations

from typing import Any


def sentence_transformer(path: str) -> Any:
    """The model on sentence-transformers and torch, set up as the daemon runs
    it (the torch runtime, and the export to ONNX)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    # One intra-op thread. Two (torch's default here) make every forward pass
    # wait for whichever thread was descheduled: with the machine busy (load 6
    # on 2 cores) a query took 516 ms p50 on two threads against 45 ms on one,
    # and batches ran 24/s against 71/s. The serving threads and the scan need
    # the other core anyway.
    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # log, no tty
    return SentenceTransformer(path, device="cpu")
