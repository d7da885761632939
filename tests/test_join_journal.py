"""The join journal on its own: a committed join is rolled forward from any
point a crash can leave it at, an uncommitted one is dropped, and nothing
of the current vault is touched before the commit. (The real daemon killed
at each step: test_join_crash.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memvault_base.errors import IntegrityError
from memvaultd.storage.join_journal import JOURNAL, NAMES, STAGING, JoinJournal


def _vault(directory: Path, label: str, names: tuple[str, ...] = NAMES) -> None:
    for name in names:
        if name in ("log", "snapshots"):
            (directory / name).mkdir(parents=True)
            (directory / name / "00000000000000000001.x").write_text(label)
        else:
            (directory / name).write_text(label)


def _contents(data: Path) -> dict[str, str]:
    found = {}
    for name in NAMES:
        path = data / name
        if path.is_dir():
            found[name] = (path / "00000000000000000001.x").read_text()
        elif path.exists():
            found[name] = path.read_text()
    return found


def _staged(data: Path, without: tuple[str, ...] = ()) -> JoinJournal:
    _vault(data, "old")
    journal = JoinJournal(data)
    _vault(journal.begin(), "new", tuple(n for n in NAMES if n not in without))
    return journal


def test_before_the_commit_the_current_vault_is_untouched_and_a_start_drops_the_join(
        tmp_path: Path) -> None:
    journal = _staged(tmp_path)
    assert _contents(tmp_path) == dict.fromkeys(NAMES, "old")
    assert JoinJournal(tmp_path).recover() == "rolled back"
    assert _contents(tmp_path) == dict.fromkeys(NAMES, "old")
    assert not journal.staging.exists()


@pytest.mark.parametrize("moved", range(len(NAMES) + 1))
def test_a_committed_join_is_finished_from_wherever_a_crash_left_it(tmp_path: Path,
                                                                   moved: int) -> None:
    journal = _staged(tmp_path, without=("vault.key",))  # a keyring vault joining
    journal.commit("ab" * 16, "cd" * 16)
    replaced = tmp_path / "join.replaced"
    replaced.mkdir()
    for name in NAMES[:moved]:  # as a crash in the middle of `roll_forward` leaves it
        if (tmp_path / name).exists():
            (tmp_path / name).rename(replaced / name)
        if (journal.staging / name).exists():
            (journal.staging / name).rename(tmp_path / name)
    assert JoinJournal(tmp_path).recover() == "rolled forward"
    expected = dict.fromkeys(NAMES, "new")
    del expected["vault.key"]  # the old key file goes, none comes
    assert _contents(tmp_path) == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(expected)
    assert JoinJournal(tmp_path).recover() == ""


def test_a_journal_that_does_not_parse_stops_the_start_naming_it(tmp_path: Path) -> None:
    journal = _staged(tmp_path)
    journal.commit("ab" * 16, "cd" * 16)
    doc = json.loads((tmp_path / JOURNAL).read_text())
    doc["staged"] = ["../elsewhere"]
    (tmp_path / JOURNAL).write_text(json.dumps(doc))
    with pytest.raises(IntegrityError, match=re.escape(JOURNAL)):
        JoinJournal(tmp_path).recover()
    assert (tmp_path / STAGING).exists() and _contents(tmp_path) == dict.fromkeys(NAMES, "old")


def test_nothing_is_committed_without_a_staged_vault_json(tmp_path: Path) -> None:
    journal = _staged(tmp_path, without=("vault.json",))
    with pytest.raises(IntegrityError, match=r"no vault\.json staged"):
        journal.commit("ab" * 16, "cd" * 16)
    assert not (tmp_path / JOURNAL).exists()
