"""`FieldStamps` reads as the plain mapping id -> {field or "*": stamp} it
holds compactly, whatever order its stamps were written in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memvaultd.model.hlc import Stamp
from memvaultd.model.stamps import BASE, FieldStamps

_rows = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]),
                           st.sampled_from([BASE, "text", "trashed_by"]),
                           st.builds(Stamp, st.integers(0, 9), st.integers(0, 3),
                                     st.sampled_from(["d1", "d2"]))))


def _plain(rows: list[tuple[str, str, Stamp]]) -> dict[str, dict[str, Stamp]]:
    out: dict[str, dict[str, Stamp]] = {}
    for memory_id, name, stamp in rows:
        out.setdefault(memory_id, {})[name] = stamp
    return out


@given(_rows)
def test_reads_as_the_plain_mapping(rows: list[tuple[str, str, Stamp]]) -> None:
    plain = _plain(rows)
    stamps = FieldStamps.from_rows(rows)
    assert stamps == plain and dict(stamps) == plain
    assert FieldStamps(plain) == stamps == FieldStamps(stamps)
    assert _plain(list(stamps.rows())) == plain
    for memory_id, entry in plain.items():
        for name in (BASE, "text", "trashed_by"):
            assert stamps.of(memory_id, name) == (entry.get(name) or entry.get(BASE))


def test_writes_and_copies() -> None:
    one, two, three = Stamp(1, 0, "d"), Stamp(2, 0, "d"), Stamp(3, 0, "d")
    stamps = FieldStamps()
    stamps.put("m", one)
    assert stamps["m"] == {BASE: one} and stamps.of("m", "text") == one
    copy = FieldStamps(stamps)
    stamps.set("m", "text", two)
    assert stamps["m"] == {BASE: one, "text": two} and copy["m"] == {BASE: one}
    stamps["m"]["text"] = three  # type: ignore[index]  # a copy: changes nothing
    assert stamps.of("m", "text") == two
    stamps.replace({"m": {BASE: three}, "n": {"text": one}})
    assert stamps == {"m": {BASE: three}, "n": {"text": one}}
    stamps.put("n", two)  # a put stamps the whole memory again
    assert stamps["n"] == {BASE: two}
    stamps.discard("m")
    stamps.discard("gone")
    assert "m" not in stamps and len(stamps) == 1
