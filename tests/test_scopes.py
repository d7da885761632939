"""Scopes, end to end: clients that declare their access to a real daemon over
its socket see only their scopes (and `user`) and topics, and every write
outside them is refused (docs/scopes.md)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import grpc
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from memvault import Client
from memvault.types import Memory
from memvault_base.errors import InvalidArgument, NotFound, PermissionDenied
from memvault_base.v1 import memory_pb2 as pb

from .daemon_process import DaemonProcess

API, WEB = "project:api", "project:web"
OLD_VAULT = Path(__file__).parent / "data" / "vault_before_scopes"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    with DaemonProcess(tmp_path_factory.mktemp("scopes") / "home").start() as proc:
        yield proc
        proc.stop()


@pytest.fixture(scope="module")
def vault(served: DaemonProcess) -> dict[str, str]:
    """One memory per scope, written with full access: their ids by name."""
    with Client(served.socket) as full:
        ids = {
            "user": full.remember("the user prefers short commit messages",
                                  topic="user.preferences.git").id,
            "api": full.remember("the api service deploys with helm on fridays",
                                 topic="work.deploy", scope=API).id,
            "web": full.remember("the web frontend deploys with vercel on mondays",
                                 topic="work.deploy", scope=WEB).id,
            "api_notes": full.remember("the api service has a flaky login test",
                                       topic="notes.tests", scope=API).id,
        }
    return ids


def _client(served: DaemonProcess, **access: Any) -> Client:
    return Client(served.socket, **access)


def test_a_memory_written_without_a_scope_is_the_users(served: DaemonProcess,
                                                       vault: dict[str, str]) -> None:
    with Client(served.socket) as full:
        assert full.get(vault["user"]).scope == "user"
        assert full.get(vault["api"]).scope == API
        # A scoped client's remember goes to its first scope other than user.
        with _client(served, scopes=["user", API]) as scoped:
            stored = scoped.remember("the api team reviews on tuesdays", topic="work.review")
        assert full.get(stored.id).scope == API
        full.forget(stored.id, purge=True)


def test_scope_strings_are_checked_and_the_error_names_what_is_wrong(
        served: DaemonProcess) -> None:
    with Client(served.socket) as full:
        with pytest.raises(InvalidArgument, match="'projekt:api' is not a scope"):
            full.remember("x marks the spot", scope="projekt:api")
        with pytest.raises(InvalidArgument, match="names no project"):
            full.remember("x marks the spot", scope="project:")
    with _client(served, scopes=["project:a b"]) as bad, \
            pytest.raises(InvalidArgument, match="memvault-scopes: the name in 'project:a b'"):
        bad.status()
    with _client(served, topics=["wo*rk"]) as bad, \
            pytest.raises(InvalidArgument, match="not a topic pattern"):
        bad.status()


def test_a_scoped_client_sees_its_scope_and_the_users_only(served: DaemonProcess,
                                                           vault: dict[str, str]) -> None:
    with _client(served, scopes=[API]) as api:
        hits = api.recall("how does the service deploy?", top_k=10)
        found = {hit.memory.id for hit in hits}
        assert vault["api"] in found and vault["web"] not in found
        assert {hit.memory.scope for hit in hits} <= {API, "user"}
        # Not padded: asking for many still returns only what it may see.
        assert all(hit.memory.scope in (API, "user")
                   for hit in api.recall("deploys", top_k=50, mode="keyword"))
        assert api.get(vault["user"]).scope == "user"
        with pytest.raises(NotFound):
            api.get(vault["web"])
        with pytest.raises(NotFound):
            api.resolve_id(vault["web"][:8])
        listed = {m.memory.id for m in api.list_memories(limit=500).memories}
        assert {vault["user"], vault["api"], vault["api_notes"]} <= listed
        assert vault["web"] not in listed
        assert vault["web"] not in {m.id for m in api.export()}
        with Client(served.socket) as full:
            assert vault["web"] in {m.id for m in full.export()}
    with _client(served, scopes=[WEB]) as web:
        assert vault["api"] not in {hit.memory.id for hit in web.recall("helm", top_k=10)}


def test_events_name_only_memories_the_caller_may_see(served: DaemonProcess) -> None:
    heard: list[str] = []
    with _client(served, scopes=[API]) as api, api.events(["remember", "hit"]) as stream:
        def listen() -> None:
            for event in stream:
                heard.append(event.id or event.type)

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        with Client(served.socket) as full:
            full.wait_ready()
            threading.Event().wait(0.3)  # the subscription is in place
            hidden = full.remember("the web team uses pnpm", scope=WEB, new=True).id
            shown = full.remember("the api team uses uv", scope=API, new=True).id
            deadline = threading.Event()
            for _ in range(50):
                if shown in heard:
                    break
                deadline.wait(0.1)
        stream.cancel()
        listener.join(5)
    assert shown in heard and hidden not in heard


def test_every_write_outside_the_scopes_is_refused(served: DaemonProcess,
                                                   vault: dict[str, str]) -> None:
    web, user = vault["web"], vault["user"]
    with _client(served, scopes=[API]) as api:
        refusals = {
            "remember": lambda: api.remember("the web build uses vite", scope=WEB),
            "update": lambda: api.update(web, text="the web frontend deploys by hand"),
            "update a user memory": lambda: api.update(user, importance=0.9),
            "move into another scope": lambda: api.update(vault["api"], scope=WEB),
            "supersede": lambda: api.supersede(web, "the web frontend deploys on tuesdays"),
            "reinforce": lambda: api.reinforce(web),
            "forget": lambda: api.forget(web),
            "forget a user memory": lambda: api.forget(user),
            "import": lambda: api.import_memories([{"id": "1" * 32, "text": "imported",
                                                     "scope": WEB}]),
            "empty the trash": api.empty_trash,
            "sweep": lambda: api.sweep(dry_run=True),
            "consolidate": lambda: api.consolidate(dry_run=True),
            "sync": api.sync_status,
            "check": lambda: api.check(remote=False),
        }
        for what, refused in refusals.items():
            with pytest.raises(PermissionDenied) as caught:
                refused()
            assert str(caught.value), what
        with pytest.raises(PermissionDenied, match="scope project:web is outside"):
            api.remember("the web build uses vite", scope=WEB)
        with pytest.raises(PermissionDenied, match="in scope user, which this caller may read"):
            api.update(user, importance=0.9)
        # A filter forgets only what the caller may change.
        assert api.forget_where({"topic_key": "work.deploy"}, dry_run=True).ids == (
            vault["api"],)
    with Client(served.socket) as full:
        # Nothing above changed anything.
        assert full.get(web).text == "the web frontend deploys with vercel on mondays"
        assert full.get(user).importance == 0.5
        assert full.get(vault["api"]).scope == API
        # A memory in the trash of another project cannot be restored by this one.
        full.forget(web)
        with _client(served, scopes=[API]) as api:
            with pytest.raises(PermissionDenied):
                api.restore([web])
            assert web not in {t.memory.id for t in api.trash()}
            assert api.restore_all().memories == ()
        full.restore([web])


def test_writes_inside_the_scope_work(served: DaemonProcess) -> None:
    with _client(served, scopes=[API]) as api:
        stored = api.remember("the api uses postgres 16", topic="work.db")
        api.update(stored.id, text="the api uses postgres 17")
        api.reinforce(stored.id)
        newer = api.supersede(stored.id, "the api uses postgres 18")
        assert api.get(newer.id).scope == API
        api.forget(newer.id)
        assert api.restore([newer.id]).memories[0].id == newer.id
        api.forget(newer.id, purge=True)


def test_topics_restrict_what_is_seen_and_written(served: DaemonProcess,
                                                  vault: dict[str, str]) -> None:
    with _client(served, scopes=[API], topics=["work.*"]) as work:
        found = {hit.memory.id for hit in work.recall("the api service", top_k=10)}
        assert vault["api"] in found and vault["api_notes"] not in found
        assert vault["user"] not in found  # user.preferences is not under work
        with pytest.raises(NotFound):
            work.get(vault["api_notes"])
        assert {t.name for t in work.list_topics()} <= {"work", "work.deploy", "work.db",
                                                        "work.review"}
        with pytest.raises(PermissionDenied, match=r"topic .notes\.x. is outside"):
            work.remember("a note", topic="notes.x")
        with pytest.raises(PermissionDenied):
            work.update(vault["api"], topic="notes.deploy")
        with pytest.raises(PermissionDenied, match="append turns"):
            work.append_turns("s1", [{"speaker": "user", "text": "hello"}])
        stored = work.remember("the api deploy needs a change ticket", topic="work.deploy.rules")
    with Client(served.socket) as full:
        full.forget(stored.id, purge=True)


def test_read_only_refuses_every_write(served: DaemonProcess, vault: dict[str, str]) -> None:
    with _client(served, scopes=[API], read_only=True) as ro:
        assert ro.recall("helm", top_k=3)
        mine = vault["api"]
        refusals = [
            lambda: ro.remember("anything at all"),
            lambda: ro.remember_batch([{"text": "anything"}]),
            lambda: ro.update(mine, importance=0.7),
            lambda: ro.supersede(mine, "the api deploys by hand"),
            lambda: ro.reinforce(mine),
            lambda: ro.forget(mine),
            lambda: ro.forget_where({"topic_key": "work.deploy"}, dry_run=True),
            lambda: ro.restore([mine]),
            lambda: ro.append_turns("s1", [{"speaker": "user", "text": "hi"}]),
            lambda: ro.import_memories([{"id": "2" * 32, "text": "imported"}]),
            ro.empty_trash,
        ]
        for refused in refusals:
            with pytest.raises(PermissionDenied, match=r"read-only|full access"):
                refused()
    with Client(served.socket) as full:
        assert full.get(vault["api"]).reinforce_count == 0


def test_the_metadata_is_checked_by_the_daemon_for_any_grpc_caller(
        served: DaemonProcess) -> None:
    with grpc.insecure_channel(f"unix://{served.socket}") as channel:
        remember = channel.unary_unary("/memvault.v1.Memory/Remember",
                                       request_serializer=pb.RememberRequest.SerializeToString,
                                       response_deserializer=pb.RememberReply.FromString)
        request = pb.RememberRequest(memory=pb.MemoryInput(text="written over raw grpc"))
        for metadata, code in (((("memvault-read-only", "1"),), grpc.StatusCode.PERMISSION_DENIED),
                               ((("memvault-scope", API),), grpc.StatusCode.INVALID_ARGUMENT)):
            with pytest.raises(grpc.RpcError) as caught:
                remember(request, metadata=metadata, timeout=30)
            assert caught.value.code() == code, caught.value.details()


# -- the MCP bridge -------------------------------------------------------------------


def _bridge(home: Path, args: list[str], body: Any) -> None:
    async def main() -> None:
        # The bridge runs the code this test runs (PYTHONPATH), as an agent host starts it.
        env = {"MEMVAULT_HOME": str(home)}
        if "PYTHONPATH" in os.environ:
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "memvault.cli.main", "mcp", *args], env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await body(session)

    anyio.run(main)


def test_a_read_only_project_bridge_lists_no_writing_tool_and_sees_no_other_project(
        served: DaemonProcess, vault: dict[str, str]) -> None:
    async def body(session: ClientSession) -> None:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert tools == {"recall", "get", "list_topics"}
        result = await session.call_tool("recall", {"query": "how does it deploy?",
                                                    "top_k": 10})
        hits = json.loads("".join(getattr(b, "text", "") for b in result.content))
        ids = {hit["id"] for hit in hits}
        assert vault["api"] in ids and vault["web"] not in ids
        assert {hit.get("scope", "user") for hit in hits} <= {API, "user"}
        got = await session.call_tool("get", {"id": vault["web"]})
        assert got.is_error
        topics = await session.call_tool("list_topics", {})
        assert "notes.tests" in "".join(getattr(b, "text", "") for b in topics.content)
        # A tool it does not list cannot be called either.
        refused = await session.call_tool("remember", {"text": "sneaked in"})
        assert refused.is_error

    _bridge(served.home, ["--scope", API, "--read-only"], body)
    with Client(served.socket) as full:
        assert "sneaked in" not in {m.text for m in full.export()}


def test_a_scoped_bridge_writes_in_its_scope_and_has_no_consolidate(
        served: DaemonProcess, vault: dict[str, str]) -> None:
    stored: list[str] = []

    async def body(session: ClientSession) -> None:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert "remember" in tools and "consolidate" not in tools
        result = await session.call_tool("remember", {"text": "the api runbook is in docs/ops"})
        assert not result.is_error
        stored.append(json.loads(result.content[0].text)["id"])  # type: ignore[union-attr]
        refused = await session.call_tool("update_memory", {"id": vault["web"], "text": "no"})
        assert refused.is_error and "not in this caller's" in str(refused.content)

    _bridge(served.home, ["--scope", API], body)
    with Client(served.socket) as full:
        assert full.get(stored[0]).scope == API
        full.forget(stored[0], purge=True)


# -- a vault written before scopes ----------------------------------------------------


def test_a_vault_written_before_scopes_opens_and_its_memories_are_the_users(
        tmp_path: Path) -> None:
    # A snapshot (2 memories) and a log record after it (1 more), both
    # written by memvault before memories had a scope.
    home = tmp_path / "home"
    shutil.copytree(OLD_VAULT, home / "data")
    (home / "data").chmod(0o700)
    with DaemonProcess(home).start() as old:
        with Client(old.socket) as full:
            memories: list[Memory] = list(full.export())
            assert sorted(m.text for m in memories) == [
                "the api project deploys with helm",
                "the user prefers pytest over unittest",
                "the user's editor is helix"]
            assert {m.scope for m in memories} == {"user"}
            with _client(old, scopes=[API]) as api:
                assert len(api.recall("which editor?", top_k=5)) >= 1
        old.stop()
