"""When the event loop answers a recall itself, and when it must not.

`Vault.recall_at_once` runs on the core's event loop (serve/dispatch.py):
it must answer only what needs no wait, and when it declines it must leave
no trace (no access marked, no cache hit counted), because the same recall
then runs again on a worker. A vault opened in this process, its model
never started: only queries with their own vectors can be answered.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from memvaultd.config.settings import Config
from memvaultd.embedding.embedder import Embedder
from memvaultd.model.commands import MemoryDraft, RecallQuery
from memvaultd.vault import reads as vault_reads
from memvaultd.vault.events import EventBus
from memvaultd.vault.vault import Vault

from .daemon_process import PASSPHRASE


def _vector(seed: int) -> list[float]:
    rng = random.Random(seed)
    v = [rng.gauss(0, 1) for _ in range(384)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


@pytest.fixture
def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Vault]:
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    events = EventBus()
    embedder = Embedder(Config().model, cache_size=8, events=events)  # never started
    opened = Vault.open(tmp_path / "data", Config(), embedder, events, prompt=False)
    yield opened
    opened.close()


def _fill(vault: Vault, count: int = 5) -> list[str]:
    vault.load()
    outcomes = vault.remember([MemoryDraft(f"memory number {i}", topic_key=f"t{i}",
                                           vector=_vector(i)) for i in range(count)])
    return [o.id for o in outcomes]


def _accesses(vault: Vault, ids: list[str]) -> int:
    return sum(memory.access_count for i in ids if (memory := vault.memories.get(i)))


def test_a_loaded_vault_answers_a_vector_query_at_once_and_marks_it(vault: Vault) -> None:
    ids = _fill(vault)
    recalled = vault.recall_at_once(RecallQuery(vector=_vector(2), top_k=1))
    assert recalled is not None and recalled.hits[0].scored.memory.id == ids[2]
    assert vault.memories.get(ids[2]).access_count == 1  # type: ignore[union-attr]


def test_what_would_wait_is_declined_without_a_trace(vault: Vault) -> None:
    query = RecallQuery(vector=_vector(1), top_k=3)
    assert vault.recall_at_once(query) is None  # not loaded yet
    ids = _fill(vault)
    applied = vault.applied_txid
    assert vault.recall_at_once(RecallQuery(vector=_vector(1), min_txid=applied + 1)) is None
    assert vault.recall_at_once(RecallQuery(text="a query the model never saw")) is None
    assert vault.embedder.hits == 0
    with vault.core.access_lock:  # a commit or a snapshot's capture holds it
        assert vault.recall_at_once(query) is None
    assert _accesses(vault, ids) == 0
    assert vault.recall_at_once(query) is not None
    assert _accesses(vault, ids) == 3


def test_a_recall_is_ready_once_it_would_wait_for_nothing(vault: Vault) -> None:
    # What sends a recall to the threads that only compute (server.py),
    # rather than to the shared pool where it may wait.
    query = RecallQuery(vector=_vector(1))
    assert not vault.recall_ready(query)  # still loading
    _fill(vault)
    assert vault.recall_ready(query)
    assert vault.recall_ready(RecallQuery(vector=_vector(1), min_txid=vault.applied_txid))
    assert not vault.recall_ready(RecallQuery(vector=_vector(1),
                                              min_txid=vault.applied_txid + 1))
    assert not vault.recall_ready(RecallQuery(text="a query the model never saw"))
    assert vault.embedder.hits == 0


def test_a_large_vault_recalls_on_the_workers(vault: Vault, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    _fill(vault, count=5)
    monkeypatch.setattr(vault_reads, "AT_ONCE_MAX_MEMORIES", 4)
    assert vault.recall_at_once(RecallQuery(vector=_vector(1))) is None
    monkeypatch.setattr(vault_reads, "AT_ONCE_MAX_MEMORIES", 5)
    assert vault.recall_at_once(RecallQuery(vector=_vector(1))) is not None


def test_bad_input_fails_at_once_as_it_would_on_a_worker(vault: Vault) -> None:
    _fill(vault)
    with pytest.raises(Exception, match="query_vector"):
        vault.recall_at_once(RecallQuery(vector=[1.0, 0.0]))
    with pytest.raises(Exception, match="mode"):
        vault.recall_at_once(RecallQuery(vector=_vector(1), mode="psychic"))
