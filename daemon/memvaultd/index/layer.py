"""A searchable layer of records: vectors, keywords, topics, session order.

The vault has two: the memories, and the transcript turns
(`AppendTurns`), which are searched the same way but never mixed into the
memory ranking. A layer keeps its four structures in step on every put,
update and remove; it holds no policy of its own.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from memvaultd.index.keyword import WORD, KeywordIndex
from memvaultd.index.memory_index import MemoryIndex
from memvaultd.model.memory import Memory
from memvaultd.model.records import Records
from memvaultd.model.vector import Vector


def keyword_fields(memory: Memory) -> tuple[str, ...]:
    """What the keyword channel reads: the text, the last part of the topic,
    the tags and the entity (a speaker's name, a project).

    Only the topic's last part: its parents are shared by whole families of
    memories ("user" in user.preferences.testing and user.home) and say
    nothing about this one, so "where does the user live" matched a testing
    preference on "user". A topic asked for, or written in the query, is the
    topic channel's."""
    return _keyword_fields(memory.text, memory.topic_key, memory.tags, memory.entity)


def _keyword_fields(text: str, topic_key: str, tags: tuple[str, ...], entity: str
                    ) -> tuple[str, ...]:
    return (text, topic_key.rpartition(".")[2].replace("_", " "), *tags, entity)


def _keyword_rows(records: Records) -> Iterator[tuple[str, ...]]:
    """`keyword_fields` of each record, read from its columns: a text is
    made as its row is indexed, not the million at once."""
    return map(_keyword_fields, records.each("text"), records.column("topic_key"),
               records.column("tags"), records.column("entity"))


class SessionOrder:
    """Each session's memories in the order they were written, as a doubly
    linked list, so recall can read a hit's neighbours in O(1)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._links: dict[str, list[str]] = {}  # id -> [previous id, next id]
        self._last: dict[str, str] = {}

    def append(self, memory_id: str, session_id: str) -> None:
        if not session_id:
            return
        with self._lock:
            if memory_id in self._links:
                return
            previous = self._last.get(session_id, "")
            self._links[memory_id] = [previous, ""]
            if previous:
                self._links[previous][1] = memory_id
            self._last[session_id] = memory_id

    def restore(self, memory_ids: Iterable[str], session_ids: Iterable[str]) -> None:
        """`append` of each memory in order, the ids distinct and none held
        yet: without a call and a lock per memory."""
        links, last = self._links, self._last
        with self._lock:
            for memory_id, session_id in zip(memory_ids, session_ids, strict=True):
                if session_id:
                    previous = last.get(session_id, "")
                    links[memory_id] = [previous, ""]
                    if previous:
                        links[previous][1] = memory_id
                    last[session_id] = memory_id

    def remove(self, memory_id: str, session_id: str) -> None:
        with self._lock:
            link = self._links.pop(memory_id, None)
            if link is None:
                return
            previous, following = link
            if previous:
                self._links[previous][1] = following
            if following:
                self._links[following][0] = previous
            if self._last.get(session_id) == memory_id:
                if previous:
                    self._last[session_id] = previous
                else:
                    del self._last[session_id]

    def neighbours(self, memory_id: str) -> tuple[str, ...]:
        link = self._links.get(memory_id)
        return tuple(n for n in link if n) if link else ()


def entity_words(entity: str) -> tuple[str, ...]:
    """The lower-cased words of an entity's name ("Ada Lovelace" -> ada, lovelace)."""
    return tuple(WORD.findall(entity.lower()))


class EntityNames:
    """The entities the layer's memories name, found from a query's words.

    Each name is filed under its first two distinct words in sorted order
    (or its one word), so a query finds the names it holds by looking up
    the words and word pairs it has that some name starts with: filed
    under each of its words, a name whose words are common to many
    ("Smith", "project") would be checked for every one of them (1.7 ms
    for a query naming one of 1,000 Smiths, against microseconds)."""

    def __init__(self) -> None:
        self._count: dict[tuple[str, ...], int] = {}
        self._single: dict[str, set[tuple[str, ...]]] = {}
        self._pairs: dict[str, dict[str, set[tuple[str, ...]]]] = {}

    def add(self, entity: str) -> None:
        name = entity_words(entity)
        if not name:
            return
        self._count[name] = self._count.get(name, 0) + 1
        self._filed(name).add(name)

    def add_all(self, entities: Iterable[str]) -> None:
        """`add` of each: the words of each distinct name found once (a
        vault names few entities, each in many memories)."""
        for entity, times in Counter(entities).items():
            name = entity_words(entity)
            if name:
                self._count[name] = self._count.get(name, 0) + times
                self._filed(name).add(name)

    def discard(self, entity: str) -> None:
        name = entity_words(entity)
        left = self._count.get(name, 0) - 1
        if left > 0:
            self._count[name] = left
            return
        if self._count.pop(name, None) is None:
            return
        names = self._filed(name)
        names.discard(name)
        if names:
            return
        first, *second = sorted(set(name))[:2]
        if not second:
            del self._single[first]
            return
        pairs = self._pairs[first]
        del pairs[second[0]]
        if not pairs:
            del self._pairs[first]

    def named_in(self, words: frozenset[str]) -> list[tuple[str, ...]]:
        """The entities every word of which is among `words`."""
        found = [name for word in words & self._single.keys()
                 for name in self._single.get(word, ())]
        for first in words & self._pairs.keys():
            pairs = self._pairs.get(first, {})
            for second in words & pairs.keys():
                found += [name for name in pairs.get(second, ())
                          if all(w in words for w in name)]
        return found

    def _filed(self, name: tuple[str, ...]) -> set[tuple[str, ...]]:
        first, *second = sorted(set(name))[:2]
        if not second:
            return self._single.setdefault(first, set())
        return self._pairs.setdefault(first, {}).setdefault(second[0], set())


class Layer:
    def __init__(self, dimension: int) -> None:
        self.index = MemoryIndex(dimension)
        self.keywords = KeywordIndex()
        self.sessions = SessionOrder()
        self.entities = EntityNames()
        # topic -> the ids of its memories: the one id itself while the
        # topic has one memory (most topics: a set per memory was 22 MB of
        # a 100k vault whose memories each had their own), else a set.
        self._topics: dict[str, str | set[str]] = {}

    def __len__(self) -> int:
        return len(self.index)

    def get(self, memory_id: str) -> Memory | None:
        return self.index.get(memory_id)

    def memories(self) -> Iterator[Memory]:
        return self.index.memories()

    def records(self) -> Records:
        """Every live memory as `Records`: read as columns, made only as read."""
        return self.index.live_rows()[0]

    def ids(self) -> list[str]:
        return self.index.ids()

    def memories_where(self, field: str, keep: Callable[[Any], bool]) -> list[Memory]:
        """The memories whose `field` `keep` accepts. Only those are made:
        the field is read from its column, `keep` once a distinct value."""
        records = self.records()
        return list(records.taken(np.flatnonzero(records.mapped(field, keep, np.bool_))))

    def put(self, memory: Memory, vector: Vector) -> None:
        old = self.index.get(memory.id)
        self.index.put(memory, vector)
        self._reindex(old, memory)
        self.sessions.append(memory.id, memory.session_id)

    def restore(self, memories: Sequence[Memory], vectors: Vector | list[Vector]) -> None:
        """What a `put` of each memory in order gives, built in bulk when the
        layer is empty and the ids distinct (a snapshot): one matrix copy,
        keyword postings per term (when `finish_restore` or the first
        keyword search or write asks), sessions, entities and topics in a
        pass each, an entity's words found once a name: at 100k memories
        0.16-0.31 s against 0.33-0.36 s with a `put`'s steps per memory.
        The records are read a column at a time, and the index keeps them
        as columns (`model/records.py`)."""
        records = Records.of(memories)
        ids = records.ids()
        if len(self) or len(set(ids)) != len(ids):
            for memory, vector in zip(records, vectors, strict=True):
                self.put(memory, vector)
            return
        self.index.restore(records, vectors)
        # Indexed by `finish_restore`, off the path to serving.
        self.keywords.restore_later(ids, _keyword_rows(records))
        self.sessions.restore(ids, records.column("session_id"))
        self.entities.add_all(records.column("entity"))
        self._topics_of(ids, records.column("topic_key"))

    def finish_restore(self) -> None:
        """The keyword index of a `restore`, if no search or write has built it yet."""
        self.keywords.finish_restore()

    def update(self, memory: Memory, vector: Vector | None = None) -> None:
        old = self.index.get(memory.id)
        if old is None:
            return
        if vector is None:
            self.index.update(memory)
        else:
            self.index.put(memory, vector)
        self._reindex(old, memory)
        if old.session_id != memory.session_id:
            self.sessions.remove(memory.id, old.session_id)
            self.sessions.append(memory.id, memory.session_id)

    def recount(self, memory: Memory) -> None:
        """`update` for a change of counts and times alone (an access, a
        reinforcement), which no keyword, topic or session map reads: every
        recall makes one per memory it returns."""
        self.index.update(memory)

    def remove(self, memory_id: str) -> Memory | None:
        memory = self.index.remove(memory_id)
        if memory is not None:
            self.keywords.remove(memory_id, keyword_fields(memory))
            self.sessions.remove(memory_id, memory.session_id)
            self.entities.discard(memory.entity)
            self._untopic(memory)
        return memory

    def with_topic(self, topic_key: str) -> set[str]:
        """Ids of the memories with exactly this topic ("" = no topic)."""
        ids = self._topics.get(topic_key, ())
        return {ids} if isinstance(ids, str) else set(ids)

    def topic_size(self, topic_key: str) -> int:
        ids = self._topics.get(topic_key, ())
        return 1 if isinstance(ids, str) else len(ids)

    def _reindex(self, old: Memory | None, new: Memory) -> None:
        was = None if old is None else keyword_fields(old)
        if was != keyword_fields(new):
            self.keywords.put(new.id, keyword_fields(new), was)
        if old is None or old.entity != new.entity:
            if old is not None:
                self.entities.discard(old.entity)
            self.entities.add(new.entity)
        if old is not None and old.topic_key != new.topic_key:
            self._untopic(old)
        self._topic(new.topic_key, new.id)

    def _topics_of(self, ids: list[str], topics: list[str]) -> None:
        """`_topic` of each memory of a restore (distinct ids, none held):
        a topic held once is mapped in one pass by C, the others then each
        gather a set (a call a memory was 1.5 s at 1M memories)."""
        if self._topics:
            for memory_id, topic in zip(ids, topics, strict=True):
                self._topic(topic, memory_id)
            return
        self._topics.update(zip(topics, ids, strict=True))
        if len(self._topics) == len(ids):
            return
        counts = Counter(topics)
        shared = {topic: set[str]() for topic, count in counts.items() if count > 1}
        for memory_id, topic in zip(ids, topics, strict=True):
            held = shared.get(topic)
            if held is not None:
                held.add(memory_id)
        self._topics.update(shared)

    def _topic(self, topic: str, memory_id: str) -> None:
        ids = self._topics.get(topic)
        if ids is None:
            self._topics[topic] = memory_id
        elif isinstance(ids, str):
            if ids != memory_id:
                self._topics[topic] = {ids, memory_id}
        else:
            ids.add(memory_id)

    def _untopic(self, memory: Memory) -> None:
        ids = self._topics.get(memory.topic_key)
        if isinstance(ids, str):
            if ids == memory.id:
                del self._topics[memory.topic_key]
        elif ids is not None:
            ids.discard(memory.id)
            if len(ids) == 1:
                self._topics[memory.topic_key] = next(iter(ids))
