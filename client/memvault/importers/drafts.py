"""`Draft`: one memory an importer would remember, in `remember_batch`'s terms."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memvault_base.errors import InvalidArgument

__all__ = ["MAX_TEXT_BYTES", "Draft", "checked_text", "read_text"]

# The daemon's limit on a memory's text (docs/format.md); checked here so that
# a too-long note fails naming its file and line before anything is sent.
MAX_TEXT_BYTES = 32 * 1024


@dataclass(frozen=True, slots=True)
class Draft:
    """A memory to remember; `where` ("notes/a.md:12") is what the dry run shows."""

    text: str
    type: str = ""
    topic: str = ""
    source: str = ""
    entity: str = ""
    tags: tuple[str, ...] = ()
    payload: Mapping[str, Any] = field(default_factory=dict)

    def remember_input(self) -> dict[str, Any]:
        """The mapping `Client.remember_batch` takes for this draft."""
        fields: dict[str, Any] = {"text": self.text, "type": self.type, "topic": self.topic,
                                  "source": self.source, "entity": self.entity,
                                  "tags": list(self.tags)}
        if self.payload:
            fields["payload"] = dict(self.payload)
        return fields

    def to_dict(self) -> dict[str, Any]:
        return {**self.remember_input(), "payload": dict(self.payload)}


def checked_text(text: str, where: str) -> str:
    """`text`, stripped, or InvalidArgument naming `where` when the daemon would refuse it."""
    text = text.strip()
    size = len(text.encode("utf-8"))
    if size > MAX_TEXT_BYTES:
        raise InvalidArgument(f"{where}: {size} bytes is over the limit of {MAX_TEXT_BYTES} "
                              "bytes of a memory's text")
    return text


def read_text(path: Path, name: str) -> str:
    """The UTF-8 text of the file at `path`, or InvalidArgument naming `name`
    and the line of the first byte that is not UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InvalidArgument(f"{name}: {err.strerror}") from err
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise InvalidArgument(f"{name}:{line}: not UTF-8 text ({err.reason})") from err
