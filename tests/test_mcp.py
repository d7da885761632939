"""`memvault mcp`, end to end: an MCP client over stdio, the bridge, a real daemon."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from memvault import Client

from .daemon_process import DaemonProcess

TOOLS = {"remember", "recall", "get", "supersede", "update_memory", "forget", "consolidate",
         "list_topics"}


def _with_bridge(home: str, body: Callable[[ClientSession], Awaitable[None]]) -> None:
    """Run `body` against `memvault mcp` started as an agent host starts it."""

    async def main() -> None:
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "memvault.cli.main", "mcp"],
                                       env={"MEMVAULT_HOME": home})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await body(session)

    anyio.run(main)


async def _call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    assert not result.is_error, f"{tool} failed: {text}"
    return json.loads(text)


def test_lists_the_eight_tools_with_schemas_and_guidance(daemon: DaemonProcess) -> None:
    async def body(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        assert "at the start of" in (tools["recall"].description or "")
        assert "states a preference" in (tools["remember"].description or "")
        assert tools["recall"].input_schema["required"] == ["query"]
        assert tools["remember"].input_schema["required"] == ["text"]
        assert set(tools["update_memory"].input_schema["required"]) == {"id", "text"}
        assert set(tools["supersede"].input_schema["required"]) == {"id", "text"}
        assert tools["get"].input_schema["required"] == ["id"]
        # forget takes an id, or sweep: true (with dry_run): neither is required alone.
        assert {"id", "sweep", "dry_run"} <= set(tools["forget"].input_schema["properties"])
        assert "dry_run" in tools["consolidate"].input_schema["properties"]
        for tool in tools.values():
            assert tool.input_schema["type"] == "object"
            for name, prop in tool.input_schema.get("properties", {}).items():
                assert prop.get("description"), f"{tool.name}.{name} has no description"

    _with_bridge(str(daemon.home), body)


def test_remember_then_recall_update_and_forget(daemon: DaemonProcess) -> None:

    async def body(session: ClientSession) -> None:
        stored = await _call(session, "remember",
                             text="the user deploys the mcp demo on thursdays",
                             topic="user.habits.deploy", tags=["ops"], importance=0.7)
        assert set(stored) == {"id", "outcome", "reinforced"}
        assert (stored["outcome"], stored["reinforced"]) == ("added", False)
        hits = await _call(session, "recall", query="when does the user deploy the mcp demo?",
                           topic="user.habits.deploy")
        assert [h["id"] for h in hits] == [stored["id"]]
        hit = hits[0]
        assert hit["text"] == "the user deploys the mcp demo on thursdays"
        assert hit["topic"] == "user.habits.deploy" and hit["tags"] == ["ops"]
        assert hit["source"] == "mcp" and hit["score"] > 0
        assert "vector" not in hit and "session_id" not in hit  # compact: empty fields dropped

        updated = await _call(session, "update_memory", id=stored["id"],
                              text="the user deploys the mcp demo on fridays now")
        assert updated == {"id": stored["id"], "updated": True}  # in place: same id
        hits = await _call(session, "recall", query="when does the user deploy the mcp demo?",
                           topic="user.habits.deploy")
        assert [(h["id"], h["text"], h["tags"]) for h in hits] == [
            (stored["id"], "the user deploys the mcp demo on fridays now", ["ops"])]
        moved = await _call(session, "update_memory", id=stored["id"],
                            text="the user deploys the mcp demo on fridays now",
                            topic="user.habits.release", tags=["ops", "release"])
        assert moved["id"] == stored["id"]
        hits = await _call(session, "recall", query="when does the user deploy the mcp demo?",
                           topic="user.habits.release")
        assert [(h["topic"], h["tags"]) for h in hits] == [
            ("user.habits.release", ["ops", "release"])]

        with Client(socket=daemon.socket) as client:  # what the bridge did, the daemon kept
            kept = client.get(stored["id"])
            assert (kept.text, kept.source, kept.importance, kept.superseded_by) == (
                "the user deploys the mcp demo on fridays now", "mcp", 0.7, "")
        assert await _call(session, "forget", id=stored["id"]) == {
            "id": stored["id"], "forgotten": True, "in_trash": True,
            "restore": f"memvault trash restore {stored['id']}"}
        assert await _call(session, "recall", query="when does the user deploy the mcp demo?",
                           topic="user.habits.release") == []

    _with_bridge(str(daemon.home), body)


def test_list_topics(daemon: DaemonProcess) -> None:
    async def body(session: ClientSession) -> None:
        await _call(session, "remember", text="the user's editor is helix",
                    topic="user.tools.editor")
        topics = await _call(session, "list_topics")
        editor = [t for t in topics if t["topic"] == "user.tools.editor"]
        assert len(editor) == 1 and editor[0]["count"] >= 1
        assert editor[0]["last_activity"].endswith("Z")

    _with_bridge(str(daemon.home), body)


def test_errors_reach_the_agent_as_tool_errors(daemon: DaemonProcess) -> None:
    async def body(session: ClientSession) -> None:
        result = await session.call_tool("forget", {"id": "no-such-memory"})
        text = "".join(getattr(block, "text", "") for block in result.content)
        assert result.is_error and "no-such-memory" in text

    _with_bridge(str(daemon.home), body)


def test_without_a_daemon_the_tools_say_how_to_start_it(tmp_path: Any) -> None:
    async def body(session: ClientSession) -> None:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert tools == TOOLS  # the bridge itself starts without a daemon
        result = await session.call_tool("recall", {"query": "anything"})
        text = "".join(getattr(block, "text", "") for block in result.content)
        assert result.is_error and "not running" in text

    _with_bridge(str(tmp_path / "nowhere"), body)


@pytest.mark.parametrize("bad", [{"text": ""}, {"text": "x", "importance": 2}])
def test_bad_arguments_are_refused_before_the_daemon(daemon: DaemonProcess,
                                                     bad: dict[str, Any]) -> None:
    async def body(session: ClientSession) -> None:
        result = await session.call_tool("remember", bad)
        assert result.is_error

    _with_bridge(str(daemon.home), body)
