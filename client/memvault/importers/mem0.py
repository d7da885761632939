"""A mem0 export: the memories `Memory.get_all()` / `MemoryClient.get_all()`
return, saved as JSON (docs/import.md).

The file holds a list of memories or an object with one under "results"
(mem0 1.x's `get_all`) or "memories". Each memory is an object with its text
under "memory" and, optionally, "id", "hash", "metadata", "categories",
"created_at", "updated_at", "user_id", "agent_id", "run_id". Its memory here
is a semantic one: topic "mem0", entity the user (else the agent) it is
about, source "mem0:ID" (mem0's id), tags mem0's categories, and mem0's own
fields under payload "mem0" (its id, hash and times among them: a
remembered memory's times are the vault's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memvault.importers.drafts import Draft, checked_text, read_text
from memvault_base.errors import InvalidArgument

__all__ = ["KEPT_FIELDS", "SOURCE", "TOPIC", "read_mem0"]

TOPIC = SOURCE = "mem0"
# The daemon's limit on a memory's payload, as JSON (docs/format.md).
MAX_PAYLOAD_BYTES = 64 * 1024
# mem0's fields kept in the payload, under "mem0".
KEPT_FIELDS = ("id", "hash", "created_at", "updated_at", "user_id", "agent_id", "run_id",
               "metadata")
_LISTS = ("results", "memories")


def read_mem0(path: Path, name: str | None = None) -> list[Draft]:
    """The memories of the mem0 export at `path`; errors name it as `name`
    (default: `path` as given), the JSON line or the memory's number."""
    name = name or str(path)
    try:
        data = json.loads(read_text(path, name))
    except json.JSONDecodeError as err:
        raise InvalidArgument(f"{name}:{err.lineno}: not JSON ({err.msg})") from err
    if isinstance(data, dict):
        data = next((data[k] for k in _LISTS if isinstance(data.get(k), list)), None)
    if not isinstance(data, list):
        raise InvalidArgument(f"{name}: not a mem0 export: a list of memories, "
                              'or an object with one under "results"')
    return [_draft(item, f"{name}: memory {number}") for number, item in enumerate(data, 1)]


def _draft(item: Any, where: str) -> Draft:
    if not isinstance(item, dict):
        raise InvalidArgument(f"{where}: not a JSON object")
    if isinstance(item.get("id"), str):
        where += f" (id {item['id']})"
    text = item.get("memory")
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument(f'{where}: no text under "memory"')
    for key in ("user_id", "agent_id", "run_id"):
        if item.get(key) is not None and not isinstance(item[key], str):
            raise InvalidArgument(f"{where}: {key} is not a string")
    categories = item.get("categories") or []
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise InvalidArgument(f"{where}: categories is not a list of strings")
    kept = {key: item[key] for key in KEPT_FIELDS if item.get(key) not in (None, "", {})}
    size = len(json.dumps(kept, ensure_ascii=False).encode("utf-8"))
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidArgument(f"{where}: its fields take {size} bytes, over the limit of "
                              f"{MAX_PAYLOAD_BYTES} bytes of a memory's payload")
    source = f"{SOURCE}:{kept['id']}" if isinstance(kept.get("id"), str) else SOURCE
    return Draft(text=checked_text(text, where), topic=TOPIC, source=source,
                 entity=item.get("user_id") or item.get("agent_id") or "",
                 tags=tuple(dict.fromkeys(categories)), payload={"mem0": kept} if kept else {})
