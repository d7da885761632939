"""Heat, the forgetting sweep and consolidation through the real daemon, its
CLI and two synced devices (the formulas alone: tests/test_upkeep_unit.py)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mcp import ClientSession

from memvault import Client
from memvault.types import Memory
from memvault_base.errors import InvalidArgument, NotFound

from .daemon_process import DaemonProcess
from .test_cli import memvault
from .test_mcp import _call, _with_bridge

DAY = 86_400.0
NO_BACKGROUND_SWEEP = "[sweep]\nevery_hours = 0\n"


def _daemon(home: Path, config: str) -> DaemonProcess:
    home.mkdir(parents=True)
    (home / "config.toml").write_text(config)
    return DaemonProcess(home)


@pytest.fixture(scope="module")
def upkeep_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    # A vault of its own: a sweep or consolidation acts on the whole vault.
    with _daemon(tmp_path_factory.mktemp("upkeep") / "home", NO_BACKGROUND_SWEEP).start() as d:
        yield d


@pytest.fixture
def client(upkeep_daemon: DaemonProcess) -> Iterator[Client]:
    with Client(socket=upkeep_daemon.socket) as c:
        yield c


def _old(text: str, days: float, **fields: object) -> Memory:
    at = time.time() - days * DAY
    return Memory(id=uuid.uuid4().hex, text=text, created_at=at, last_reinforced_at=at,
                  **fields)  # type: ignore[arg-type]


def _eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def test_hits_carry_heat_and_band_and_only_marked_accesses_warm_them(client: Client) -> None:
    topic = f"heat.{uuid.uuid4().hex[:6]}"
    memory = _old("the greenhouse sensor reports humidity every ten minutes", 20,
                  topic_key=topic)
    client.import_memories([memory])
    for _ in range(2):  # previews leave heat alone
        (hit,) = client.recall("how often does the greenhouse sensor report", topic=topic,
                               mark_accessed=False)
        assert (hit.band, hit.memory.access_count) == ("cold", 0)
        assert 0.05 <= hit.heat < 0.25 and hit.breakdown.heat == 1.0
    client.recall("how often does the greenhouse sensor report", topic=topic)  # a real use
    (hit,) = client.recall("greenhouse sensor", topic=topic, mark_accessed=False)
    assert hit.band == "hot" and hit.memory.access_count == 1 and hit.heat > 0.5


def test_recall_keeps_one_band_when_asked(client: Client) -> None:
    topic = f"bands.{uuid.uuid4().hex[:6]}"
    frozen = _old("the old bike lock code was changed", 90, topic_key=topic)
    client.import_memories([frozen])
    fresh = client.remember("the new bike lock code is written in the notebook", topic=topic)
    query = "bike lock code"
    assert {h.memory.id for h in client.recall(query, topic=topic, top_k=5,
                                                mark_accessed=False)} == {frozen.id, fresh.id}
    for band, memory_id in (("frozen", frozen.id), ("hot", fresh.id)):
        hits = client.recall(query, topic=topic, band=band, mark_accessed=False)
        assert [h.memory.id for h in hits] == [memory_id]
    with pytest.raises(InvalidArgument, match="band"):
        client.recall(query, band="lukewarm")


def _snapshot(client: Client) -> list[dict[str, object]]:
    return sorted((m.to_dict() for m in client.export()), key=lambda d: str(d["id"]))


def test_the_sweep_forgets_only_what_no_rule_keeps(client: Client) -> None:
    minor = [_old(text, 200, importance=0.1) for text in (
        "the parking space number was 14", "the printer on floor two jams on A3",
        "lunch on the first Friday was pizza")]
    kept = [_old("pinned: the server room door code", 200, importance=0.95),
            _old("how to rotate the keys: run rotate.sh", 200, importance=0.1,
                 type="procedural"),
            _old("a minor but recent note", 5, importance=0.1),
            _old("an unrated note nobody used for a year", 365)]
    guarded = _old("the user marked this one as protected", 200, importance=0.1,
                   protected=True)
    flipped = _old("protected later through update", 200, importance=0.1)
    client.import_memories(minor + kept + [guarded, flipped])
    assert client.update(flipped.id, protected=True).memory.protected
    kept += [guarded, flipped]

    before = _snapshot(client)
    preview = client.sweep(dry_run=True)
    assert _snapshot(client) == before, "a dry run changes nothing"
    assert {s.id for s in preview.swept} == {m.id for m in minor}, preview.swept
    assert all("importance 0.10" in s.reason and s.band == "frozen" for s in preview.swept)

    done = client.sweep()
    assert {s.id for s in done.swept} == {m.id for m in minor} and done.txid > 0
    for memory in minor:
        with pytest.raises(NotFound):
            client.get(memory.id)
    # Swept into the trash, restorable until the trash purges them.
    trashed = {t.memory.id: t for t in client.trash()}
    assert all(trashed[m.id].trashed_by == "sweep" for m in minor)
    assert done.purge_at == pytest.approx(time.time() + 30 * DAY, abs=60)
    for memory in kept:
        assert client.get(memory.id).text == memory.text
    # Even at threshold 0, no rule-kept memory is on the list.
    at_zero = {s.id for s in client.sweep(dry_run=True, threshold=0.0).swept}
    assert at_zero and not at_zero & {m.id for m in kept if m.importance != 0.5}
    assert client.status().last_sweep_at >= time.time() - 60


DEPLOY = ["The deploy script lives in ops/deploy.sh.",
          "The deploy script ops/deploy.sh needs sudo. Run it from the repo root.",
          "Run the deploy script ops/deploy.sh after the tests pass."]


def test_consolidation_keeps_every_fact_and_is_found_by_the_same_query(client: Client) -> None:
    topic = f"deploy.{uuid.uuid4().hex[:6]}"
    originals = [_old(text, 30, topic_key=topic) for text in DEPLOY]
    loner = _old("The office cat is named Miso.", 30, topic_key=topic)
    client.import_memories([*originals, loner])
    query = "where does the deploy script live"
    assert originals[0].id in {h.memory.id for h in client.recall(query, mark_accessed=False)}

    before = _snapshot(client)
    preview = client.consolidate(dry_run=True)
    assert _snapshot(client) == before, "a dry run changes nothing"
    mine = [c for c in preview.consolidations if c.topic_key == topic]
    assert [sorted(c.sources) for c in mine] == [sorted(m.id for m in originals)]

    done = client.consolidate()
    (merged,) = [c for c in done.consolidations if c.topic_key == topic]
    assert merged.id == mine[0].id, "the id is decided by the sources"
    summary = client.get(merged.id)
    assert summary.consolidated_from == tuple(m.id for m in originals)
    archive = {m.id: m for m in client.sources(merged.id)}
    for original in originals:
        source = archive[original.id]
        assert (source.tier, source.consolidated_into) == ("archived", merged.id)
        for sentence in original.text.split(". "):
            assert sentence.rstrip(".") in summary.text
    assert client.get(loner.id).tier == "long_term", "a cluster of one is left alone"

    hits = [h.memory.id for h in client.recall(query, mark_accessed=False)]
    assert merged.id in hits and not set(hits) & {m.id for m in originals}
    archived = client.recall(query, tiers=["archived"], top_k=5, mark_accessed=False)
    assert {m.id for m in originals} <= {h.memory.id for h in archived}

    again = client.consolidate()
    assert not [c for c in again.consolidations if c.topic_key == topic], "idempotent"
    status = client.status(bands=True)
    assert status.last_consolidation_at >= time.time() - 60
    assert sum(status.bands.values()) == sum(
        1 for m in client.export() if m.tier != "archived" and not m.superseded_by)


def test_bad_upkeep_requests_are_refused(client: Client) -> None:
    with pytest.raises(InvalidArgument, match="scope"):
        client.consolidate(scope="galaxy")
    with pytest.raises(InvalidArgument, match="min_age_days"):
        client.consolidate(min_age_days=-1)
    with pytest.raises(InvalidArgument, match="threshold"):
        client.sweep(threshold=1.5)


def test_the_cli_sweeps_and_consolidates_in_json(upkeep_daemon: DaemonProcess) -> None:
    home = upkeep_daemon.home
    swept = memvault(home, "forget", "--sweep", "--dry-run", "--json")
    assert swept.returncode == 0, swept.stderr
    assert {"swept", "considered", "exempt", "dry_run"} <= set(json.loads(swept.stdout))
    merged = memvault(home, "consolidate", "--dry-run", "--min-age-days", "0", "--json")
    assert merged.returncode == 0, merged.stderr
    assert json.loads(merged.stdout)["dry_run"] is True
    assert memvault(home, "forget", "--sweep").returncode == 0
    status = json.loads(memvault(home, "status", "--json").stdout)
    assert set(status["bands"]) == {"hot", "warm", "cold", "frozen"}
    assert status["last_sweep_at"] > 0
    usage = memvault(home, "forget", "--sweep", "some-id")
    assert usage.returncode == 2 and "one of ID, --filter or --sweep" in usage.stderr


def test_an_agent_previews_and_runs_upkeep_through_mcp(upkeep_daemon: DaemonProcess,
                                                       client: Client) -> None:
    topic = f"mcp.{uuid.uuid4().hex[:6]}"
    fresh = [{"text": text, "topic": topic} for text in DEPLOY]  # a bulk import, never used
    ids = sorted(r.id for r in client.remember_batch(fresh))
    minor = _old("an old scribble about the vending machine", 300, importance=0.05)
    client.import_memories([minor])

    async def body(session: ClientSession) -> None:
        preview = await _call(session, "consolidate", dry_run=True, min_age_days=0)
        assert ids in [sorted(c["sources"]) for c in preview["consolidations"]]
        assert all(client.get(i).tier == "long_term" for i in ids)
        done = await _call(session, "consolidate", min_age_days=0)
        (merged,) = [c for c in done["consolidations"] if sorted(c["sources"]) == ids]
        assert all(client.get(i).consolidated_into == merged["id"] for i in ids)
        swept = await _call(session, "forget", sweep=True, dry_run=True)
        assert {"id": minor.id, "text": minor.text} in [
            {"id": s["id"], "text": s["text"]} for s in swept["would_forget"]]
        assert client.get(minor.id).text == minor.text
        refused = await session.call_tool("forget", {"dry_run": True, "id": minor.id})
        assert refused.is_error

    _with_bridge(str(upkeep_daemon.home), body)


def test_the_background_sweep_runs_on_its_schedule(tmp_path: Path) -> None:
    # every_hours = 0.0005 is 1.8 s: the schedule checks every second.
    with _daemon(tmp_path / "home", "[sweep]\nevery_hours = 0.0005\n").start() as daemon, \
            Client(socket=daemon.socket) as client:
        minor = _old("an old minor note nobody needs", 300, importance=0.05)
        client.import_memories([minor])
        _eventually(lambda: not any(m.id == minor.id for m in client.export()))
        swept_at = client.status().last_sweep_at
        assert swept_at > 0
        # The time of the last sweep outlives a restart (the stop's snapshot
        # carries it; the log it was in is pruned).
        (daemon.home / "config.toml").write_text(NO_BACKGROUND_SWEEP)
        assert daemon.stop() == 0
        daemon.start()
        assert client.status().last_sweep_at >= swept_at


def test_two_devices_consolidating_at_once_converge_on_one_memory(tmp_path: Path) -> None:
    remote = f"file://{tmp_path / 'remote'}"
    with _daemon(tmp_path / "a", NO_BACKGROUND_SWEEP).start() as a, \
            _daemon(tmp_path / "b", NO_BACKGROUND_SWEEP).start() as b, \
            Client(socket=a.socket) as ca, Client(socket=b.socket) as cb:
        cb.join_sync(remote, ca.init_sync(remote).recovery_key)
        originals = [_old(text, 30, topic_key="deploy") for text in DEPLOY]
        ca.import_memories(originals)
        _eventually(lambda: len(list(cb.export())) == len(originals))
        results = {}
        runs = [threading.Thread(target=lambda c=c: results.setdefault(c, c.consolidate()))
                for c in (ca, cb)]
        for run in runs:
            run.start()
        for run in runs:
            run.join()

        def settled(c: Client) -> list[Memory]:
            return sorted((m for m in c.export() if m.consolidated_from), key=lambda m: m.id)

        _eventually(lambda: settled(ca) and [m.id for m in settled(ca)] == [
            m.id for m in settled(cb)] and ca.sync_now() and cb.sync_now() is not None)
        _eventually(lambda: _snapshot(ca) == _snapshot(cb))
        (summary,) = settled(ca)
        assert sorted(summary.consolidated_from) == sorted(m.id for m in originals)
        assert all(m.tier == "archived" for m in ca.export() if m.id in summary.consolidated_from)
        assert ca.status().last_consolidation_at > 0 and cb.status().last_consolidation_at > 0


def test_an_imported_memory_without_times_arrives_now(upkeep_daemon: DaemonProcess,
                                                     tmp_path: Path) -> None:
    # A line written by hand, or by another tool, carries no times: it is
    # new to this vault, not months old (it was frozen, and the next sweep
    # forgot it when rated minor).
    memory_id = uuid.uuid4().hex
    lines = tmp_path / "handwritten.jsonl"
    lines.write_text(json.dumps({"id": memory_id, "importance": 0.1,
                                 "text": "the spare key is under the blue flowerpot"}) + "\n")
    before = time.time()
    done = memvault(upkeep_daemon.home, "import", str(lines), "--json")
    assert done.returncode == 0, done.stderr
    with Client(socket=upkeep_daemon.socket) as client:
        got = client.get(memory_id)
        assert before - 1 <= got.created_at <= time.time() + 1
        assert got.last_reinforced_at == got.created_at
        hits = client.recall("where is the spare key", band="hot", mark_accessed=False)
        assert memory_id in {h.memory.id for h in hits}
        plan = client.sweep(dry_run=True, threshold=0.01)
        assert memory_id not in {s.id for s in plan.swept}
