"""The options several `memvault` commands share, and the client keywords the
memory options become."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from memvault.cli.input import json_object

__all__ = ["allow_secret_option", "filter_option", "json_option", "memory_keywords",
           "memory_options"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
allow_secret_option = click.option(
    "--allow-secret", is_flag=True,
    help="Store a text that holds what looks like a credential instead of refusing it.")
filter_option = click.option(
    "--filter", "filter_", metavar="JSON", help="A filter expression, passed as is."
)

_F = TypeVar("_F", bound=Callable[..., Any])


def memory_options(command: _F) -> _F:
    """The field options of remember, supersede and update; None when not given."""
    options = [
        click.option(
            "--type",
            "type_",
            metavar="TYPE",
            help="episodic | semantic | procedural (or fact, event, instruction, task).",
        ),
        click.option("--topic", help="Dotted topic key, e.g. user.preferences.testing."),
        click.option("--tag", "tags", multiple=True, help="A tag; repeat for several."),
        click.option("--category"),
        click.option("--payload", metavar="JSON", help="A JSON object stored with the memory."),
        click.option(
            "--importance", type=click.FloatRange(0, 1), help="0..1; 0.9 and above pins it."
        ),
        click.option("--session", help="Session id."),
        click.option("--source", help="Which agent or file wrote it."),
        click.option("--entity"),
        click.option("--tier", help="working | long_term | archived."),
        click.option("--expires-at", type=float, help="Unix time after which it is hidden."),
        click.option("--protected/--unprotected", default=None,
                     help="Keep it out of the forgetting sweep and consolidation."),
        click.option("--scope", metavar="SCOPE",
                     help="Whose it is: user, project:NAME or agent:NAME (remember: the "
                          "first --scope given to memvault other than user, else user)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def memory_keywords(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The client keywords of the memory options given (None or no --tag: not given)."""
    out = {("type" if k == "type_" else k): v for k, v in fields.items() if v not in (None, ())}
    if "payload" in out:
        out["payload"] = json_object(out["payload"], "--payload")
    return out
