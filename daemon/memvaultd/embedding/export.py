"""The export of a model to ONNX, run as a child of the daemon:

    python -m memvaultd.embedding.export MODEL_DIR FILE

It imports torch, sentence-transformers and onnx (~800 MB resident; the
daemon that starts it stays at ~217 MB), writes FILE (the graph), FILE.data
(the weights, `onnx_cache.weights_file`) and FILE.words (the word table,
`onnx_model.words_file`) whole or not at all, and
exits: 0 done; UNSUPPORTED_EXIT when the export does not give the model's own
vectors (the daemon then runs that model on torch); 2 for a wrong command
line; 1 on any other failure, its cause on the last line of stderr.
`onnx_cache.py` starts it holding the cache's lock and checks the file again
once it is there.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from onnx.external_data_helper import convert_model_to_external_data, write_external_data_tensors

from memvault_base.durable import sync_dir
from memvaultd.embedding.onnx_cache import (
    FORMAT_VERSION,
    OPSET,
    PROBES,
    UNSUPPORTED_EXIT,
    compare,
    weights_file,
)
from memvaultd.embedding.onnx_model import (
    EMBEDS,
    INPUTS,
    Layout,
    OnnxModel,
    Unsupported,
    read_layout,
    tokenizer,
    words_file,
)
from memvaultd.embedding.torch_model import sentence_transformer
from memvaultd.embedding.word_table import VALUE


def export(model_dir: Path, layout: Layout, path: Path) -> None:
    """Write `path`, its weights file and its word table: the model's
    transformer as ONNX, from its word embeddings on (`word_table.py`),
    checked against sentence-transformers on PROBES, renamed into place (the
    graph last), their directory fsynced."""
    model = sentence_transformer(str(model_dir))
    transformer: Any = model[0].auto_model
    transformer.eval()
    if "input_ids" not in model.tokenizer.model_input_names:
        raise Unsupported(f"tokenizer inputs {model.tokenizer.model_input_names}")
    # The graph starts after the word lookup (`word_table.py`): the
    # transformer must take its input as embeddings, from a plain table.
    embeddings = transformer.get_input_embeddings()
    if (EMBEDS not in inspect.signature(transformer.forward).parameters
            or not isinstance(embeddings, torch.nn.Embedding)):
        raise Unsupported(f"a transformer that takes no {EMBEDS} from a word table "
                          f"({type(transformer).__name__}, {type(embeddings).__name__})")
    names = [EMBEDS, *(name for name in INPUTS if name in model.tokenizer.model_input_names)]
    table = embeddings.weight.detach().numpy().astype(VALUE)

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer  # a submodule: its weights become initialisers

        # By keyword: BertModel's positional parameters have use_cache among them.
        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            hidden: torch.Tensor = self.transformer(**dict(zip(names, inputs, strict=True))
                                                    ).last_hidden_state
            return hidden

    # Traced on two texts of unequal length, so the graph keeps the padding mask.
    sample = tokenizer(layout).encode_batch(list(PROBES[:2]))
    inputs = (torch.from_numpy(table[np.array([e.ids for e in sample])].astype(np.float32)),
              *(torch.tensor([getattr(e, INPUTS[name]) for e in sample]) for name in names[1:]))
    expected = model.encode(list(PROBES), normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)
    weights, words = weights_file(path), words_file(path)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary_weights = path.with_name(f"{weights.name}.{os.getpid()}.tmp")
    temporary_words = path.with_name(f"{words.name}.{os.getpid()}.tmp")
    try:
        with open(temporary_words, "wb") as out:
            table.tofile(out)
            out.flush()
            os.fsync(out.fileno())
        with warnings.catch_warnings(), torch.no_grad():
            # The legacy exporter's deprecation, and the tracer's notes on Python
            # branches over shapes: what the graph computes is checked below.
            warnings.simplefilter("ignore")
            torch.onnx.export(Hidden(), inputs, str(temporary), input_names=names,
                              output_names=["last_hidden_state"], opset_version=OPSET,
                              dynamic_axes={name: {0: "batch", 1: "sequence"}
                                            for name in [*names, "last_hidden_state"]},
                              dynamo=False)
        graph = onnx.load(str(temporary))
        for key, value in (("memvault.format", str(FORMAT_VERSION)),
                           ("memvault.probe", json.dumps(expected[0].tolist())),
                           ("memvault.words", json.dumps(list(table.shape)))):
            graph.metadata_props.add(key=key, value=value)
        # The weights in a file of their own, which ONNX Runtime maps rather
        # than copies (`onnx_cache.py` says what that saves).
        temporary_weights.unlink(missing_ok=True)  # written by appending
        convert_model_to_external_data(graph, all_tensors_to_one_file=True,
                                       location=temporary_weights.name, size_threshold=1024)
        write_external_data_tensors(graph, str(path.parent))
        _fsync(temporary_weights)
        _write(temporary, graph)
        exported = OnnxModel(temporary, layout, temporary_words).encode(list(PROBES))
        compare(exported, expected, "sentence-transformers")
        for tensor in graph.graph.initializer:  # the weights under their final name
            for entry in tensor.external_data:
                if entry.key == "location":
                    entry.value = weights.name
        _write(temporary, graph)
        # The graph last: a graph in place always finds its weights and words.
        os.replace(temporary_weights, weights)
        os.replace(temporary_words, words)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
        temporary_weights.unlink(missing_ok=True)
        temporary_words.unlink(missing_ok=True)
    sync_dir(path.parent)


def _write(path: Path, graph: onnx.ModelProto) -> None:
    with open(path, "wb") as out:
        out.write(graph.SerializeToString())
        out.flush()
        os.fsync(out.fileno())


def _fsync(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m memvaultd.embedding.export MODEL_DIR FILE", file=sys.stderr)
        return 2
    model_dir, path = Path(argv[0]), Path(argv[1])
    # Nothing may be fetched: the weights come from disk only.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        export(model_dir, read_layout(model_dir), path)
    except Unsupported as exc:
        print(f"{exc}", file=sys.stderr)
        return UNSUPPORTED_EXIT
    except Exception as exc:
        # One line: torch's messages can hold whole tensors (one printed the
        # 30522 x 384 embedding matrix, ~2 million lines).
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        print(f"{type(exc).__name__}: {first}".rstrip(": "), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
