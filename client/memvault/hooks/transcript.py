"""The new turns of a Claude Code session transcript.

The transcript is a JSON-lines file that Claude Code appends to. A line of
`type` "user" or "assistant" carries `message.content`: a string, or a list
of blocks of which the `{"type": "text", "text": ...}` ones are what was
said (the others are tool calls, tool results, thinking and images). Each
assistant block is a line of its own, so consecutive text lines of one
`message.id` are one turn. Lines marked `isMeta` (Claude Code's own notes
to the model), `isSidechain` (a subagent's conversation) and slash-command
echoes (`<command-name>`, `<local-command-stdout>`) are not turns.

Only whole lines are read: Claude Code writes the file as it goes, and a
line without its newline yet is read the next time. A line that is not
JSON is skipped, never fatal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["MAX_TURN_BYTES", "Chunk", "Turn", "chunks"]

# The daemon refuses a text over 32 KiB (memvaultd.model.memory.MAX_TEXT_BYTES),
# and one refused turn would refuse its whole call; the embedder reads only
# the first ~1 KB anyway.
MAX_TURN_BYTES = 32 * 1024 - 64
_TRUNCATED = " [truncated]"
_COMMAND_ECHOES = ("<command-name>", "<command-message>", "<local-command-stdout>",
                   "<local-command-stderr>", "<command-args>")


@dataclass
class Turn:
    speaker: str
    text: str
    at: float = 0.0
    message_id: str = ""

    def to_request(self) -> dict[str, Any]:
        out: dict[str, Any] = {"speaker": self.speaker, "text": _bounded(self.text)}
        if self.at:
            out["at"] = self.at
        return out


@dataclass
class Chunk:
    """The turns of whole lines up to byte `end` of the file."""

    turns: list[Turn] = field(default_factory=list)
    end: int = 0


def chunks(path: Path, offset: int, *, lines_per_chunk: int = 200) -> Iterator[Chunk]:
    """The turns after byte `offset`, a chunk per `lines_per_chunk` whole
    lines; a chunk's `end` is where the next read starts. A file shorter
    than `offset` was replaced, and is read from its start."""
    with path.open("rb") as file:
        if file.seek(0, 2) < offset:
            offset = 0
        file.seek(offset)
        chunk, count = Chunk(end=offset), 0
        for raw in file:
            if not raw.endswith(b"\n"):
                break  # still being written
            chunk.end += len(raw)
            _add(chunk.turns, raw)
            count += 1
            if count == lines_per_chunk:
                yield chunk
                chunk, count = Chunk(end=chunk.end), 0
        if count:
            yield chunk


def _add(turns: list[Turn], raw: bytes) -> None:
    try:
        line = json.loads(raw)
    except ValueError:
        return
    turn = _turn(line) if isinstance(line, dict) else None
    if turn is None:
        return
    last = turns[-1] if turns else None
    if last and turn.message_id and last.message_id == turn.message_id \
            and last.speaker == turn.speaker:
        last.text = f"{last.text}\n\n{turn.text}"
    else:
        turns.append(turn)


def _turn(line: dict[str, Any]) -> Turn | None:
    speaker = line.get("type")
    message = line.get("message")
    if speaker not in ("user", "assistant") or not isinstance(message, dict):
        return None
    if line.get("isMeta") or line.get("isSidechain"):
        return None
    text = _text(message.get("content")).strip()
    if not text or text.startswith(_COMMAND_ECHOES):
        return None
    message_id = message.get("id")
    return Turn(speaker=str(speaker), text=text, at=_time(line.get("timestamp")),
                message_id=message_id if isinstance(message_id, str) else "")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(block["text"] for block in content
                           if isinstance(block, dict) and block.get("type") == "text"
                           and isinstance(block.get("text"), str))
    return ""


def _time(stamp: Any) -> float:
    if not isinstance(stamp, str):
        return 0.0
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _bounded(text: str) -> str:
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_TURN_BYTES:
        return text
    cut = data[:MAX_TURN_BYTES - len(_TRUNCATED)].decode("utf-8", "ignore")
    return cut + _TRUNCATED
