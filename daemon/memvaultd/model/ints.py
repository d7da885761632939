"""The row numbers 0..n-1 as one set of int objects, shared by every map.

A vault keeps several maps from an id (or a term) to a number counted from
0: the index's rows, the keyword index's documents and terms, the stamps'
rows. CPython makes an object of each int above 256 (28 bytes); a million
memories counted in four maps held four million of them, 112 MB, where one
million shared is 28 MB (and the list holding them 8 MB).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from itertools import islice

_INTS: list[int] = []
_lock = threading.Lock()


def shared(start: int, stop: int) -> Iterator[int]:
    """The ints start..stop-1, as the objects every caller is given."""
    return islice(table(stop), start, stop)


def table(size: int) -> list[int]:
    """The shared ints from 0, at least `size` of them: read, never written."""
    if len(_INTS) < size:
        with _lock:
            _INTS.extend(range(len(_INTS), size))
    return _INTS
