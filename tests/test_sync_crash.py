"""kill -9 of a syncing daemon, mid-push and mid-pull: nothing acknowledged is
lost, nothing is applied twice, and the two devices converge.

The site is test_remote_faults.py's: laptop A and desktop B, two daemons as
users run them, in one vault on a real memvault-server on a loopback port,
reached through its `FaultProxy`, which forwards every call untouched unless
told otherwise. A's backlog is written while the proxy answers every call
UNAVAILABLE, so A holds it all, acknowledged, and nothing of it is pushed
yet: BACKLOG_VERSIONS versions' worth of operations, each 1,000 of them new
memories with their own vectors (no call waits for the model), then
reinforcements, updates and forgets of earlier ones, so that an operation
applied twice would show (a reinforce count one too high).

Mid-push: A is killed three times while it pushes the backlog, and restarted
on the same home each time:

1. at its 2nd AppendVersion, by the proxy, after the server stored the
   version: A never hears back, and the restart forgets it tried, so those
   1,000 operations are sent again (`SyncWorker._own_version`: expected,
   harmless);
2. at its 2nd AppendVersion after that restart, before the server sees it;
3. between two appends, once its status shows one more version pushed, just
   after it acknowledged a write, 0-50 ms later (sealing, appending, or
   saving its mark).

Mid-pull: B is off while A pushes the backlog, then started, and killed
three times while it pulls: after its first new version, after its third,
and four versions before the end, each 0-50 ms after its status showed
that head (fetching, applying the 1,000 operations of a version, or saving
its mark); after each restart, before the kill, B acknowledges a write of
its own. After the second kill B's mark is put back to where it was
when B was stopped: a kill between applying a version and saving the mark,
at its widest, so every version B applied since is offered to it again. On
each restart B's head shows where the kill left its mark; each must be short
of the remote's head.

Then, both: every memory either device acknowledged is on both, B's export
equals A's (counts, reinforce counts, categories, forgotten ones gone), and
the chain holds every memory's put.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import numpy as np
import pytest

from memvault import Client, Memory
from memvault.types import SyncInfo
from memvault_base.errors import MemvaultError
from memvaultd.model.operations import PUT
from memvaultd.sync.high_water import FILE_NAME
from memvaultd.sync.version_body import OPS_PER_VERSION

from .daemon_process import DaemonProcess
from .test_remote_faults import (
    Cut,
    Site,
    batch,
    eventually,
    start_site,
    stop_site,
    unit_vectors,
)
from .test_sync import _views

BACKLOG_VERSIONS = 10
# Of each 1,000 operations of the backlog; the rest are new memories.
REINFORCES, UPDATES, FORGETS = 25, 15, 5
# A restart replays ~10,000 log records and loads the model beside other test
# runs on two cores: seconds, and tens of them on a bad day.
START_S = 90.0
CONVERGE_S = 120.0


@dataclass
class Written:
    """What the devices acknowledged."""

    ids: list[str] = field(default_factory=list)  # forgotten ones included
    reinforced: Counter[str] = field(default_factory=Counter)  # calls per memory
    forgotten: set[str] = field(default_factory=set)

    @property
    def alive(self) -> list[str]:
        return [i for i in self.ids if i not in self.forgotten]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    started = start_site(tmp_path)
    yield started
    stop_site(started)


def write_backlog(site: Site, rng: np.random.Generator, picks: random.Random) -> Written:
    """BACKLOG_VERSIONS x 1,000 operations, acknowledged by A while the remote
    answers every call UNAVAILABLE; the remote is left that way."""
    site.proxy.codes = (grpc.StatusCode.UNAVAILABLE,)
    written, ca = Written(), site.ca
    for n in range(BACKLOG_VERSIONS):
        new = OPS_PER_VERSION - REINFORCES - UPDATES - FORGETS
        written.ids += [r.id for r in ca.remember_batch(batch(rng, new, f"backlog{n}"))]
        for memory_id in picks.sample(written.alive, REINFORCES):
            ca.reinforce(memory_id)
            written.reinforced[memory_id] += 1
        for k, memory_id in enumerate(picks.sample(written.alive, UPDATES)):
            ca.update(memory_id, category=f"edited {n}.{k}")
        for memory_id in picks.sample(written.alive, FORGETS):
            ca.forget(memory_id)
            written.forgotten.add(memory_id)
    return written


def remote_head(site: Site) -> int:
    """The server's chain length, read from its store (docs/format.md's layout)."""
    return len(list(site.server.data_dir.glob("store/*/versions/*")))


def restart(site: Site, daemon: DaemonProcess) -> None:
    """Start `daemon` on its home again; return once its socket answers (its
    sync worker resumes right after the vault is loaded, before SERVING)."""
    daemon.start(wait=False)
    eventually(lambda: daemon.health() in ("NOT_SERVING", "SERVING"), START_S,
               "the restarted daemon answers")
    site.reconnect()


def head_reaches(client: Client, head: int) -> SyncInfo:
    """The device's sync status once it has resumed sync and its head is
    `head` or more. Right after a restart (`head` 0) that is the head its mark
    was left at: the worker's first round waits 0.2 s, then downloads
    before it applies anything."""
    seen: list[SyncInfo] = []

    def reached() -> bool:
        with suppress(MemvaultError):  # loading
            seen.append(client.sync_status())
            return seen[-1].configured and seen[-1].head >= head
        return False

    eventually(reached, START_S, f"the device's head reaches {head}")
    return seen[-1]


def sync_now_until_killed(client: Client) -> None:
    """`memvault sync now`: A's worker may be in a back-off of seconds after
    the refused rounds. The answer is lost with A."""
    with suppress(MemvaultError):
        client.sync_now()


def remember_one(client: Client, rng: np.random.Generator, label: str) -> str:
    return client.remember(f"{label}: written mid-sync", topic=label,
                           vector=unit_vectors(rng, 1)[0]).id


def assert_holds(client: Client, written: Written) -> dict[str, Memory]:
    """What `client` exports, once it is checked against what was acknowledged."""
    held = {memory.id: memory for memory in client.export()}
    missing = [memory_id for memory_id in written.alive if memory_id not in held]
    assert not missing, f"{len(missing)} acknowledged memories missing, e.g. {missing[:3]}"
    assert not written.forgotten & held.keys(), "a forgotten memory is back"
    for memory_id, calls in written.reinforced.items():
        if memory_id in held:
            assert held[memory_id].reinforce_count == calls, memory_id
    return held


def converge(site: Site, since: float) -> float:
    """Seconds from `since` (a restart) until A and B export the same, left
    to their sync workers (no `sync now`)."""

    def same() -> bool:
        views = _views(site.ca, site.cb)
        return views[0] == views[1]

    eventually(same, CONVERGE_S, "A and B export the same memories")
    return time.monotonic() - since


def check_state(site: Site, written: Written) -> dict[str, int]:
    """What a user would see on both devices, and what the chain holds."""
    assert len(assert_holds(site.ca, written)) == len(assert_holds(site.cb, written))
    ops = site.chain_ops()
    puts = Counter(op.memory_id for op in ops if op.kind == PUT)
    assert all(puts[memory_id] >= 1 for memory_id in written.ids), "a put missing on the remote"
    copies = Counter(op.op_id for op in ops)
    assert max(copies.values()) <= 2, "an operation is on the remote three times or more"
    return {"operations on the remote": len(ops),
            "sent twice": sum(1 for n in copies.values() if n > 1)}


def test_kill_9_mid_push_loses_nothing_and_converges(site: Site) -> None:
    rng, picks = np.random.default_rng(31), random.Random(31)
    written = write_backlog(site, rng, picks)

    # 1: the server stores A's 2nd version; the reply is lost with A.
    cut = Cut("laptop", nth=2, landed=True, kill=site.a.kill)
    site.proxy.cut, site.proxy.codes = cut, ()
    pusher = threading.Thread(target=sync_now_until_killed, args=(site.ca,), daemon=True)
    pusher.start()
    assert cut.done.wait(60), "A reached its 2nd append"
    pusher.join(30)
    kill_heads = [remote_head(site)]

    # 2: restarted, A is killed at its 2nd append, before the server has it.
    cut = Cut("laptop", nth=2, landed=False, kill=site.a.kill)
    site.proxy.cut = cut
    restart(site, site.a)
    assert cut.done.wait(60), "A reached its 2nd append after the restart"
    kill_heads.append(remote_head(site))

    # 3: restarted, A is killed between appends, after acknowledging a write.
    restart(site, site.a)
    head_reaches(site.ca, kill_heads[-1] + 1)
    written.ids.append(remember_one(site.ca, rng, "push.kill3"))
    time.sleep(picks.uniform(0.0, 0.05))
    site.a.kill()
    kill_heads.append(remote_head(site))

    restarted = time.monotonic()
    restart(site, site.a)
    site.a.wait_serving(START_S)
    assert_holds(site.ca, written)  # A lost nothing it acknowledged
    eventually(lambda: remote_head(site) > kill_heads[-1], CONVERGE_S,
               "A pushes the rest of its backlog (else the last kill came too late)")
    written.ids.append(remember_one(site.ca, rng, "push.after"))
    converge_s = converge(site, restarted)
    figures = check_state(site, written)
    # Only a version whose reply a kill took away is sent again (kills 1 and 3).
    assert figures["sent twice"] <= 2 * OPS_PER_VERSION
    print("killed mid-push:", {"kills": 3, "remote head at each kill": kill_heads,
                               "acknowledged memories": len(written.ids), **figures,
                               "converged after the last restart (s)": round(converge_s, 1)})


def test_kill_9_mid_pull_applies_nothing_twice_and_converges(site: Site) -> None:
    rng, picks = np.random.default_rng(37), random.Random(37)
    start = site.cb.sync_status().head
    site.b.stop()
    mark = site.b.home / "data" / FILE_NAME
    stopped_mark = mark.read_bytes()
    written = write_backlog(site, rng, picks)
    site.proxy.codes = ()
    site.ca.sync_now()
    assert site.ca.sync_status().pending == 0, "A pushed its backlog"
    end = remote_head(site)
    assert end - start >= BACKLOG_VERSIONS

    seen_at_kill, left_at = [], []
    for kill, target in enumerate((start + 1, start + 3, end - 4)):
        restart(site, site.b)
        left_at.append(head_reaches(site.cb, 0).head)
        written.ids.append(remember_one(site.cb, rng, f"pull.kill{kill}"))
        seen_at_kill.append(head_reaches(site.cb, target).head)
        time.sleep(picks.uniform(0.0, 0.05))
        site.b.kill()
        if kill == 1:
            # A kill between applying a version and saving the mark, at its
            # widest: every version B applied since it was stopped is
            # pulled and offered to it again.
            mark.write_bytes(stopped_mark)
    restarted = time.monotonic()
    restart(site, site.b)
    left_at = [*left_at[1:], head_reaches(site.cb, 0).head]
    assert max(left_at) < end, f"a kill came after B had pulled everything: {left_at}"
    converge_s = converge(site, restarted)
    figures = check_state(site, written)
    print("killed mid-pull:", {"kills": 3, "remote head": end,
                               "B's head seen just before each kill": seen_at_kill,
                               "B's mark when restarted": left_at,
                               "acknowledged memories": len(written.ids), **figures,
                               "converged after the last restart (s)": round(converge_s, 1)})
