"""Supervisor: restarts back off, a crash loop or a fatal exit ends in a role failed for good (with the end of
its log), a healthy run starts the failure count again. Real spawned children, bounded in time."""

from __future__ import annotations

import errno
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from train.loop.supervisor import FATAL_EXIT_CODE, Supervisor, below_the_loop


def note_start(record: str) -> int:
    """Append a line to `record`; returns how many starts it now holds."""
    with open(record, "a") as fh:
        fh.write("start\n")
    return len(Path(record).read_text().splitlines())


def crash_quickly(record: str) -> None:
    note_start(record)
    logging.getLogger("role").error("cannot write the checkpoint (simulated)")
    sys.exit(1)


def third_run_healthy_then_crash(record: str) -> None:
    if note_start(record) == 3:
        time.sleep(4.0)
    sys.exit(1)


def exit_fatal(record: str) -> None:
    note_start(record)
    logging.getLogger("role").error("replay store is corrupt (simulated)")
    sys.exit(FATAL_EXIT_CODE)


def disk_full(record: str) -> None:
    note_start(record)
    raise OSError(errno.ENOSPC, "No space left on device")


def disk_full_with_a_pending_task(record: str) -> None:
    """As an actor whose replay store (zarr, on asyncio) met the full disk mid-write: a task still pending,
    which asyncio logs about when it is destroyed, after the role's own reason."""
    import asyncio

    note_start(record)
    loop = asyncio.new_event_loop()
    pending = loop.create_task(asyncio.sleep(3600))  # noqa: F841 (freed with this frame, after the error)
    raise OSError(errno.ENOSPC, "No space left on device")


def raise_the_same_error(record: str) -> None:
    note_start(record)
    raise RuntimeError("the network answers NaN (simulated)")


def raise_another_error_each_time(record: str) -> None:
    raise RuntimeError(f"error number {note_start(record)} (simulated)")


def finish(record: str) -> None:
    note_start(record)


def starts(record: Path) -> int:
    return len(record.read_text().splitlines()) if record.exists() else 0


def run_until(sup: Supervisor, done: Callable[[], bool], timeout: float = 40.0) -> list[str]:
    events: list[str] = []
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out; events so far: {events}"
        events += sup.check()
        time.sleep(0.02)
    return events


@pytest.fixture
def supervised(tmp_path):
    """(a Supervisor logging into tmp_path, with fast timings; the start record) for one role."""
    sups: list[Supervisor] = []

    def make(target: Callable[[str], None], **timing: float) -> tuple[Supervisor, Path]:
        sup = Supervisor(log_dir=str(tmp_path), **timing)
        sup.add("role", target, str(tmp_path / "starts"))
        sups.append(sup)
        sup.start_all()
        return sup, tmp_path / "starts"

    yield make
    for sup in sups:
        sup.stop_all(timeout=5)


def test_crash_loop_backs_off_then_fails_for_good(supervised):
    sup, record = supervised(crash_quickly, restart_delay=0.2, max_restart_delay=0.5, healthy_seconds=60,
                             max_quick_failures=4)
    started = time.monotonic()
    events = run_until(sup, sup.failed_roles)
    assert time.monotonic() - started >= 0.2 + 0.4 + 0.5
    assert starts(record) == 4
    assert re.findall(r"backoff ([\d.]+) s", " ".join(events)) == ["0.2", "0.4", "0.5"]
    *_, last = events
    assert "failed for good after 4 quick failures in a row" in last
    assert "cannot write the checkpoint (simulated)" in last  # the end of the role's log
    assert sup.failed_roles() == ["role"] and not sup.all_done()
    time.sleep(1.0)
    assert sup.check() == [] and starts(record) == 4


def test_healthy_run_starts_the_failure_count_again(supervised):
    # Quick, quick, healthy, quick, quick: without the reset the third quick failure would come at run 3.
    sup, record = supervised(third_run_healthy_then_crash, restart_delay=0.05, max_restart_delay=0.1,
                             healthy_seconds=3.0, max_quick_failures=3)
    events = run_until(sup, sup.failed_roles)
    assert starts(record) == 5
    assert re.findall(r"quick failure (\d) of 3", " ".join(events)) == ["1", "2", "1", "2"]


def test_a_role_failing_the_same_way_stops_with_that_line(supervised):
    # Before: an actor whose network answered NaN restarted with the same traceback until the quick-failure
    # limit (minutes at the loop's backoff), while the status line said the first games were being played.
    sup, record = supervised(raise_the_same_error, restart_delay=0.05, max_restart_delay=0.1, healthy_seconds=60,
                             max_quick_failures=6)
    *_, last = run_until(sup, sup.failed_roles)
    assert starts(record) == 3
    assert last.endswith("failed the same way 3 times in a row, not restarted: "
                         "RuntimeError: the network answers NaN (simulated)")
    assert "\n" not in last


def test_a_role_failing_differently_each_time_is_restarted_up_to_the_quick_failure_limit(supervised):
    sup, record = supervised(raise_another_error_each_time, restart_delay=0.05, max_restart_delay=0.1,
                             healthy_seconds=60, max_quick_failures=4)
    *_, last = run_until(sup, sup.failed_roles)
    assert starts(record) == 4 and "failed for good after 4 quick failures in a row" in last


@pytest.mark.parametrize(("target", "words"), [
    (exit_fatal, "replay store is corrupt (simulated)"),
    (disk_full, "No space left on device"),
    (disk_full_with_a_pending_task, "No space left on device"),
])
def test_fatal_exit_fails_at_once_with_log_tail(supervised, target, words):
    sup, record = supervised(target, restart_delay=0.05)
    (event,) = run_until(sup, sup.failed_roles)
    assert f"exited with code {FATAL_EXIT_CODE}" in event and "failed for good, not restarted" in event
    assert words in event
    time.sleep(0.5)
    assert sup.check() == [] and starts(record) == 1


def test_a_disk_error_that_names_no_file_leaves_where_it_was_in_the_log(supervised, tmp_path):
    sup, _ = supervised(disk_full)
    (event,) = run_until(sup, sup.failed_roles)
    assert event.endswith("stopped: cannot write: No space left on device")  # the log's last line
    logged = (tmp_path / "role.log").read_text()
    assert "a disk error that names no file" in logged and "in disk_full" in logged


def test_clean_exit_is_done_not_failed(supervised):
    sup, record = supervised(finish)
    assert run_until(sup, sup.all_done) == ["role finished"]
    assert sup.failed_roles() == [] and starts(record) == 1


@pytest.mark.parametrize("setting, loop, niceness", [
    (10, 0, 10), (3, 0, 3),  # a loop at the default priority: the setting itself
    (10, 10, 15),  # under `nice -n 10`: halfway between the loop's 10 and the lowest, not 10 + 10 cut to 19
    (0, 10, 10), (19, 10, 19), (10, 19, 19), (0, 19, 19),  # 0 is "as the loop", 19 "only idle cycles"
])
def test_a_roles_priority_is_set_below_the_loops_own_not_added_to_it(setting, loop, niceness):
    assert below_the_loop(setting, loop) == niceness


def test_a_role_says_on_the_console_at_what_priority_it_runs():
    code = ("import os; from train.loop.supervisor import lower_priority; "
            "print(lower_priority('gatekeeper', 10, 'gating.niceness'), os.nice(0))")
    done = subprocess.run(["nice", "-n", "10", sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    loop = min(19, os.nice(0) + 10)
    expected = below_the_loop(10, loop)
    assert done.stdout.split() == [str(expected), str(expected)]
    assert f"gatekeeper running at niceness {expected} (gating.niceness 10; the loop runs at {loop})" in done.stderr
