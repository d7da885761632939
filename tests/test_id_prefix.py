"""The rule that turns an id prefix into the one id it names
(`memvaultd.model.id_prefix`), on any set of ids: it names a memory only
when exactly one id is or begins with the reference."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memvault_base.errors import InvalidArgument, NotFound
from memvaultd.model.id_prefix import MIN_PREFIX, NAMED_CANDIDATES, resolve

ids = st.sets(st.text("0123456789abcdef", min_size=1, max_size=10), max_size=30)


@given(held=ids, ref=st.text("0123456789abcdef", max_size=10))
def test_a_reference_names_one_id_or_none(held: set[str], ref: str) -> None:
    beginning = sorted(i for i in held if i.startswith(ref))
    try:
        named = resolve(ref, held.__contains__, held)
    except NotFound:
        assert ref not in held and len(ref) >= MIN_PREFIX and not beginning
    except InvalidArgument as err:
        assert ref not in held
        assert len(ref) < MIN_PREFIX or len(beginning) > 1
        if len(ref) >= MIN_PREFIX:
            assert all(i in str(err) for i in beginning[:NAMED_CANDIDATES])
    else:
        assert named == ref if ref in held else [named] == beginning


def test_a_whole_id_names_itself_and_a_known_purged_one_passes() -> None:
    held = {"abcd", "abcdef"}
    assert resolve("abcd", held.__contains__, held) == "abcd"
    assert resolve("abcde", held.__contains__, held) == "abcdef"
    assert resolve("gone", lambda i: i == "gone", held) == "gone"


def test_many_candidates_are_counted_not_all_named() -> None:
    held = {f"feed{n:04d}" for n in range(12)}
    with pytest.raises(InvalidArgument, match=r"begins 12 ids \(feed0000, .*feed0004 and 7 more"):
        resolve("feed", held.__contains__, held)
