"""`memvault consolidate` and `memvault forget --sweep`: the vault's upkeep
(docs/upkeep.md). The daemon decides and writes; these print what it did."""

from __future__ import annotations

import click
from rich.table import Table

from memvault.cli import output
from memvault.cli.context import current_client
from memvault.upkeep import ConsolidateResult, SweepResult

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


_client = current_client


def sweep(dry_run: bool, threshold: float | None, as_json: bool) -> None:
    """`forget --sweep`: one line per memory (id, risk, reason), a count on stderr."""
    result = _client().sweep(dry_run=dry_run, threshold=threshold)
    _report(result, as_json, output.swept_table(result.swept) if result.swept else None,
            _sweep_summary(result))
    if result.swept and not (dry_run or as_json):
        click.echo(output.trash_hint(result.purge_at), err=True)


def _report(result: SweepResult | ConsolidateResult, as_json: bool, table: Table | None,
            summary: str) -> None:
    """JSON on stdout; or the table (if any) on stdout and the summary on stderr."""
    if as_json:
        output.echo_json(result.to_dict())
        return
    if table:
        output.show(table)
    click.echo(summary, err=True)


def _sweep_summary(result: SweepResult) -> str:
    count = output.plural(len(result.swept), "memory", "memories")
    done = f"would forget {count}" if result.dry_run else f"forgot {count}"
    kept = f"of {result.considered} ({result.exempt} exempt: pinned, protected, procedural, " \
           f"young or history)"
    return f"{done} {kept}" + ("" if result.dry_run or not result.swept
                               else f" (txid {result.txid})")


@click.command("consolidate")
@click.option("--scope", type=click.Choice(["all", "session"]), default="all", show_default=True,
              help="session: never merge memories of two sessions.")
@click.option("--session", default="", help="With --scope session: only this session.")
@click.option("--min-age-days", type=click.FloatRange(0), default=None,
              help="Only memories at least this old (default: the daemon's, 7; 0 for a "
                   "bulk import).")
@click.option("--dry-run", is_flag=True, help="Show the clusters; write nothing.")
@json_option
def consolidate(scope: str, session: str, min_age_days: float | None, dry_run: bool,
                as_json: bool) -> None:
    """Merge clusters of cold, minor, similar memories into one memory each.

    Each consolidated memory keeps every distinct fact of its cluster with the
    ids it came from; the originals move to the archived tier (recall
    --tier archived, or `memvault get ID --sources` on the consolidated one).
    Pinned, protected and procedural memories are never merged.
    """
    result = _client().consolidate(scope=scope, min_age_days=min_age_days, session=session,
                                   dry_run=dry_run)
    table = (output.consolidations_table(result.consolidations) if result.consolidations
             else None)
    _report(result, as_json, table, _consolidate_summary(result))


def _consolidate_summary(result: ConsolidateResult) -> str:
    clusters = output.plural(len(result.consolidations), "cluster", "clusters")
    verb = "would merge" if result.dry_run else "merged"
    line = (f"{verb} {output.plural(result.archived, 'memory', 'memories')} into {clusters} "
            f"({output.plural(result.candidates, 'candidate', 'candidates')})")
    return line if result.dry_run or not result.consolidations else f"{line} (txid {result.txid})"
