"""atomic_write_bytes: a failed write leaves the old file and no temporary file behind."""

from __future__ import annotations

import errno
import os

import pytest

from zero.run import config
from zero.run.config import atomic_write_bytes


def disk_full(*_args) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_failed_write_removes_temporary_file_and_keeps_old(tmp_path, monkeypatch, failing):
    target = tmp_path / "status.json"
    atomic_write_bytes(target, b"old")
    monkeypatch.setattr(config.os, failing, disk_full)
    with pytest.raises(OSError) as caught:
        atomic_write_bytes(target, b"new" * 1000)
    assert caught.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["status.json"]
    assert target.read_bytes() == b"old"


def test_interrupted_write_removes_temporary_file(tmp_path, monkeypatch):
    def interrupted(_fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(config.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(tmp_path / "a" / "b.bin", b"x")
    assert os.listdir(tmp_path / "a") == []


def test_write_replaces_whole_file(tmp_path):
    target = tmp_path / "f.bin"
    atomic_write_bytes(target, b"first")
    atomic_write_bytes(target, b"second")
    assert target.read_bytes() == b"second" and os.listdir(tmp_path) == ["f.bin"]


def test_leftover_temporary_files_are_removed_and_nothing_else(tmp_path):
    from zero.run.config import atomic_write_bytes, remove_leftover_temp_files

    atomic_write_bytes(tmp_path / "status" / "trainer.json", b"{}")
    leftovers = [tmp_path / ".ratings.json.tmp-4242", tmp_path / "checkpoints" / ".best.json.tmp-7"]
    for path in leftovers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half a file")
    (tmp_path / "notes.tmp-1").write_text("not ours: no leading dot")
    assert sorted(remove_leftover_temp_files(tmp_path)) == sorted(leftovers)
    assert not any(p.exists() for p in leftovers)
    assert (tmp_path / "status" / "trainer.json").read_bytes() == b"{}" and (tmp_path / "notes.tmp-1").exists()
