"""Helpers for the tests that run real processes, wait for them to do something, and signal them."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def wait_until(predicate: Callable[[], bool], timeout: float, proc: subprocess.Popen, what: str,
               output: OutputReader | None = None) -> None:
    """Returns once predicate() holds; fails with `what` on timeout, and with the output if proc ends first
    (from `output` where an OutputReader is already reading proc's stdout, which must not be read twice)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            text = output.finish(timeout=10) if output is not None else proc.stdout.read()
            raise AssertionError(f"process ended (exit {proc.returncode}) before {what}:\n{text}")
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextmanager
def reaped(proc: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """Kills the process, and its process group when it leads one, if it is still running on the way out
    (a failing assertion must not leave a loop and its children running)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
            proc.wait()


def interrupt(proc: subprocess.Popen, *signals: int, gap: float = 0.2, timeout: float = 60) -> str:
    """Sends the signals `gap` seconds apart, waits for the process to end, and returns its output."""
    for i, sig in enumerate(signals):
        if i:
            time.sleep(gap)
        proc.send_signal(sig)
    return proc.communicate(timeout=timeout)[0]


class OutputReader:
    """Collects a process's output as it comes (a thread reading its stdout pipe), so that a test can wait
    for a line the process prints rather than race it; finish() waits for the end and returns it all."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self._proc = proc
        self._lines: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._proc.stdout:
            self._lines.append(line)

    def text(self) -> str:
        return "".join(self._lines)

    def finish(self, timeout: float) -> str:
        self._proc.wait(timeout=timeout)
        self._thread.join(timeout)
        return self.text()
