"""A filter's JSON text, read strictly.

Python's `json` accepts what a filter must not: NaN and Infinity, and a key
repeated in one object (the last one silently wins, so `{"tags": "a",
"tags": "b"}` would drop a condition). Both are refused here, as is text over
`MAX_TEXT_BYTES` or nested past `MAX_DEPTH`, each with a message that says
what to write instead.
"""

from __future__ import annotations

import json
from typing import Any

from memvault_base.errors import InvalidArgument
from memvaultd.recall.filter.language import MAX_DEPTH, MAX_TEXT_BYTES

__all__ = ["load_filter_json"]


def load_filter_json(text: str) -> Any:
    """The parsed JSON of `text`; None for empty or whitespace-only text."""
    if len(text) > MAX_TEXT_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise InvalidArgument(f"filter: longer than the limit of {MAX_TEXT_BYTES} bytes of JSON")
    if not text.strip():
        return None
    try:
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise InvalidArgument(
            f"filter: nested too deeply; the limit is {MAX_DEPTH} levels"
        ) from None
    except json.JSONDecodeError as err:
        raise InvalidArgument(f"filter: not valid JSON: {err}") from None
    except ValueError as err:  # e.g. an integer of more than 4300 digits
        raise InvalidArgument(f"filter: not valid JSON: {err}") from None


def _refuse_constant(name: str) -> Any:
    raise InvalidArgument(f"filter: {name} is not allowed; operands must be finite numbers")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidArgument(
                f"filter: the key {key!r} appears twice in one object; "
                'combine conditions with {"AND": [...]} instead'
            )
        out[key] = value
    return out
