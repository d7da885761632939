"""The model on ONNX Runtime: the same vectors as sentence-transformers, a
cache that loads without torch and heals itself, and torch whenever ONNX
cannot reproduce the model."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memvault import Client
from memvault_base.errors import InvalidArgument, Unavailable
from memvault_base.paths import resolve
from memvaultd.config.settings import load
from memvaultd.embedding import onnx_cache
from memvaultd.embedding.embedder import DEFAULT_MODEL, Embedder, model_path
from memvaultd.embedding.onnx_model import OnnxModel, Unsupported, read_layout, words_file
from memvaultd.embedding.word_table import WordTable
from memvaultd.vault.events import EventBus

from .daemon_process import DaemonProcess

MODEL_DIR = Path(model_path(DEFAULT_MODEL))
LONG = " ".join(f"word{i} means nothing in particular" for i in range(120))  # ~720 tokens
TEXTS = [
    "prefers vitest over jest",
    "",
    "  Ünïcödé café naïve résumé, 中文 and emoji 🎉 \t\n",
    "the staging database lives in eu-west-1 and is backed up every night at 02:00 UTC",
    LONG,
]
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def reference() -> Any:
    """sentence-transformers itself, on torch, one thread (as the daemon ran it)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    return SentenceTransformer(str(MODEL_DIR), device="cpu")


@pytest.fixture(scope="module")
def models(model_cache: Path) -> Path:
    """The session's model cache, as the test daemons find it (`resolve().model_cache`)."""
    assert resolve().model_cache == model_cache / "models"
    return model_cache / "models"


@pytest.fixture(scope="module")
def exported(models: Path) -> OnnxModel:
    """The session's cached export (made here if no daemon made it first)."""
    return onnx_cache.load(MODEL_DIR, DEFAULT_MODEL, models)


def st_encode(model: Any, texts: list[str]) -> np.ndarray[Any, Any]:
    return np.asarray(model.encode(texts, batch_size=32, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False))


def embedder(cache_dir: Path, runtime: str = "auto", model: str = DEFAULT_MODEL) -> Embedder:
    made = Embedder(model, cache_size=8, events=EventBus(), runtime=runtime, cache_dir=cache_dir)
    made.start()
    made.wait_ready()
    return made


# -- equal vectors -------------------------------------------------------------------


@pytest.mark.slow
def test_each_text_alone_gives_sentence_transformers_vector(reference: Any,
                                                            exported: OnnxModel) -> None:
    for text in TEXTS:
        got, expected = exported.encode([text]), st_encode(reference, [text])
        assert got.shape == expected.shape == (1, 384)
        assert np.abs(got - expected).max() <= TOLERANCE, text[:40]


@pytest.mark.slow
def test_a_batch_of_unequal_lengths_gives_the_same_vectors(reference: Any,
                                                           exported: OnnxModel) -> None:
    batch = TEXTS * 3  # 15 texts, 2 to 256 tokens: padding within the batch
    got = exported.encode(batch)
    assert np.abs(got - st_encode(reference, batch)).max() <= TOLERANCE
    # Padding changes nothing: each row is the text's vector alone.
    alone = np.concatenate([exported.encode([text]) for text in TEXTS])
    assert np.abs(got[: len(TEXTS)] - alone).max() <= TOLERANCE


@pytest.mark.slow
def test_embed_documents_sorts_by_length_and_keeps_the_callers_order(
        exported: OnnxModel, models: Path) -> None:
    # 70 texts of 1 to 70 words, shuffled: chunks of 32 are filled longest
    # first, and every vector must still come back at its text's position.
    rng = np.random.default_rng(5)
    texts = [" ".join(f"word{j}" for j in range(n)) for n in rng.permutation(70) + 1]
    got = embedder(models).embed_documents(texts)
    alone = np.concatenate([exported.encode([text]) for text in texts])
    assert got.shape == (70, 384)
    assert np.abs(got - alone).max() <= TOLERANCE


@pytest.mark.slow
def test_a_long_text_is_cut_at_256_tokens(reference: Any, exported: OnnxModel) -> None:
    assert len(reference.tokenizer(LONG)["input_ids"]) > 600  # really past the cut
    longer = LONG + " and a tail far past the cut that must change nothing"
    assert np.abs(exported.encode([longer]) - exported.encode([LONG])).max() == 0
    assert np.abs(exported.encode([longer]) - st_encode(reference, [longer])).max() <= TOLERANCE


# -- memory ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_large_chunk_shrinks_the_arena_and_trims_the_heap_and_a_small_one_does_not(
        exported: OnnxModel, monkeypatch: pytest.MonkeyPatch) -> None:
    # ORT's arena keeps the largest batch's buffers for good (onnx_model.py).
    from memvaultd.embedding import onnx_model

    session = exported._session
    shrinks: list[str | None] = []
    trims: list[int] = []

    class Recording:
        def run(self, outputs: Any, feeds: Any, options: Any = None) -> Any:
            shrinks.append(options and options.get_run_config_entry(
                "memory.enable_memory_arena_shrinkage"))
            return session.run(outputs, feeds, options)

    monkeypatch.setattr(exported, "_session", Recording())
    monkeypatch.setattr(onnx_model, "trim_heap", lambda: trims.append(1))
    exported.encode([TEXTS[3]])
    exported.encode([TEXTS[0]] * 32)  # 32 x 8 tokens, under GIVE_BACK_TOKENS
    assert (shrinks, trims) == ([None, None], [])
    exported.encode(TEXTS)  # 5 x 256 tokens
    assert (shrinks, trims) == ([None, None, "cpu:0"], [1])
    # The last chunk of a burst gives back from over one longest text on.
    exported.encode([TEXTS[3]], idle=True)  # a query
    exported.encode([TEXTS[3]] * 16, idle=True)  # 16 x ~25 tokens
    assert (shrinks[3:], trims) == ([None, "cpu:0"], [1, 1])


def test_only_the_last_chunk_queued_is_told_the_model_is_idle(models: Path) -> None:
    made = embedder(models.parent)
    told: list[tuple[int, bool]] = []
    model = made._model
    assert model is not None

    def recording(texts: list[str], idle: bool = False) -> Any:
        told.append((len(texts), idle))
        return model(texts, idle)

    made._model = recording
    made.embed_documents([f"note {i} about the staging database" for i in range(70)])
    made.embed_query("where is the staging database")
    assert told == [(32, False), (32, False), (6, True), (1, True)]
    made.close()


# A process's resident size before and after some texts, printed as JSON;
# `load()` gives it something to encode with (`encode(texts)`), and argv[1]
# is the model cache.
RESIDENT = textwrap.dedent("""
    import json, sys
    from pathlib import Path

    def resident_mb():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

    encode, texts = load(Path(sys.argv[1]))
    loaded = resident_mb()
    encode(texts)
    print(json.dumps({"loaded": loaded, "after": resident_mb()}))
""")


def _resident(load: str, *args: str) -> tuple[float, float]:
    """MB resident before and after, in a process of its own (`RESIDENT`)."""
    script = textwrap.dedent(load) + RESIDENT
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          timeout=120,
                          env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    return report["loaded"], report["after"]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_chunk_of_long_texts_leaves_the_daemon_no_larger(models: Path) -> None:
    # 32 texts cut at 256 tokens, the largest chunk the embedder sends: with
    # ORT's arena left as it grew the process stayed ~520 MB larger afterwards,
    # shrunk and trimmed it is no larger.
    loaded, after = _resident("""
        import sys
        from memvaultd.embedding import onnx_cache
        from memvaultd.embedding.embedder import DEFAULT_MODEL, model_path

        def load(cache):
            model = onnx_cache.load(Path(model_path(DEFAULT_MODEL)), DEFAULT_MODEL, cache)
            return model.encode, [sys.argv[2] + str(i) for i in range(32)]
    """, str(models), LONG)
    print(f"resident after loading {loaded:.0f} MB, after 32 texts of 256 tokens {after:.0f} MB")
    assert after - loaded < 100


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_burst_of_short_texts_leaves_the_daemon_no_larger(models: Path) -> None:
    # 256 texts of ~25 tokens: each chunk is under GIVE_BACK_TOKENS, and with
    # the arena kept as the chunks grew it the process stayed ~27 MB larger;
    # the burst's last chunk gives it back.
    loaded, after = _resident("""
        from memvaultd.embedding.embedder import DEFAULT_MODEL, Embedder
        from memvaultd.vault.events import EventBus

        def load(cache):
            embedder = Embedder(DEFAULT_MODEL, cache_size=8, events=EventBus(), cache_dir=cache)
            embedder.start()
            embedder.wait_ready()
            for i in range(50):
                embedder.embed_query(f"what did we decide about topic {i}")
            return embedder.embed_documents, [
                f"note {i}: the staging database lives in eu-west-{i % 3} and is backed up "
                f"at {i % 24:02d}:00" for i in range(256)]
    """, str(models))
    print(f"resident after 50 queries {loaded:.0f} MB, after 256 short texts {after:.0f} MB")
    assert after - loaded < 12


# -- the cache -------------------------------------------------------------------------


WARM_START = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from memvaultd.embedding.embedder import DEFAULT_MODEL, Embedder
    from memvaultd.vault.events import EventBus
    embedder = Embedder(DEFAULT_MODEL, cache_size=8, events=EventBus(), cache_dir=Path(sys.argv[1]))
    embedder.start()
    embedder.wait_ready()
    vector = embedder.embed_query(sys.argv[2])
    heavy = [m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules]
    print(json.dumps({"runtime": embedder.runtime, "heavy": heavy, "vector": vector.tolist()}))
""")


@pytest.mark.slow
def test_a_warm_cache_loads_without_importing_torch(reference: Any, exported: OnnxModel,
                                                    models: Path) -> None:
    done = subprocess.run([sys.executable, "-c", WARM_START, str(models), TEXTS[3]],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["runtime"], report["heavy"]) == ("onnx", [])
    expected = st_encode(reference, [TEXTS[3]])[0]
    assert np.abs(np.array(report["vector"]) - expected).max() <= TOLERANCE


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _truncate_weights(path: Path) -> None:
    _truncate(onnx_cache.weights_file(path))


def _lose_weights(path: Path) -> None:
    onnx_cache.weights_file(path).unlink()


def _truncate_words(path: Path) -> None:
    _truncate(words_file(path))


def _lose_words(path: Path) -> None:
    words_file(path).unlink()


def _change_a_word(path: Path) -> None:
    # One value of a token's row that the probe sentence reads ("memvault" is
    # not one word to the tokenizer, "checks" is), as a flipped bit would.
    import tokenizers

    token = tokenizers.Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json")).token_to_id("checks")
    with open(words_file(path), "r+b") as table:
        table.seek(token * 384 * 4)
        table.write(np.float32(3.0).tobytes())


def _another_probe(path: Path) -> None:
    # A file that parses and runs but no longer gives its recorded vector, as
    # after a flipped bit in a weight.
    import onnx

    graph = onnx.load(str(path))
    probe = next(p for p in graph.metadata_props if p.key == "memvault.probe")
    vector = json.loads(probe.value)
    probe.value = json.dumps([-x for x in vector])
    path.write_bytes(graph.SerializeToString())


@pytest.mark.slow
@pytest.mark.parametrize("damage", [_truncate, _another_probe, _truncate_weights, _lose_weights,
                                    _truncate_words, _lose_words, _change_a_word])
def test_a_damaged_cached_file_is_exported_again(
        damage: Any, exported: OnnxModel, reference: Any, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    cached = tmp_path / exported.path.name
    shutil.copyfile(exported.path, cached)
    shutil.copyfile(onnx_cache.weights_file(exported.path), onnx_cache.weights_file(cached))
    shutil.copyfile(words_file(exported.path), words_file(cached))
    damage(cached)
    with caplog.at_level(logging.INFO, logger="memvaultd"):
        healed = onnx_cache.load(MODEL_DIR, DEFAULT_MODEL, tmp_path)
    assert "is unusable" in caplog.text and "exported the model" in caplog.text
    assert healed.path == cached
    assert np.abs(healed.encode(TEXTS) - st_encode(reference, TEXTS)).max() <= TOLERANCE
    onnx_cache.check(OnnxModel(cached, read_layout(MODEL_DIR)))  # the file itself is whole
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        cached.name, f"{cached.name}.data", f"{cached.name}.lock", f"{cached.name}.words",
        onnx_cache.DIGESTS]


@pytest.mark.slow
def test_two_loads_at_once_export_once(tmp_path: Path, reference: Any,
                                       caplog: pytest.LogCaptureFixture) -> None:
    models: list[OnnxModel] = []

    def load_one() -> None:
        models.append(onnx_cache.load(MODEL_DIR, DEFAULT_MODEL, tmp_path))

    with caplog.at_level(logging.INFO, logger="memvaultd"):
        threads = [threading.Thread(target=load_one) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    assert len(models) == 2
    assert caplog.text.count("exported the model") == 1  # the other waited, then loaded it
    for model in models:
        assert np.abs(model.encode(TEXTS) - st_encode(reference, TEXTS)).max() <= TOLERANCE


# -- the export, in a child process -----------------------------------------------------


def _rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


def _mapped(pid: int) -> set[str]:
    return {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()}


def _maps_torch(pid: int) -> list[str]:
    return sorted({line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
                   if "libtorch" in line or "/torch/" in line})


@pytest.mark.slow
def test_the_daemon_never_holds_torch_and_two_homes_share_one_export(tmp_path: Path) -> None:
    # A cache of its own, so that this daemon's start is a first start that exports.
    cache = tmp_path / "cache"
    first = DaemonProcess(tmp_path / "one", MEMVAULT_CACHE_DIR=str(cache)).start()
    try:
        assert "exported the model to" in first.log
        assert first.proc is not None
        assert _maps_torch(first.proc.pid) == []
        cold = _rss_mb(first.proc.pid)
        with Client(socket=first.socket) as client:
            client.remember("prefers vitest over jest", topic="user.preferences.testing")
            assert client.recall("which test framework")[0].memory.text == \
                "prefers vitest over jest"
    finally:
        first.stop()
    models = cache / "models"
    assert models.stat().st_mode & 0o777 == 0o700
    (export,) = models.glob("*.onnx")
    second = DaemonProcess(tmp_path / "two", MEMVAULT_CACHE_DIR=str(cache)).start()
    try:
        assert "exported the model" not in second.log  # the first home's export
        assert second.proc is not None
        assert _maps_torch(second.proc.pid) == []
        # The weights mapped from their file, not copied into the heap; the
        # word table read a row at a time, never mapped (word_table.py).
        mapped = _mapped(second.proc.pid)
        assert str(onnx_cache.weights_file(export)) in mapped
        assert str(words_file(export)) not in mapped
        warm = _rss_mb(second.proc.pid)
    finally:
        second.stop()
    assert list(models.glob("*.onnx")) == [export]
    print(f"daemon resident once SERVING: first start {cold:.0f} MB, warm {warm:.0f} MB")
    # With torch imported for the export it was 792 MB; without, 199-226 MB.
    assert cold < 400 and warm < 400


@pytest.mark.slow
def test_an_export_that_fails_stops_the_daemon_naming_its_cause(tmp_path: Path) -> None:
    # A torch that cannot be imported, seen by the export's child only: the
    # daemon itself must not import it at all.
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(
        'raise ImportError("this torch is broken on purpose")\n')
    daemon = DaemonProcess(tmp_path / "home", MEMVAULT_CACHE_DIR=str(tmp_path / "cache"),
                           PYTHONPATH=os.pathsep.join(
                                 [str(fake), *filter(None, [os.environ.get("PYTHONPATH")])]))
    daemon.start(wait=False)
    assert daemon.proc is not None
    assert daemon.proc.wait(120) == 2
    assert ("exporting the model to ONNX failed: ImportError: this torch is broken on purpose"
            in daemon.log)
    assert "runs on torch" not in daemon.log
    assert list((tmp_path / "cache" / "models").glob("*.onnx*")) == \
        list((tmp_path / "cache" / "models").glob("*.lock"))  # nothing half-written


# -- choosing the runtime ------------------------------------------------------------


@pytest.mark.slow
def test_runtime_torch_uses_sentence_transformers(tmp_path: Path, reference: Any) -> None:
    on_torch = embedder(tmp_path / "cache", runtime="torch")
    try:
        assert on_torch.runtime == "torch"
        assert not (tmp_path / "cache").exists()  # nothing exported
        got = on_torch.embed_documents(TEXTS)
        assert np.abs(got - st_encode(reference, TEXTS)).max() <= TOLERANCE
    finally:
        on_torch.close()


def _copy_model(tmp_path: Path) -> Path:
    """The model's files, the weights linked (90 MB), the small files copied to edit."""
    copy = tmp_path / "model"
    shutil.copytree(MODEL_DIR, copy, ignore=shutil.ignore_patterns("*.safetensors"))
    for weights in MODEL_DIR.glob("*.safetensors"):
        (copy / weights.name).symlink_to(weights)
    return copy


@pytest.mark.slow
def test_a_cls_pooling_model_runs_on_onnx_with_its_vectors(tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    model = _copy_model(tmp_path)
    (model / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 384, "pooling_mode_cls_token": True,
         "pooling_mode_mean_tokens": False}))
    on_onnx = embedder(tmp_path / "cache", model=str(model))
    try:
        assert on_onnx.runtime == "onnx"
        expected = st_encode(SentenceTransformer(str(model), device="cpu"), TEXTS)
        assert np.abs(on_onnx.embed_documents(TEXTS) - expected).max() <= TOLERANCE
        assert np.abs(expected - st_encode(SentenceTransformer(str(MODEL_DIR)), TEXTS)
                      ).max() > 0.1  # really another pooling
    finally:
        on_onnx.close()


@pytest.mark.slow
@pytest.mark.parametrize("runtime, level", [("auto", "WARNING"), ("onnx", "ERROR")])
def test_a_model_onnx_cannot_reproduce_stays_on_torch(
        runtime: str, level: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = _copy_model(tmp_path)
    pooling = model / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({**json.loads(pooling.read_text()),
                                   "pooling_mode_mean_tokens": False,
                                   "pooling_mode_max_tokens": True}))
    with caplog.at_level(logging.INFO, logger="memvaultd"):
        fallen = embedder(tmp_path / "cache", runtime=runtime, model=str(model))
    try:
        assert fallen.runtime == "torch"
        (record,) = [r for r in caplog.records if "runs on torch" in r.getMessage()]
        assert record.levelname == level
        assert "pooling max: only mean or cls" in record.getMessage()
        assert fallen.embed_query("still works").shape == (384,)
    finally:
        fallen.close()


@pytest.mark.slow
def test_a_transformer_without_a_plain_word_table_is_not_exported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The graph starts after the word lookup (word_table.py): a model whose
    # input embeddings are anything but a plain table stays on torch.
    import torch

    from memvaultd.embedding import export

    real = export.sentence_transformer

    def with_other_embeddings(path: str) -> Any:
        model = real(path)
        transformer = model[0].auto_model
        table = transformer.get_input_embeddings()
        transformer.set_input_embeddings(torch.nn.Sequential(table))
        return model

    monkeypatch.setattr(export, "sentence_transformer", with_other_embeddings)
    with pytest.raises(Unsupported, match="takes no inputs_embeds from a word table"):
        export.export(MODEL_DIR, read_layout(MODEL_DIR), tmp_path / "m.onnx")
    assert list(tmp_path.iterdir()) == []


def test_a_cache_that_cannot_be_written_fails_the_load_naming_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Not torch in the daemon instead (792 MB resident for good): the cause, said.
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache directory should be")
    with caplog.at_level(logging.INFO, logger="memvaultd"):
        failed = Embedder(DEFAULT_MODEL, cache_size=8, events=EventBus(), cache_dir=blocked)
        failed.start()
        with pytest.raises(Unavailable, match=f"cannot create the model cache {blocked}"):
            failed.wait_ready()
    try:
        assert failed.state == "failed" and failed.runtime == ""
        assert "runs on torch" not in caplog.text
    finally:
        failed.close()


@pytest.mark.parametrize("change, reason", [
    (lambda m: m["modules"].append({"idx": 3, "name": "3", "path": "3_Dense",
                                    "type": "sentence_transformers.models.Dense"}),
     "only Transformer, Pooling, Normalize"),
    (lambda m: m["pooling"].update(pooling_mode_cls_token=True), "pooling cls+mean"),
    (lambda m: m["settings"].update(do_lower_case=True), "only max_seq_length"),
    (lambda m: m["prompts"].update(default_prompt_name="query"), "a default prompt"),
])
def test_layouts_onnx_cannot_reproduce_are_refused(change: Any, reason: str,
                                                    tmp_path: Path) -> None:
    files = {"modules": "modules.json", "pooling": "1_Pooling/config.json",
             "settings": "sentence_bert_config.json",
             "prompts": "config_sentence_transformers.json"}
    (tmp_path / "1_Pooling").mkdir()
    loaded = {key: json.loads((MODEL_DIR / name).read_text()) for key, name in files.items()}
    assert read_layout(MODEL_DIR).pooling == "mean"
    change(loaded)
    for key, name in files.items():
        (tmp_path / name).write_text(json.dumps(loaded[key]))
    with pytest.raises(Unsupported, match=re.escape(reason)):
        read_layout(tmp_path)


def test_cls_pooling_is_read(tmp_path: Path) -> None:
    model = _copy_model(tmp_path)
    (model / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 384, "pooling_mode": "cls"}))
    assert read_layout(model).pooling == "cls"


def test_the_cache_file_name_follows_the_model_files_content(tmp_path: Path) -> None:
    model = _copy_model(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    first = onnx_cache.cache_file(model, "my/model", cache)
    assert first.parent == cache and first.name.startswith("my_model-")
    assert onnx_cache.cache_file(model, "my/model", cache) == first
    # The same files elsewhere (another install, another home's venv): the same export.
    assert onnx_cache.cache_file(MODEL_DIR, "my/model", cache) == first
    (model / "tokenizer.json").touch()  # a new mtime, the same bytes
    assert onnx_cache.cache_file(model, "my/model", cache) == first
    (model / "tokenizer_config.json").write_text(
        (model / "tokenizer_config.json").read_text() + " ")  # other bytes
    assert onnx_cache.cache_file(model, "my/model", cache) != first


def test_digests_are_kept_while_a_file_is_unchanged(tmp_path: Path) -> None:
    # Hashing MiniLM's 90 MB takes ~0.3 s of a ~1 s start: each file is hashed
    # once, then found in digests.json while its size, mtime, ctime and inode hold.
    model = _copy_model(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    first = onnx_cache.cache_file(model, "m", cache)
    memo = cache / onnx_cache.DIGESTS
    known = json.loads(memo.read_text())
    weights = str(model.resolve() / "model.safetensors")
    assert weights in known
    known[weights][-1] = "0" * 64  # a digest only the memo can have given
    memo.write_text(json.dumps(known))
    assert onnx_cache.cache_file(model, "m", cache) != first  # taken from the memo
    tokenizer = str(model.resolve() / "tokenizer.json")
    known[tokenizer][-1] = "1" * 64
    memo.write_text(json.dumps(known))
    os.utime(model / "tokenizer.json")  # a changed stat: hashed again
    onnx_cache.cache_file(model, "m", cache)
    assert json.loads(memo.read_text())[tokenizer][-1] != "1" * 64
    memo.write_text("{torn")  # a damaged memo: every file hashed again
    assert onnx_cache.cache_file(model, "m", cache) == first


# -- configuration and paths -----------------------------------------------------------


@pytest.mark.parametrize("value", ['"gpu"', '"ONNX"', "1", '""'])
def test_a_bad_model_runtime_is_refused_naming_the_key(value: str, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"model_runtime = {value}\n")
    with pytest.raises(InvalidArgument, match="model_runtime must be auto, onnx or torch"):
        load(config, env={})


@pytest.mark.parametrize("value", ["auto", "onnx", "torch"])
def test_model_runtime_values(value: str, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'model_runtime = "{value}"\n')
    assert load(config, env={}).model_runtime == value
    assert load(tmp_path / "absent.toml", env={}).model_runtime == "auto"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in ("MEMVAULT_HOME", "MEMVAULT_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch


def test_the_cache_dir(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert resolve(tmp_path).cache_dir == tmp_path / "cache"
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert resolve().cache_dir == tmp_path / "xdg" / "memvault"
    clean_env.setenv("MEMVAULT_CACHE_DIR", str(tmp_path / "shared"))
    assert resolve().cache_dir == tmp_path / "shared"
    assert resolve(tmp_path / "home").cache_dir == tmp_path / "shared"


def test_the_model_cache_is_one_per_user(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    user = tmp_path / "xdg" / "memvault" / "models"
    assert resolve().model_cache == user
    assert resolve(tmp_path / "a").model_cache == resolve(tmp_path / "b").model_cache == user
    clean_env.setenv("MEMVAULT_CACHE_DIR", str(tmp_path / "shared"))
    assert resolve(tmp_path / "a").model_cache == tmp_path / "shared" / "models"


@pytest.mark.slow
def test_the_daemon_logs_its_runtime(daemon: DaemonProcess) -> None:
    assert "model all-MiniLM-L6-v2 ready (384 dimensions, runtime onnx)" in daemon.log


@pytest.mark.slow
def test_the_cache_holds_no_user_data(daemon: DaemonProcess, model_cache: Path) -> None:
    # The cache is plaintext because only public weights go there: check that
    # a memory and a query never do, in any of the forms a leak could take.
    text, query = "quokkacanary-text-3b7e", "quokkacanary-query-91fd"
    with Client(socket=daemon.socket) as client:
        client.remember(text, topic="quokkacanary.topic")
        client.recall(query)
    files = [path for path in model_cache.rglob("*") if path.is_file()]
    assert any(path.suffix == ".onnx" for path in files)
    for path in files:
        raw = path.read_bytes()
        for secret in (text, query, "quokkacanary"):
            for form in (secret.encode(), secret.encode().hex().encode(),
                         secret.encode("utf-16-le")):
                assert form not in raw, (path, form)


@pytest.mark.slow
def test_model_runtime_in_config_toml_reaches_the_daemon(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text('model_runtime = "torch"\n')
    daemon = DaemonProcess(home).start()
    try:
        assert "model all-MiniLM-L6-v2 ready (384 dimensions, runtime torch)" in daemon.log
        with Client(socket=daemon.socket) as client:
            client.remember("prefers vitest over jest", topic="user.preferences.testing")
            assert client.recall("which test framework")[0].memory.text == \
                "prefers vitest over jest"
    finally:
        daemon.stop()


def test_an_export_drops_older_exports_and_what_killed_exports_left(tmp_path: Path) -> None:
    current = tmp_path / "m-0123456789abcdef.onnx"
    kept = [current, onnx_cache.weights_file(current), words_file(current),
            tmp_path / f"{current.name}.lock", tmp_path / "other-fedcba9876543210.onnx",
            tmp_path / onnx_cache.DIGESTS]
    dropped = [tmp_path / "m-fedcba9876543210.onnx", tmp_path / "m-fedcba9876543210.onnx.data",
               tmp_path / "m-fedcba9876543210.onnx.words",
               tmp_path / "m-fedcba9876543210.onnx.lock", tmp_path / f"{current.name}.4711.tmp",
               tmp_path / f"{current.name}.data.4711.tmp",
               tmp_path / f"{current.name}.words.4711.tmp"]
    for path in kept + dropped:
        path.write_bytes(b"")
    onnx_cache._prune(current)
    assert sorted(tmp_path.iterdir()) == sorted(kept)


# -- the word table ----------------------------------------------------------------------


def test_the_word_table_reads_each_tokens_row(tmp_path: Path) -> None:
    table = np.random.default_rng(7).standard_normal((50, 6)).astype("<f4")
    path = tmp_path / "words"
    table.tofile(path)
    ids = np.array([[3, 49, 0, 3], [7, 7, 0, 0]], dtype=np.int64)
    words = WordTable(path, 50, 6)
    got = words.gather(ids)
    assert got.shape == (2, 4, 6) and got.dtype == np.float32
    assert np.array_equal(got, table[ids])
    words.close()


def test_a_word_table_of_the_wrong_size_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "words"
    path.write_bytes(b"\0" * (50 * 6 * 4 - 4))
    with pytest.raises(ValueError, match="holds 1196 bytes; 50 x 6 float32 rows are 1200"):
        WordTable(path, 50, 6)


@pytest.mark.parametrize("token", [-1, 50])
def test_a_token_outside_the_word_table_is_refused(token: int, tmp_path: Path) -> None:
    path = tmp_path / "words"
    np.zeros((50, 6), "<f4").tofile(path)
    with pytest.raises(ValueError, match="outside the table's 50 rows"):
        WordTable(path, 50, 6).gather(np.array([[1, token]], dtype=np.int64))
