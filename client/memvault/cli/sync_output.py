"""How `memvault sync now|status` shows where sync stands, for people: a
label per line, times as the local date and time with how long ago, counts
with their noun, all within 80 columns. `--json` prints `SyncInfo.to_dict()`
instead (epoch seconds, as the wire has them)."""

from __future__ import annotations

import time
from datetime import datetime

from rich.markup import escape
from rich.table import Table

from memvault.cli.output import plural
from memvault.types import SyncInfo

__all__ = ["ago", "sync_table"]

_STATES = {
    "idle": "idle: up to date with the remote",
    "syncing": "syncing now",
    "offline": "offline: the remote failed; retried with back-off",
    "stopped": "stopped: see the last error",
}


def sync_table(info: SyncInfo, *, now: float | None = None) -> Table:
    """The status of sync, a labelled line per fact; the rare ones
    (a withheld chain, a bad version, a repush) only when they hold."""
    now = time.time() if now is None else now
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    if not info.configured:
        table.add_row("sync", "not set up (memvault init / memvault join)")
        return table
    version = f"{info.head} on chain {info.chain}"
    if info.snapshot:
        version += f", snapshot at {info.snapshot}"
    rows = [
        ("remote", info.remote),
        ("state", _STATES.get(info.state, info.state)),
        ("last push", _moment(info.last_push, now)),
        ("last pull", _moment(info.last_pull, now)),
        ("pending", "nothing to push" if not info.pending
         else f"{plural(info.pending, 'operation', 'operations')} to push"),
        ("version", version),
        ("pushed", f"up to log record {info.pushed_seq}"),
    ]
    if info.withheld_head:
        rows.append(("withheld", f"the remote claims version {info.withheld_head} and does "
                                 "not hand it over"))
    if info.bad_version:
        rows.append(("bad version", f"{info.bad_version} does not open"))
    if info.repush:
        rows.append(("repush", "the next push puts the whole vault again"))
    if info.witness:
        rows.append(("witness", f"{info.witness}; failing, sync goes on without it: "
                                f"{info.witness_error}" if info.witness_error
                     else info.witness))
    for number, reason in info.refused:
        rows.append(("refused", f"version {number}: {reason}; nothing of it applied, sync "
                                "went on past it"))
    for device, last_seen in info.silent:
        rows.append(("silent", f"device {device}: nothing from it since "
                               f"{_moment(last_seen, now)}, over the bound of "
                               f"{_span(info.freeze_bound_s)}: idle, gone, or hidden by the "
                               "remote (compare `memvault sync verify` there)"))
    if info.last_error:
        rows.append(("last error", info.last_error))
    for label, value in rows:
        table.add_row(label, escape(value))
    return table


def ago(seconds: float) -> str:
    """How long ago, as people say it: "just now", "3 minutes ago"."""
    if seconds < -5:  # the clocks disagree: say so rather than "-3 minutes ago"
        return "in the future (is this clock behind?)"
    if seconds < 5:
        return "just now"
    for size, unit in ((86_400, "day"), (3_600, "hour"), (60, "minute"), (1, "second")):
        if seconds >= size:
            count = int(seconds // size)
            return f"{plural(count, unit, unit + 's')} ago"
    return "just now"


def _span(seconds: float) -> str:
    """A bound as people say it: "3 days", "2 hours", "4 seconds"."""
    for size, unit in ((86_400, "day"), (3_600, "hour"), (60, "minute")):
        if seconds >= size:
            return plural(round(seconds / size), unit, unit + "s")
    return plural(round(seconds), "second", "seconds")


def _moment(epoch: float, now: float) -> str:
    if not epoch:
        return "never"
    when = datetime.fromtimestamp(epoch).isoformat(sep=" ", timespec="seconds")
    return f"{when} ({ago(now - epoch)})"
