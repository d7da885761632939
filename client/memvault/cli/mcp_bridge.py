"""`memvault mcp`: the daemon's memory as MCP tools, over stdio.

An agent host (Claude Code, Claude Desktop, Cursor) starts this process and
speaks MCP on its stdin/stdout; every tool call becomes one call to the daemon
through `memvault.Client`, on a worker thread so the MCP loop never blocks on
the socket. Nothing is kept here: the bridge holds no memory and no key, and
an agent that reaches it reaches only what the user's own `memvault` CLI could.

A bridge started with `--scope`, `--topics` or `--read-only` declares that
access with every call (docs/scopes.md): the daemon shows it only those
scopes (and `user`) and topics and refuses what is outside; with
`--read-only` it lists only `recall`, `get` and `list_topics`, and without
full access no `consolidate`.

Tools: `recall`, `get` (one memory and its chain of versions), `remember`,
`supersede`, `update_memory`, `forget` (by id, or a sweep of what is cold and
minor; always into the trash, never purged: an agent misled by what it read
cannot erase anything the user cannot restore), `consolidate`, `list_topics`;
each carries MCP's annotations (`readOnlyHint` for the reads,
`destructiveHint` for forget). Their
descriptions say *when* to call them, because that is what an agent reads to
decide (the habit of the popular memory servers: "use this at the start of a
task", "call this when the user states a preference"). Results are compact
JSON: empty fields dropped, scores to three decimals, times as ISO dates; a
recall of three hits is ~600 bytes instead of the CLI's ~1.5 KB.
"""

# No `from __future__ import annotations` here: the tools' annotations name
# pydantic's Field, imported lazily inside build_server, and MCP reads them at
# registration, so they must be evaluated where the tools are defined.
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import click

from memvault import __version__
from memvault.client import Client
from memvault.types import Hit, Memory, RememberResult
from memvault_base.errors import MemvaultError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["INSTRUCTIONS", "build_server", "mcp", "run"]

SOURCE = "mcp"  # what `source` says on memories written through the bridge, by default
BY = "mcp"  # what the trash says forgot a memory through the bridge

INSTRUCTIONS = """\
memvault is the user's private long-term memory, shared by their agents and \
devices. Call `recall` at the start of a task and whenever earlier context might \
matter; call `remember` when the user states a preference, makes a decision, or \
tells you a durable fact. Keep each memory one self-contained statement."""

RECALL = """\
Search the user's long-term memory for what is relevant now. Use this at the start \
of every task, and whenever the user refers to earlier work, their preferences, a \
project's conventions or past decisions ("as before", "the usual way", "what did we \
decide"), and before asking the user something they may already have told you. \
Returns the best matches first: [{"id", "text", "score", "topic", ...}]. An empty \
list means nothing relevant is stored: say so, never invent a memory. `topic` keeps \
that topic and the topics below it, as `list_topics` shows them."""

GET = """\
Read one memory by id, with its chain of versions (oldest first: what it said \
before each correction). Use this when the user asks what a memory said before, \
or to check a memory that `remember` reports it superseded or reinforced. \
Returns {"memory": {...}, "chain": [{...}, ...]}."""

REMEMBER = """\
Store one durable fact, preference, decision or instruction in long-term memory. \
Call this when the user states a preference ("I prefer vitest"), corrects you, \
makes a decision, or tells you something about themselves, their project or their \
environment that a later session will need. Write one self-contained statement that \
makes sense without this conversation. Never store secrets or credentials. Saying \
again what is already stored reinforces that memory instead of adding a copy; a \
changed fact on the same subject (a new date, number, name, or a negation) becomes \
the new version of the stored memory, the old one kept in its history. Returns \
{"id", "outcome": "added" | "reinforced" | "superseded", "target": the memory \
reinforced or superseded, "reason": what changed}."""

SUPERSEDE = """\
Replace a memory with a corrected version, keeping the old one in its history \
(hidden from recall, shown by `get`). Use this when a stored fact has changed and \
the history matters (a moved deadline, a new address); use `update_memory` to fix \
a typo in place. Takes the id from `recall` and the full new statement; topic, \
tags, importance and the other fields are the old memory's unless given. Returns \
{"id": the new version's id, "outcome": "superseded", "target": the old id}."""

UPDATE = """\
Correct a memory that has become wrong or outdated. Use this when the user corrects \
something you recalled, or a stored fact changes (a new deadline, a changed \
preference). Takes the id from `recall` and the full corrected text; topic, tags \
and the other fields are kept unless given. The memory keeps its id and is \
re-embedded, so recall finds it by its new text. Returns {"id", "updated": true}."""

FORGET = """\
Move a memory to the user's trash, on every device of the user: recall no longer \
finds it. Use this only when the user asks you to forget something, or a memory is \
plainly wrong and nothing replaces it (otherwise use `update_memory`). Takes the id \
from `recall`. The user can bring it back with `memvault trash restore ID` until the \
trash purges it (after 30 days by default); you cannot purge. With `sweep: true` and \
no id, it instead moves to the trash every memory that is old, unused and rated minor \
(never pinned, protected or instruction memories): run it with `dry_run: true` first \
and show the user the list with its reasons before sweeping for real."""

CONSOLIDATE = """\
Tidy the memory: merge each cluster of old, rarely used, minor memories about one \
subject into a single memory that keeps every distinct fact (with the ids it came \
from); the originals move to the archive, still readable. Use this when recall \
keeps returning many small overlapping memories, or when the user asks to tidy or \
compact their memory; use `dry_run: true` to preview. `min_age_days: 0` includes \
memories of any age (after a bulk import). Never touches pinned, protected or \
instruction memories. Returns the clusters merged."""

LIST_TOPICS = """\
List the topic keys memories are filed under (dotted paths such as \
"user.preferences.testing"), with how many memories each holds. Use this to find \
your way in an unfamiliar memory, or to reuse an existing topic in `remember` so \
related memories stay together."""

_T = TypeVar("_T")


def build_server(client: Client) -> "MCPServer":
    """The MCP server, its eight tools bound to `client`."""
    # Imported here: pydantic and the MCP stack cost ~0.4 s, which no other
    # command of the CLI should pay.
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations
    from pydantic import Field

    reads = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)
    # Writes that add: nothing is lost (a supersession keeps the old version).
    adds = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    changes = ToolAnnotations(read_only_hint=False, destructive_hint=True,
                              open_world_hint=False)

    server = MCPServer(name="memvault", version=__version__, instructions=INSTRUCTIONS,
                       log_level="WARNING")

    async def call(fn: Callable[[], _T]) -> _T:
        try:
            return await anyio.to_thread.run_sync(fn)
        except MemvaultError as err:
            raise ToolError(" ".join(str(err).split())) from None

    @server.tool(name="recall", description=RECALL, structured_output=False,
                 annotations=reads)
    async def recall(
        query: Annotated[str, Field(description="What you want to know, in plain words.")],
        top_k: Annotated[int, Field(ge=1, le=50, description="How many memories at most.")] = 5,
        topic: Annotated[str, Field(description=(
            "Only this topic key and the topics below it (\"work\" keeps "
            "\"work.deadlines\"), if given."))] = "",
        exact_topic: Annotated[bool, Field(description=(
            "With topic: only that topic, not the topics below it."))] = False,
        filter: Annotated[dict[str, Any] | None, Field(description=(
            'A filter expression, e.g. {"AND": [{"category": "development"}, '
            '{"tags": {"contains": "testing"}}]}.'))] = None,
    ) -> str:
        hits = await call(lambda: client.recall(query, top_k=top_k, topic=topic,
                                                exact_topic=exact_topic, filter=filter))
        return _json([_hit(h) for h in hits])

    @server.tool(name="get", description=GET, structured_output=False, annotations=reads)
    async def get(
        id: Annotated[str, Field(min_length=1, description="The memory's id, from recall.")],
    ) -> str:
        chain = await call(lambda: client.history(id))  # oldest first, itself included
        memory = next(link for link in chain if link.id == id)
        return _json({"memory": _memory(memory), "chain": [_memory(m) for m in chain]})

    if not client.read_only:
        _writing_tools(server, client, call, adds, changes)

    @server.tool(name="list_topics", description=LIST_TOPICS, structured_output=False,
                 annotations=reads)
    async def list_topics() -> str:
        topics = await call(client.list_topics)
        return _json([{"topic": t.name, "count": t.count,
                       "last_activity": _date(t.last_activity)} for t in topics])

    return server


def _writing_tools(server: "MCPServer", client: Client, call: Any, adds: Any,
                   changes: Any) -> None:
    """The tools that change something: none of them on a read-only bridge,
    and no `consolidate` (the whole vault's) on one kept to scopes or topics."""
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import Field

    default_scope = next((s for s in client.scopes if s != "user"), "user")

    @server.tool(name="remember", description=REMEMBER, structured_output=False,
                 annotations=adds)
    async def remember(
        text: Annotated[str, Field(min_length=1, description="The statement to remember.")],
        topic: Annotated[str, Field(description=(
            "Dotted topic key, general to specific, e.g. user.preferences.testing."))] = "",
        type: Annotated[str, Field(description=(
            "semantic (a fact or preference, the default), episodic (something that "
            "happened), or procedural (how to do something)."))] = "",
        tags: Annotated[list[str] | None, Field(description="Short keywords.")] = None,
        importance: Annotated[float | None, Field(ge=0, le=1, description=(
            "0..1, default 0.5; 0.9 or more pins it so it never fades."))] = None,
        entity: Annotated[str, Field(description="Who or what it is about, if one thing.")] = "",
        category: Annotated[str, Field(description="A broad area, e.g. development.")] = "",
        new: Annotated[bool, Field(description=(
            "Store it as a memory of its own, never merged with a stored one."))] = False,
        scope: Annotated[str, Field(description=(
            "Whose it is: user (the person's own), project:NAME or agent:NAME; default "
            f"{default_scope}."))] = "",
    ) -> str:
        result = await call(lambda: client.remember(
            text, topic=topic, type=type, tags=tags or (), importance=importance,
            entity=entity, category=category, source=SOURCE, new=new, scope=scope))
        return _json(_outcome(result))

    @server.tool(name="supersede", description=SUPERSEDE, structured_output=False,
                 annotations=adds)
    async def supersede(
        id: Annotated[str, Field(min_length=1, description="The memory's id, from recall.")],
        text: Annotated[str, Field(min_length=1, description="The full new statement.")],
        topic: Annotated[str | None, Field(description="A new topic key, if it moves.")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags, replacing the old.")]
        = None,
        importance: Annotated[float | None, Field(ge=0, le=1, description=(
            "A new importance 0..1, if it changes."))] = None,
        entity: Annotated[str | None, Field(description="A new entity, if it changes.")] = None,
        category: Annotated[str | None, Field(description="A new category, if it changes.")]
        = None,
    ) -> str:
        result = await call(lambda: client.supersede(
            id, text, topic=topic, tags=tags, importance=importance, entity=entity,
            category=category))
        return _json(_outcome(result))

    @server.tool(name="update_memory", description=UPDATE, structured_output=False,
                 annotations=changes)
    async def update_memory(
        id: Annotated[str, Field(min_length=1, description="The memory's id, from recall.")],
        text: Annotated[str, Field(min_length=1, description="The full corrected statement.")],
        topic: Annotated[str | None, Field(description="A new topic key, if it moves.")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags, replacing the old.")]
        = None,
        importance: Annotated[float | None, Field(ge=0, le=1, description=(
            "A new importance 0..1, if it changes."))] = None,
    ) -> str:
        # In place: only the fields given change, the id stays (Client.update).
        await call(lambda: client.update(id, text=text, topic=topic, tags=tags,
                                         importance=importance))
        return _json({"id": id, "updated": True})

    @server.tool(name="forget", description=FORGET, structured_output=False,
                 annotations=changes)
    async def forget(
        id: Annotated[str, Field(description="The memory's id, from recall.")] = "",
        sweep: Annotated[bool, Field(description=(
            "Instead of one id: forget everything old, unused and minor."))] = False,
        dry_run: Annotated[bool, Field(description=(
            "With sweep: only list what would be forgotten, and why."))] = False,
    ) -> str:
        if bool(id) == sweep:
            raise ToolError("give either an id or sweep: true")
        if not sweep:
            if dry_run:
                raise ToolError("dry_run goes with sweep: true")
            # Never `purge`: what an agent forgets, the user can restore.
            await call(lambda: client.forget(id, by=BY))
            return _json({"id": id, "forgotten": True, "in_trash": True,
                          "restore": f"memvault trash restore {id}"})
        result = await call(lambda: client.sweep(dry_run=dry_run))
        swept = [{"id": s.id, "text": s.text, "reason": s.reason} for s in result.swept]
        if dry_run:
            return _json({"dry_run": True, "would_forget": swept})
        return _json({"dry_run": False, "forgotten": swept, "in_trash": True,
                      "restore": "memvault trash restore ID (or --all)"})

    if client.scopes or client.topics:
        return

    @server.tool(name="consolidate", description=CONSOLIDATE, structured_output=False,
                 annotations=adds)
    async def consolidate(
        dry_run: Annotated[bool, Field(description="Only show the clusters.")] = False,
        scope: Annotated[str, Field(pattern="^(all|session)$", description=(
            "all, or session: never merge memories of two sessions."))] = "all",
        min_age_days: Annotated[float | None, Field(ge=0, description=(
            "Only memories at least this old (default 7 days)."))] = None,
    ) -> str:
        result = await call(lambda: client.consolidate(scope=scope, min_age_days=min_age_days,
                                                       dry_run=dry_run))
        return _json({"dry_run": dry_run, "merged": result.archived, "consolidations": [
            {"id": c.id, "text": c.text, "sources": list(c.sources)}
            for c in result.consolidations]})


def run(client: Client) -> None:
    """Serve MCP on stdin/stdout until the host closes them."""
    build_server(client).run("stdio")


@click.command()
@click.option("--scope", "scopes", multiple=True, metavar="SCOPE",
              help="Work in this scope (project:NAME, agent:NAME, user; repeat for several): "
                   "the agent sees its memories and the user's, and writes only in it.")
@click.option("--topics", "topics", multiple=True, metavar="PATTERN",
              help="Only these topics (work.*: work and below; work: that topic; repeat or "
                   "separate with commas).")
@click.option("--read-only", is_flag=True,
              help="List no tool that changes anything; the daemon refuses every write.")
def mcp(scopes: tuple[str, ...], topics: tuple[str, ...], read_only: bool) -> None:
    """Serve the memory to an agent as MCP tools over stdio.

    Register it with an agent host, e.g. `claude mcp add memvault -- memvault mcp`,
    or for one project, read-only:
    `claude mcp add memvault -- memvault mcp --scope project:api --read-only`.
    The daemon must be running (or start later: each call connects on demand).
    """
    params = click.get_current_context().find_root().params
    patterns = tuple(p.strip() for given in topics for p in given.split(",") if p.strip())
    with Client(params.get("socket"), home=params.get("home"),
                timeout=params.get("timeout") or 30.0,
                scopes=(*params.get("scopes", ()), *scopes), topics=patterns,
                read_only=read_only) as client:
        run(client)


def _outcome(result: RememberResult) -> dict[str, Any]:
    out = {"id": result.id, "outcome": result.outcome, "target": result.target,
           "reason": result.reason, "reinforced": result.reinforced}
    return {key: value for key, value in out.items() if value or key == "reinforced"}


def _memory(memory: Memory) -> dict[str, Any]:
    out: dict[str, Any] = {"id": memory.id, "text": memory.text}
    out.update(_fields(memory))
    links = {"supersedes": memory.supersedes, "superseded_by": memory.superseded_by}
    out.update({key: value for key, value in links.items() if value})
    return out


def _hit(hit: Hit) -> dict[str, Any]:
    out = {"id": hit.memory.id, "text": hit.memory.text, "score": round(hit.score, 3)}
    out.update(_fields(hit.memory))
    return out


def _fields(memory: Memory) -> dict[str, Any]:
    """A memory's metadata without its empty fields: what an agent needs, no more."""
    fields: dict[str, Any] = {
        "topic": memory.topic_key, "type": memory.type, "tags": list(memory.tags),
        "category": memory.category, "entity": memory.entity, "payload": memory.payload,
        "source": memory.source, "created": _date(memory.created_at),
        "scope": memory.scope if memory.scope != "user" else "",
        "pinned": memory.pinned or None,
    }
    return {key: value for key, value in fields.items() if value}


def _date(timestamp: float) -> str:
    if not timestamp:
        return ""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%MZ")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
