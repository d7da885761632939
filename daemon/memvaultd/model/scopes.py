"""Scopes, and the access a caller declares: what it may see and change.

Every memory belongs to one scope (docs/scopes.md):

    user              the person's own memories: the default, readable by every caller
    project:<name>    one project's         (name: 1-64 of A-Z a-z 0-9 . _ -,
    agent:<name>      one agent's            beginning with a letter or digit)

A caller may declare its access with each call (gRPC metadata,
`memvault_base.access`): the scopes it works in, the topics it may reach
(`work.*`: `work` and every topic below it; `work`: that topic alone; `*`:
any), and whether it is read-only. `Access` is that declaration, checked;
the vault asks it about every memory a call would return or change. A call
that declares nothing has full access: every scope, every topic, writes.

What a declaration allows:

- reading: the declared scopes and `user` (all scopes when none are
  declared), and within them only the declared topics (all when none are);
- writing (remember, update, supersede, reinforce, forget, restore, turns,
  import): only in the declared scopes (`user` only when declared), only in
  the declared topics, and nothing at all when read-only;
- what is not about memories one at a time (sync, check, the sweep,
  consolidation, emptying the trash): only with full access.

It guards against an agent overreaching through the MCP bridge or a hook,
not against another process of the same user, which can open the socket
and declare nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memvault_base import access as wire
from memvault_base.errors import InvalidArgument, PermissionDenied
from memvaultd.model.memory import MAX_SHORT_FIELD, Memory

USER = "user"
KINDS = ("project", "agent")
MAX_NAME = 64
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_FORMS = "user, project:<name> or agent:<name>"
ANY_TOPIC = "*"
_BELOW = ".*"


def check_scope(value: str, field_name: str = "scope") -> str:
    """`value` as a scope ('' is `user`); InvalidArgument naming what is wrong."""
    if not value or value == USER:
        return USER
    kind, colon, name = value.partition(":")
    if not colon or kind not in KINDS:
        raise InvalidArgument(f"{field_name}: {value!r} is not a scope; use {_FORMS}")
    if not name:
        raise InvalidArgument(f"{field_name}: {value!r} names no {kind}; use {kind}:<name>")
    if len(name) > MAX_NAME:
        raise InvalidArgument(f"{field_name}: the name in {value!r} is longer than "
                              f"{MAX_NAME} characters")
    if not _NAME.fullmatch(name):
        raise InvalidArgument(f"{field_name}: the name in {value!r} may hold only letters, "
                              "digits, '.', '_' and '-', and begins with a letter or digit")
    return value


def check_topic_pattern(value: str, field_name: str = "topics") -> str:
    """`value` as a topic pattern: `*`, a topic key, or a topic key and `.*`."""
    key = value[: -len(_BELOW)] if value.endswith(_BELOW) else value
    if value != ANY_TOPIC and (not key or "*" in key or "," in key or key != key.strip()):
        raise InvalidArgument(f"{field_name}: {value!r} is not a topic pattern; use a topic "
                              "key (work.deadlines), a key and .* (work.*: it and the topics "
                              "below it), or *")
    if len(value) > MAX_SHORT_FIELD:
        raise InvalidArgument(f"{field_name}: longer than {MAX_SHORT_FIELD} characters")
    return value


def within(topic: str, topic_key: str) -> bool:
    """`topic_key` is `topic` or a topic below it."""
    return topic_key == topic or topic_key.startswith(topic + ".")


def topic_matches(pattern: str, topic_key: str) -> bool:
    if pattern == ANY_TOPIC:
        return True
    if pattern.endswith(_BELOW):
        return within(pattern[: -len(_BELOW)], topic_key)
    return topic_key == pattern


@dataclass(frozen=True)
class Access:
    """What one call may reach. The default is full access."""

    # The scopes declared, in order (the first is where a remember without
    # a scope goes); None: none declared, every scope.
    scopes: tuple[str, ...] | None = None
    topics: tuple[str, ...] = ()  # patterns; empty: every topic
    read_only: bool = False

    @classmethod
    def declared(cls, scopes: Sequence[str] | None = None, topics: Sequence[str] = (),
                 read_only: bool = False) -> Access:
        """A declaration, checked; InvalidArgument names the value that is wrong."""
        checked = None if scopes is None else tuple(dict.fromkeys(
            check_scope(s.strip(), wire.SCOPES) for s in scopes))
        if checked == ():
            raise InvalidArgument(f"{wire.SCOPES}: declared, but names no scope")
        patterns = tuple(dict.fromkeys(check_topic_pattern(t.strip(), wire.TOPICS)
                                       for t in topics))
        return cls(checked, patterns, read_only)

    @classmethod
    def of_metadata(cls, pairs: Iterable[tuple[str, str]]) -> Access:
        """The access the `memvault-*` metadata of a call declares
        (`memvault_base.access`); full access when it declares nothing."""
        scopes: list[str] | None = None
        topics: list[str] = []
        read_only = False
        for key, value in pairs:
            if key == wire.SCOPES:
                scopes = (scopes or []) + value.split(",")
            elif key == wire.TOPICS:
                topics += value.split(",")
            elif key == wire.READ_ONLY:
                if value.strip().lower() not in ("1", "true", "yes"):
                    raise InvalidArgument(f"{wire.READ_ONLY}: {value!r}; send 1, or leave it out")
                read_only = True
            elif key.startswith(wire.PREFIX):
                raise InvalidArgument(f"metadata {key!r}: not one memvault reads; it reads "
                                      f"{wire.SCOPES}, {wire.TOPICS} and {wire.READ_ONLY}")
        if scopes is None and not topics and not read_only:
            return FULL
        return cls.declared(scopes, topics, read_only)

    @property
    def full(self) -> bool:
        return self.scopes is None and not self.topics and not self.read_only

    @property
    def readable(self) -> frozenset[str] | None:
        """The scopes it may read (None: all)."""
        return None if self.scopes is None else frozenset((USER, *self.scopes))

    @property
    def default_scope(self) -> str:
        """Where a memory written without a scope goes: the first declared
        scope other than `user`, else `user`."""
        return next((s for s in self.scopes or () if s != USER), USER)

    def sees_topic(self, topic_key: str) -> bool:
        return not self.topics or any(topic_matches(p, topic_key) for p in self.topics)

    def sees(self, memory: Memory) -> bool:
        readable = self.readable
        return ((readable is None or memory.scope in readable)
                and self.sees_topic(memory.topic_key))

    def check_full(self, what: str) -> None:
        """PermissionDenied unless this is full access: `what` is not about
        memories one at a time (sync, check, sweep, consolidation)."""
        if not self.full:
            raise PermissionDenied(f"{what} needs full access; this caller declared "
                                   f"{self._described()}")

    def check_new(self, scope: str, topic_key: str, what: str) -> None:
        """PermissionDenied unless it may write a memory in `scope` and `topic_key`."""
        self.check_writable(what)
        if self.scopes is not None and scope not in self.scopes:
            raise PermissionDenied(f"{what}: scope {scope} is outside this caller's "
                                   f"scopes ({', '.join(self.scopes)})")
        if not self.sees_topic(topic_key):
            raise PermissionDenied(f"{what}: topic {topic_key or '(none)'!r} is outside this "
                                   f"caller's topics ({', '.join(self.topics)})")

    def may_change(self, memory: Memory) -> bool:
        return (not self.read_only and self.sees(memory)
                and (self.scopes is None or memory.scope in self.scopes))

    def check_change(self, memory: Memory, what: str) -> None:
        """PermissionDenied unless it may change `memory`. A memory it
        cannot see is named by id only: its scope is not the caller's to learn."""
        self.check_writable(what)
        if not self.sees(memory):
            raise PermissionDenied(f"{what}: memory {memory.id} is not in this caller's "
                                   f"{self._described()}")
        if self.scopes is not None and memory.scope not in self.scopes:
            raise PermissionDenied(f"{what}: memory {memory.id} is in scope {memory.scope}, "
                                   "which this caller may read but not change (it writes in "
                                   f"{', '.join(self.scopes)})")

    def check_writable(self, what: str) -> None:
        if self.read_only:
            raise PermissionDenied(f"{what}: this caller is read-only ({wire.READ_ONLY})")

    def _described(self) -> str:
        parts = []
        if self.scopes is not None:
            parts.append(f"scopes {', '.join(self.scopes)} (and user to read)")
        if self.topics:
            parts.append(f"topics {', '.join(self.topics)}")
        if self.read_only:
            parts.append("read-only")
        return "; ".join(parts) or "full access"


FULL = Access()

