"""How the `memvault` CLI shows things: rich tables for people, JSON for programs.

Human output goes through rich, which drops colour and uses 80 columns when
stdout is not a terminal, so piped output stays plain. `--json` output is
`json.dumps(..., ensure_ascii=False)`: text in any script reads as written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from memvault.check import CheckReport, SeqRange
from memvault.importers import Draft
from memvault.trash import TrashedMemory
from memvault.types import Facet, Hit, ListedMemory, Memory, Status, SyncInfo, TurnHit
from memvault.upkeep import Consolidation, SweptMemory

__all__ = [
    "chain_table",
    "check_table",
    "check_verdict",
    "checks_table",
    "consolidations_table",
    "echo_json",
    "facets_table",
    "hits_table",
    "listing_table",
    "memory_table",
    "outcome_line",
    "plural",
    "progress",
    "short_id",
    "show",
    "status_table",
    "swept_table",
    "trash_hint",
    "trash_table",
    "turns_table",
]

# Long enough to tell memories apart in a table row, short enough that a
# 3-hit answer stays readable on an 80-column terminal.
TEXT_PREVIEW_CHARS = 120
# Key cells up to this long (topics, sessions, reasons) stay whole in row
# tables while the text keeps TEXT_FLOOR_CHARS; a longer one (a sweep's
# reason is ~75) is cut to it before any column gives way, and shows whole
# when the terminal has room.
COLUMN_MAX_CHARS = 32
# The ids tables show: 8 of an id's 32 hex digits, which every command that
# takes an id accepts (`memvault get 6001b6ef`). Two memories share them with
# even odds only past ~77,000 memories (2^32 prefixes); then the command
# names both ids and asks for more.
ID_PREFIX_CHARS = 8
# The columns that only add (channels, type, a second time) give way, in
# turn, until the text has this much room: a clause, enough to tell rows apart.
TEXT_ROOM_CHARS = 24
# The key columns (id, score, topic, time) keep their width until the text
# would get less than this; then the longest that may shrink (a topic, a
# session) ends in "…", down to SHRUNK_CHARS.
TEXT_FLOOR_CHARS = 12
SHRUNK_CHARS = 12


def echo_json(value: Any, *, indent: int | None = 2) -> None:
    """Print `value` as JSON on stdout (one line when `indent` is None)."""
    click.echo(json.dumps(value, ensure_ascii=False, indent=indent))


def show(renderable: Table) -> None:
    """Print a table on stdout (rich looks up sys.stdout at print time)."""
    Console(highlight=False).print(renderable)


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr, drawn only when stderr is a terminal; yields advance(n)."""
    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def hits_table(hits: Sequence[Hit], *, first: int = 1) -> Table:
    """Ranked hits, numbered from `first` (offset + 1 on a later page)."""
    rows = [
        (str(rank), short_id(hit.memory.id), f"{hit.score:.3f}", ",".join(hit.channels),
         hit.memory.type, hit.memory.topic_key, _preview(hit.memory.text))
        for rank, hit in enumerate(hits, first)
    ]
    return _rows_table((_Column("#", numeric=True), _Column("id"),
                        _Column("score", numeric=True), _Column("channels", gives_way=2),
                        _Column("type", gives_way=1), _Column("topic", shrinks=True),
                        _Column("text", fill=True)), rows)


# `memvault list`'s order, and the column that shows it: (header, cell).
_LISTING_KEYS: dict[str, tuple[str, Callable[[ListedMemory], str]]] = {
    "created": ("created", lambda m: _when(m.memory.created_at)),
    "last_used": ("last used", lambda m: _when(m.last_used)),
    "heat": ("heat", lambda m: f"{m.heat:.2f}"),
    "importance": ("importance", lambda m: f"{m.memory.importance:.2f}"),
}


def listing_table(memories: Sequence[ListedMemory], sort: str) -> Table:
    """`memvault list`: a page of memories, with the column it is sorted by."""
    header, cell = _LISTING_KEYS[sort]
    rows = [(short_id(m.memory.id), cell(m), m.band, m.memory.type, m.memory.topic_key,
             _preview(m.memory.text)) for m in memories]
    return _rows_table((_Column("id"), _Column(header, numeric=sort in ("heat", "importance")),
                        _Column("band", gives_way=1), _Column("type", gives_way=2),
                        _Column("topic", shrinks=True), _Column("text", fill=True)), rows)


def swept_table(swept: Sequence[SweptMemory]) -> Table:
    """`forget --sweep`: each memory with its risk and the reason."""
    rows = [(short_id(s.id), f"{s.risk:.2f}", s.reason, _preview(s.text)) for s in swept]
    return _rows_table((_Column("id"), _Column("risk", numeric=True),
                        _Column("reason", shrinks=True), _Column("text", fill=True)), rows)


def trash_table(trash: Sequence[TrashedMemory]) -> Table:
    """`memvault trash`: each memory with when and by what it was forgotten,
    and when it will be purged."""
    rows = [(short_id(t.memory.id), _when(t.trashed_at), t.trashed_by, _when(t.purge_at),
             _preview(t.memory.text)) for t in trash]
    return _rows_table((_Column("id"), _Column("forgotten"), _Column("by", shrinks=True),
                        _Column("purged after", gives_way=1), _Column("text", fill=True)),
                       rows)


def trash_hint(purge_at: float) -> str:
    """What to tell after a forget: the memories can come back, and how."""
    until = f" until {_when(purge_at)}" if purge_at else ""
    return (f"in the trash{until}: `memvault trash restore ID` (or --all) brings them back, "
            "`memvault trash` lists them")


def consolidations_table(done: Sequence[Consolidation]) -> Table:
    rows = [(short_id(c.id), str(len(c.sources)), str(c.facts), c.topic_key or c.entity,
             _preview(c.text)) for c in done]
    return _rows_table((_Column("id"), _Column("sources", numeric=True),
                        _Column("facts", numeric=True, gives_way=1),
                        _Column("topic", shrinks=True), _Column("text", fill=True)), rows)


def turns_table(turns: Sequence[TurnHit]) -> Table:
    rows = [
        (f"{t.score:.3f}", t.session_id, _when(t.at), t.speaker, _preview(t.text)) for t in turns
    ]
    return _rows_table((_Column("score", numeric=True), _Column("session", shrinks=True),
                        _Column("at", gives_way=1), _Column("speaker", shrinks=True),
                        _Column("turn", fill=True)), rows)


def chain_table(chain: Sequence[Memory], *, current: str) -> Table:
    """A supersession chain, oldest first; `*` marks the memory asked about."""
    rows = [("*" if m.id == current else "", short_id(m.id), _when(m.created_at),
             _preview(m.text)) for m in chain]
    return _rows_table((_Column(""), _Column("id"), _Column("created"),
                        _Column("text", fill=True)), rows)


def facets_table(facets: Sequence[Facet], noun: str) -> Table:
    rows = [(f.name, str(f.count), _when(f.last_activity)) for f in facets]
    return _rows_table((_Column(noun, fill=True), _Column("memories", numeric=True),
                        _Column("last activity", gives_way=1)), rows)


def drafts_table(drafts: Sequence[Draft]) -> Table:
    """`import-from --dry-run`: each memory an import would remember, where it comes from."""
    rows = [(d.source, d.type or "semantic", d.topic, _preview(d.text)) for d in drafts]
    return _rows_table((_Column("source", shrinks=True), _Column("type", gives_way=1),
                        _Column("topic", shrinks=True), _Column("text", fill=True)), rows)


def short_id(memory_id: str) -> str:
    """The first ID_PREFIX_CHARS of an id, which the commands accept in its place."""
    return memory_id[:ID_PREFIX_CHARS]


def memory_table(memory: Memory) -> Table:
    table = _fields_table()
    fields = memory.to_dict()
    fields["payload"] = json.dumps(memory.payload, ensure_ascii=False) if memory.payload else ""
    fields["tags"] = ", ".join(memory.tags)
    for name in ("created_at", "last_reinforced_at", "last_accessed_at", "expires_at"):
        fields[name] = _when(fields[name])
    if "vector" in fields:
        fields["vector"] = f"{len(memory.vector)} floats"
    fields["consolidated_from"] = ", ".join(memory.consolidated_from)
    for name, value in fields.items():
        if value not in ("", None) and value is not False:
            table.add_row(name, str(value))
    return table


def status_table(status: Status, sync: SyncInfo | None = None) -> Table:
    table = _fields_table()
    rate = status.cache_hit_rate
    rows = [
        ("version", status.version),
        ("model", f"{status.model} ({status.model_state})"),
        ("dimension", str(status.dimension)),
        ("memories", str(status.memory_count)),
        ("trash", f"{status.trash_count} (memvault trash)"),
        ("applied txid", str(status.applied_txid)),
        ("vault", status.vault_id),
        ("key storage", status.key_storage),
        ("socket", status.socket),
        ("data dir", status.data_dir),
        ("uptime", _duration(status.uptime_s)),
        (
            "query cache",
            f"{plural(status.cache_size, 'entry', 'entries')}, "
            f"{plural(status.cache_hits, 'hit', 'hits')}, "
            f"{plural(status.cache_misses, 'miss', 'misses')}",
        ),
        ("cache hit rate", "-" if rate is None else f"{rate:.1%}"),
        ("heat bands", ", ".join(f"{n} {b}" for b, n in status.bands.items()) or "-"),
        ("last sweep", _when(status.last_sweep_at) or "never"),
        ("last consolidation", _when(status.last_consolidation_at) or "never"),
        ("sync", _sync_line(sync)),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _sync_line(sync: SyncInfo | None) -> str:
    if sync is None or not sync.configured:
        return "not configured (memvault init / memvault join)"
    line = f"{sync.state}, {sync.remote}, version {sync.head}, {sync.pending} pending"
    return f"{line}; {sync.last_error}" if sync.last_error else line


def checks_table(checks: Sequence[tuple[str, str, str, str]]) -> Table:
    """`memvault doctor`: (name, status, detail, fix) rows; a fix on its own line."""
    marks = {"ok": "[green]ok[/]", "warn": "[yellow]warn[/]", "fail": "[bold red]FAIL[/]"}
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for name, status, detail, fix in checks:
        table.add_row(name, marks.get(status, status), escape(detail))
        if fix:
            table.add_row("", "", f"[dim]fix:[/] {escape(fix)}")
    return table


def check_table(report: CheckReport) -> Table:
    """`memvault check`: a row per file or object (status, what, detail)."""
    marks = {"ok": "[green]ok[/]", "warning": "[yellow]warning[/]",
             "damaged": "[bold red]DAMAGED[/]", "unchecked": "[dim]unchecked[/]",
             "repaired": "[cyan]repaired[/]"}
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for finding in report.findings:
        table.add_row(marks.get(finding.status, finding.status), escape(finding.object),
                      escape(finding.detail))
    return table


def seqs_text(ranges: Sequence[SeqRange]) -> str:
    return ", ".join(f"{first} and on" if last is None else str(first) if first == last
                     else f"{first}-{last}" for first, last in ranges)


def check_verdict(report: CheckReport) -> str:
    """The last lines of `memvault check`: what is lost, and the verdict."""
    lines = []
    if report.lost:
        single = len(report.lost) == 1 and report.lost[0][0] == report.lost[0][1]
        lines.append(f"lost: the operations of log {'seq' if single else 'seqs'} "
                     f"{seqs_text(report.lost)}")
    if report.lost_memories:
        lines.append("memories named by later records whose own records were lost: "
                     + ", ".join(report.lost_memories))
    held = f"{plural(report.memory_count, 'memory', 'memories')}, from snapshot " \
           f"{report.snapshot_seq}"
    if report.repaired:
        state = "repaired" if report.sound else "still DAMAGED after the repair"
        lines.append(f"{state}: {held}; the files it replaced are kept in {report.repaired}")
    elif report.sound:
        lines.append(f"sound: every file checked authenticates ({held})")
    else:
        lines.append(f"DAMAGED ({held}): `memvault check --repair` keeps everything that "
                     "still authenticates (stop the daemon first)")
    return "\n".join(lines)


@dataclass(frozen=True)
class _Column:
    """A column of a row table. A key column (gives_way 0) shows at every
    width; the others give way when the text lacks room, the highest
    `gives_way` first. A key column that `shrinks` may end in "…" when the
    text would otherwise get under TEXT_FLOOR_CHARS. The `fill` column (the
    text) gets what the others leave."""

    header: str
    gives_way: int = 0
    shrinks: bool = False
    fill: bool = False
    numeric: bool = False


def _rows_table(columns: Sequence[_Column], rows: Sequence[Sequence[str]]) -> Table:
    """One line per row, as wide as the console (rich: the terminal's width,
    else $COLUMNS, else 80), its key columns whole and its text cut with "…".

    The widths are decided here rather than left to rich, which shrinks every
    column alike: at 80 columns it dropped the id, score and topic of a
    recall to leave the text alone.
    """
    width = Console().width
    widths = [min(max([len(c.header), *(len(row[i]) for row in rows)]),
                  TEXT_PREVIEW_CHARS if c.fill or c.shrinks else COLUMN_MAX_CHARS)
              for i, c in enumerate(columns)]
    fill = next(i for i, c in enumerate(columns) if c.fill)
    shown = list(range(len(columns)))

    def room() -> int:  # one space between columns
        return width - sum(widths[i] for i in shown if i != fill) - (len(shown) - 1)

    def shrink(text: int, least: int) -> None:
        """Cut the shrinking columns, the widest first, down to `least`
        until the text has `text` characters."""
        for i in sorted((i for i in shown if columns[i].shrinks), key=lambda i: -widths[i]):
            if room() >= text:
                return
            widths[i] = max(min(least, widths[i]), widths[i] - (text - room()))

    shrink(TEXT_ROOM_CHARS, COLUMN_MAX_CHARS)
    for i in sorted((i for i, c in enumerate(columns) if c.gives_way),
                    key=lambda i: -columns[i].gives_way):
        if room() >= TEXT_ROOM_CHARS:
            break
        shown.remove(i)
    shrink(TEXT_FLOOR_CHARS, SHRUNK_CHARS)
    widths[fill] = max(1, min(widths[fill], room()))
    table = Table(box=None, padding=(0, 1, 0, 0), pad_edge=False, header_style="bold")
    for i in shown:
        table.add_column(columns[i].header, justify="right" if columns[i].numeric else "left",
                         width=widths[i], no_wrap=True, overflow="ellipsis")
    for row in rows:
        table.add_row(*(escape(row[i]) for i in shown))
    return table


def _fields_table() -> Table:
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    return table


# The earlier memory a remember reinforced or superseded, on one line:
# "superseded 6001b6ef… (The Q3 deadline for the … is March 3)".
_OUTCOME_TEXT_CHARS = 60


def outcome_line(outcome: str, target: str, text: str) -> str:
    """What a remember did to an earlier memory, for people."""
    flat = " ".join(text.split())
    if len(flat) > _OUTCOME_TEXT_CHARS:
        half = _OUTCOME_TEXT_CHARS // 2 - 1
        flat = f"{flat[:half].rstrip()} … {flat[-half:].lstrip()}"
    short = target[:8] + "…" if len(target) > 8 else target
    return f"{outcome} {short}" + (f" ({flat})" if flat else "")


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
