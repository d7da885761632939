"""`sync.state` is replaced durably: its rename is followed by an fsync of the
data directory, as every other file the daemon renames into place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memvaultd.sync.high_water import FILE_NAME, HighWater, HighWaterFile


def test_saving_the_sync_state_fsyncs_its_directory(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        if os.path.samefile(f"/proc/self/fd/{fd}", tmp_path):
            events.append("directory synced")
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        real_replace(src, dst)
        if Path(dst).name == FILE_NAME:
            events.append("renamed")

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    water_file = HighWaterFile(tmp_path, bytes(32), bytes(16))
    water_file.save(HighWater("file:///somewhere", head=3, head_hash="ab" * 32, pushed_seq=7))
    assert events[-2:] == ["renamed", "directory synced"]
    assert water_file.load() == HighWater("file:///somewhere", head=3, head_hash="ab" * 32,
                                          pushed_seq=7)
