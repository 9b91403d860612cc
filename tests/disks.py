"""Real full and read-only disks for the tests: a small tmpfs and a read-only bind mount.

Mounting needs root (CI's containers run as root); elsewhere the tests that need a disk skip with a message.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("making a full or read-only disk needs root and mount(8)")
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a test disk here: {done.stderr.strip()}")


def _unmount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


@contextmanager
def small_disk(where: Path, kib: int) -> Iterator[Path]:
    """`where` becomes an empty disk of `kib` KiB for the duration."""
    where.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(where))
    try:
        yield where
    finally:
        _unmount(where)


@contextmanager
def read_only(where: Path) -> Iterator[Path]:
    """`where`, with what it holds, cannot be written for the duration."""
    _mount("--bind", str(where), str(where))
    try:
        _mount("-o", "remount,ro,bind", str(where))
        yield where
    finally:
        _unmount(where)


def fill(disk: Path, leave: int = 0) -> None:
    """Takes the disk's free space but `leave` bytes (a full disk, or one about to be)."""
    with open(disk / "filler", "wb") as fh:
        while True:
            free = shutil.disk_usage(disk).free - leave
            if free <= 0:
                return
            try:
                fh.write(b"\0" * min(free, 1 << 16))
                fh.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                return


def files_below(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
