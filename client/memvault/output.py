"""How the `memvault` CLI shows things: rich tables for people, JSON for programs.

Human output goes through rich, which drops colour and uses 80 columns when
stdout is not a terminal, so piped output stays plain. `--json` output is
`json.dumps(..., ensure_ascii=False)`: text in any script reads as written.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from memvault.types import Hit, Memory, Status

__all__ = ["echo_json", "hits_table", "memory_table", "show", "status_table"]

# Long enough to tell memories apart in a table row, short enough that a
# 3-hit answer stays readable on an 80-column terminal.
TEXT_PREVIEW_CHARS = 120


def echo_json(value: Any, *, indent: int | None = 2) -> None:
    """Print `value` as JSON on stdout (one line when `indent` is None)."""
    click.echo(json.dumps(value, ensure_ascii=False, indent=indent))


def show(renderable: Table) -> None:
    """Print a table on stdout (rich looks up sys.stdout at print time)."""
    Console(highlight=False).print(renderable)


def hits_table(hits: list[Hit]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("type")
    table.add_column("topic")
    table.add_column("text", overflow="ellipsis", no_wrap=True, ratio=1)
    for rank, hit in enumerate(hits, 1):
        mem = hit.memory
        table.add_row(str(rank), f"{hit.score:.3f}", mem.type, mem.topic_key, _preview(mem.text))
    return table


def memory_table(memory: Memory) -> Table:
    table = _fields_table()
    fields = memory.to_dict()
    fields["payload"] = json.dumps(memory.payload, ensure_ascii=False) if memory.payload else ""
    fields["tags"] = ", ".join(memory.tags)
    for name in ("created_at", "last_reinforced_at", "expires_at"):
        fields[name] = _when(fields[name])
    if "vector" in fields:
        fields["vector"] = f"{len(memory.vector)} floats"
    for name, value in fields.items():
        if value not in ("", None):
            table.add_row(name, str(value))
    return table


def status_table(status: Status) -> Table:
    table = _fields_table()
    rate = status.cache_hit_rate
    rows = [
        ("version", status.version),
        ("model", f"{status.model} ({status.model_state})"),
        ("dimension", str(status.dimension)),
        ("memories", str(status.memory_count)),
        ("applied txid", str(status.applied_txid)),
        ("vault", status.vault_id),
        ("key storage", status.key_storage),
        ("socket", status.socket),
        ("data dir", status.data_dir),
        ("uptime", _duration(status.uptime_s)),
        (
            "query cache",
            f"{status.cache_size} entries, {status.cache_hits} hits, {status.cache_misses} misses",
        ),
        ("cache hit rate", "-" if rate is None else f"{rate:.1%}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _fields_table() -> Table:
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    return table


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= TEXT_PREVIEW_CHARS else flat[: TEXT_PREVIEW_CHARS - 1] + "…"


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).isoformat(sep=" ", timespec="seconds") if epoch else ""


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h {minutes}m"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s"
