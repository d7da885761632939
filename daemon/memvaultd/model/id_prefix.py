"""A memory named by the first characters of its id, as `memvault`'s tables
show it (8 hex digits of 32): the rule that turns such a prefix into the one
id it names, or refuses it.

- A reference that is a whole id the vault knows (held, in the trash, or
  purged) names that memory, even when longer ids begin with it: a whole id
  means what it always meant, and a purged one is left to the command to say
  so.
- Otherwise it is a prefix: at least MIN_PREFIX characters, and the
  beginning of exactly one id. None is NotFound; several are InvalidArgument
  naming them, so that nothing acts on a memory the caller did not name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from memvault_base.errors import InvalidArgument, NotFound

# 4 hex digits tell apart ~300 memories (65,536 prefixes; two of n share one
# with even odds at n ~ 300); fewer would be ambiguous in almost every vault,
# and a single character is more likely a typo than a choice.
MIN_PREFIX = 4
# The candidates an ambiguous prefix names: enough to pick from, one line.
NAMED_CANDIDATES = 5


def resolve(ref: str, known: Callable[[str], bool], ids: Iterable[str]) -> str:
    """The id `ref` names: itself when `known(ref)`, else the one of `ids` it begins."""
    if known(ref):
        return ref
    if len(ref) < MIN_PREFIX:
        raise InvalidArgument(f"id: {ref!r} is not an id, and an id prefix needs at least "
                              f"{MIN_PREFIX} characters")
    matches = sorted(memory_id for memory_id in ids if memory_id.startswith(ref))
    if not matches:
        raise NotFound(f"id: no memory whose id is or begins with {ref!r}")
    if len(matches) > 1:
        named = ", ".join(matches[:NAMED_CANDIDATES])
        more = len(matches) - NAMED_CANDIDATES
        others = f" and {more} more" if more > 0 else ""
        raise InvalidArgument(f"id: {ref!r} begins {len(matches)} ids ({named}{others}); "
                              "give more of the id")
    return matches[0]
