"""The embedding model on ONNX Runtime, encoding exactly as sentence-transformers.

Why: on the 2-core development machine, one thread, a single query took 5.7 ms
p50 / 6.2 ms p99 against 14.7 / 19.6 ms through `SentenceTransformer.encode`
(88% of which was MKL's fp32 GEMM on 17 x 384 matrices); and this module imports
neither torch nor transformers, so a daemon whose model is already exported
(`onnx_cache.py`) starts without the ~4 s torch import. Figures:
docs/benchmarks.md ("Model runtime: ONNX Runtime").

Reproduced of `SentenceTransformer.encode(texts, normalize_embeddings=True)`,
as the model's own files describe it, and nothing more: anything else raises
`Unsupported`, and the embedder stays on torch, saying why.

- modules.json: a Transformer, a Pooling, optionally a Normalize;
- the Transformer's `tokenizer.json`, read by `tokenizers`, cut at
  `max_seq_length` (sentence_bert_config.json), padded on the right to the
  longest text of the batch;
- each token's row of the word embeddings, read from the export's table
  (`word_table.py`), fed to the graph as `inputs_embeds`;
- the Pooling's config.json: the mean over the attention mask, or the CLS token;
- L2 normalisation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type stubs or py.typed
from tokenizers import Tokenizer

from memvaultd.embedding.word_table import WordTable
from memvaultd.index.heap import trim_heap
from memvaultd.model.vector import Vector

# Model input -> the `tokenizers.Encoding` field that feeds it; the token ids
# themselves reach the graph as their rows of the word table, `EMBEDS`.
INPUTS = {"attention_mask": "attention_mask", "token_type_ids": "type_ids"}
EMBEDS = "inputs_embeds"
# Chunks padded to more tokens than this (rows x longest text) give their
# buffers back after running (`OnnxModel`). Below it the arena keeps what such
# a chunk needs, 22 MB after 32 texts of 31 tokens, for the next chunk to
# reuse: giving back after every chunk cost 256 texts of ~16 tokens 7% more
# CPU time (0.94-1.00 s against 0.89-0.92), with this bound 0.88-0.91.
GIVE_BACK_TOKENS = 1024
# The last chunk of a burst (`idle`: nothing else queued for the model) gives
# back too when it is more than one text at the model's longest: 256 short
# texts left the process 27 MB larger for good, 5 MB with it, in the same
# CPU time (1.00-1.04 s either way). A query (one text, at most 256 tokens,
# ~16 MB) never gives back: shrinking after every query cost each a trim.
IDLE_GIVE_BACK_TOKENS = 256
_POOLING_FLAGS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                  "pooling_mode_max_tokens": "max", "pooling_mode_lasttoken": "lasttoken",
                  "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                  "pooling_mode_weightedmean_tokens": "weightedmean"}



class Unsupported(Exception):
    """The model needs something this runtime does not reproduce exactly."""


@dataclass(frozen=True)
class Layout:
    """What the model's files say its encoder does."""

    transformer_dir: Path
    max_seq_length: int
    pooling: str  # "mean" or "cls"


def read_layout(model_dir: Path) -> Layout:
    if not (model_dir / "modules.json").is_file():
        raise Unsupported(f"{model_dir} is not a sentence-transformers model directory")
    modules = sorted(_json(model_dir / "modules.json"), key=lambda module: module["idx"])
    kinds = [str(module["type"]) for module in modules]
    names = [kind.rsplit(".", 1)[-1] for kind in kinds]
    if (names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"])
            or not all(kind.startswith("sentence_transformers.") for kind in kinds)):
        raise Unsupported(f"modules {', '.join(kinds)}: only Transformer, Pooling, Normalize")
    transformer_dir = model_dir / modules[0].get("path", "")
    settings = _json(transformer_dir / "sentence_bert_config.json")
    if (set(settings) - {"max_seq_length", "do_lower_case"} or settings.get("do_lower_case")
            or not isinstance(settings.get("max_seq_length"), int)):
        raise Unsupported(f"sentence_bert_config.json {settings}: only max_seq_length")
    if _json(model_dir / "config_sentence_transformers.json", {}).get("default_prompt_name"):
        raise Unsupported("a default prompt")
    tokenizer_config = _json(transformer_dir / "tokenizer_config.json", {})
    if {tokenizer_config.get("padding_side", "right"),
            tokenizer_config.get("truncation_side", "right")} != {"right"}:
        raise Unsupported("padding or truncation on the left")
    return Layout(transformer_dir, settings["max_seq_length"],
                  _pooling(_json(model_dir / modules[1].get("path", "") / "config.json")))


def _pooling(config: dict[str, Any]) -> str:
    # As sentence-transformers reads it: `pooling_mode`, else the older flags,
    # else the mean.
    known = {"pooling_mode", "include_prompt", "word_embedding_dimension",
             "embedding_dimension", *_POOLING_FLAGS}
    if set(config) - known:
        raise Unsupported(f"pooling settings {sorted(set(config) - known)}")
    modes = config.get("pooling_mode") or [mode for flag, mode in _POOLING_FLAGS.items()
                                           if config.get(flag)] or ["mean"]
    modes = [modes] if isinstance(modes, str) else list(modes)
    if modes not in (["mean"], ["cls"]):
        raise Unsupported(f"pooling {'+'.join(modes)}: only mean or cls")
    return str(modes[0])


def words_file(path: Path) -> Path:
    """The word table of the graph at `path` (`word_table.py`)."""
    return path.with_name(f"{path.name}.words")


class OnnxModel:
    """An exported model in an InferenceSession, encoding as sentence-transformers does.
    `words`: its word table, when not beside the graph (`words_file`)."""

    def __init__(self, path: Path, layout: Layout, words: Path | None = None) -> None:
        options = ort.SessionOptions()
        # One thread each, as torch in embedder.py, for the reason given there.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # errors only
        self.path = path
        self._session = ort.InferenceSession(str(path), options,
                                             providers=["CPUExecutionProvider"])
        # ORT's arena keeps the largest batch's buffers for good: after one
        # chunk of 32 texts of 256 tokens (the attention alone is 32 x 12 heads
        # x 256^2 floats) a process with the model held 703 MB resident against
        # 184 MB before it. A large chunk (GIVE_BACK_TOKENS) runs with the arena
        # shrunk at its end and the heap trimmed after: 163 MB after the same
        # chunk; 64 texts of ~140 tokens took 2.88-3.07 s of CPU time against
        # 2.83-3.00. Without any arena a chunk cost 8-19% more (each layer's
        # buffers allocated afresh), so the arena stays.
        self._chunk_run = ort.RunOptions()
        self._chunk_run.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self._inputs = [node.name for node in self._session.get_inputs()]
        if EMBEDS not in self._inputs or not set(self._inputs) <= {EMBEDS, *INPUTS}:
            raise Unsupported(f"model inputs {self._inputs}")
        self.metadata: dict[str, str] = dict(self._session.get_modelmeta().custom_metadata_map)
        try:
            rows, dims = json.loads(self.metadata["memvault.words"])
        except (KeyError, ValueError, TypeError) as exc:
            raise Unsupported(f"no word table recorded in {path.name}") from exc
        self._words = WordTable(words or words_file(path), int(rows), int(dims))
        self._pooling = layout.pooling
        self._tokenizer = tokenizer(layout)

    def encode(self, texts: list[str], idle: bool = False) -> Vector:
        """`texts`' vectors; `idle`: nothing else waits for the model."""
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        feeds: dict[str, npt.NDArray[Any]] = {
            name: np.array([getattr(e, INPUTS[name]) for e in encodings], dtype=np.int64)
            for name in self._inputs if name != EMBEDS}
        feeds[EMBEDS] = self._words.gather(ids)
        large = ids.size > (IDLE_GIVE_BACK_TOKENS if idle else GIVE_BACK_TOKENS)
        hidden: npt.NDArray[np.float32] = self._session.run(
            None, feeds, self._chunk_run if large else None)[0]
        if large:
            trim_heap()
        if self._pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)[..., None]
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)


def tokenizer(layout: Layout) -> Tokenizer:
    """The model's fast tokenizer, set up as sentence-transformers sets it up."""
    found = Tokenizer.from_file(str(layout.transformer_dir / "tokenizer.json"))
    # tokenizer.json carries settings of its own (MiniLM's: cut at 128, pad every
    # text to 128); sentence-transformers replaces them with these.
    found.enable_truncation(max_length=layout.max_seq_length)
    # The padding token as transformers picks it: the special tokens' map, the
    # tokenizer's config, then tokenizer.json's own.
    pad = (_json(layout.transformer_dir / "special_tokens_map.json", {}).get("pad_token")
           or _json(layout.transformer_dir / "tokenizer_config.json", {}).get("pad_token")
           or (found.padding or {}).get("pad_token"))
    pad_token = pad["content"] if isinstance(pad, dict) else pad
    pad_id = found.token_to_id(pad_token) if isinstance(pad_token, str) else None
    if pad_id is None:
        raise Unsupported("no padding token")
    found.enable_padding(direction="right", pad_id=pad_id, pad_type_id=0, pad_token=pad_token)
    return found


def _json(path: Path, missing: Any = None) -> Any:
    if missing is not None and not path.exists():
        return missing
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Unsupported(f"cannot read {path.name}: {exc}") from exc
