"""Child processes of the loop: started, watched, restarted after a crash, stopped cleanly.

Each role (an actor, the trainer, the gatekeeper) runs in its own spawned process that shares nothing with
the others but the run directory, so killing any one of them loses at most its unsaved work. A child
notices when its parent is gone (the loop was SIGKILLed) and stops itself, so a rerun of the same command
never finds two trainers or two writers of one actor's arrays.

A crashed role is restarted with a growing delay: at least `restart_delay` seconds after its previous start,
doubling with each quick failure in a row (a run shorter than `healthy_seconds`) up to `max_restart_delay`.
After `max_quick_failures` quick failures in a row the role has failed for good: an error that recurs (a full
disk, a corrupt file) would otherwise restart forever with nobody told. Sooner, after `max_same_failures` quick
failures in a row that end the role's log with the same line (the last line of the same traceback; a logged
line begins with its time and never repeats), it has failed for good with that line: the error is known, and
more restarts only repeat it. A run that lasted `healthy_seconds` starts both counts again. A child that knows
its error will recur exits with FATAL_EXIT_CODE and fails for good at once; a full or read-only disk does so by
itself, with one line naming the file it could not write.
`check()` reports each failure with the last lines of the role's log (a fatal one with its one-line reason),
and `failed_roles()` names the roles given up on, for the caller to stop.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from zero.run.config import append_line_durably, disk_problem, notify

log = logging.getLogger(__name__)

# os.nice's scale: 0 is the default priority, 19 the lowest (only idle cycles).
LOWEST_PRIORITY = 19


def below_the_loop(setting: int, loop_niceness: int) -> int:
    """The niceness of a role whose priority setting is `setting` on os.nice's scale, in a loop that runs at
    `loop_niceness`: the setting's scale laid over what is left between the loop's own priority and the
    lowest, so 0 still means "as the other roles" and 19 "only idle cycles". Adding the setting to the
    loop's own instead ran the gatekeeper at 19 under `nice -n 10` (10 + 10, cut to 19): behind every other
    niced job of a busy machine, where the setting meant it to be behind the loop's own roles."""
    room = LOWEST_PRIORITY - loop_niceness
    return loop_niceness + round(setting * room / LOWEST_PRIORITY) if room > 0 else loop_niceness


def lower_priority(role: str, setting: int, setting_name: str) -> int:
    """Set this process's niceness from its setting (below_the_loop: the process starts at the loop's own,
    inherited) and say on the console what it runs at, and why. Returns the niceness."""
    loop_niceness = os.nice(0)
    niceness = os.nice(below_the_loop(setting, loop_niceness) - loop_niceness)
    notify(f"{role} running at niceness {niceness} ({setting_name} {setting}; the loop runs at {loop_niceness})")
    return niceness

# Exit status of a child whose error would recur on restart: "fatal, do not restart".
FATAL_EXIT_CODE = 3
LOG_TAIL_LINES = 10


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGTERM)
            return


def role_main(target: Callable[..., Any], args: tuple, parent_pid: int, log_path: str | None) -> None:
    if log_path:
        logging.basicConfig(filename=log_path, level=logging.INFO,
                            format="%(asctime)s %(processName)s %(name)s: %(message)s")
        # A log on a full disk loses its line, and logging would print a traceback of the failed write to the
        # console instead; what a role must say there it prints itself (role_main's one-line reason).
        logging.raiseExceptions = False
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    try:
        target(*args)
    except SystemExit as exc:
        if exc.code == FATAL_EXIT_CODE:  # a role's own fatal stop (train.loop.driver.stops_for_good), reason logged
            exit_fatal()
        raise
    except Exception as exc:
        problem = disk_problem(exc)
        if problem is not None:
            # No restart cures a full or read-only disk until someone acts: the reason in one line, which the
            # supervisor's failure report quotes, not a traceback of where the write happened to be.
            if not exc.filename and log_path:
                # Each write that can meet a full disk should name its file; where one does not, the log
                # keeps where it was (above the reason, which stays the log's last line).
                log.warning("a disk error that names no file", exc_info=exc)
            log.error("stopped: %s", problem)
            if log_path:  # the log may sit on the very disk that is full: the console gets the reason too
                print(f"{mp.current_process().name} stopped: {problem}", file=sys.stderr, flush=True)
            exit_fatal()
        # Into the role's log, where the supervisor's failure report quotes it from; without a log file the
        # re-raised error's traceback already reaches stderr.
        if log_path:
            log.exception("stopped by an error")
        raise


def exit_fatal() -> None:
    """End this role with FATAL_EXIT_CODE, its reason already logged. At once: the interpreter's teardown
    would free what the failed work left behind (the replay store's pending asyncio tasks) and log about it
    after the reason, and the supervisor's report quotes the log's last line."""
    logging.shutdown()
    sys.stderr.flush()
    os._exit(FATAL_EXIT_CODE)


def _log_tail(path: str, lines: int = LOG_TAIL_LINES, max_bytes: int = 8192) -> list[str]:
    """The last lines of a log file, reading only its end; [] when there is none."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - max_bytes))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]


def log_tail_text(path: str, lines: int = LOG_TAIL_LINES) -> str:
    """The end of a role's log as the tail of a failure message ("" without one). A fatal exit's reason is
    its last line (one line by design), so its report quotes just that."""
    tail = _log_tail(path, lines)
    if len(tail) == 1:
        return f"; last line of {path}: {tail[0]}"
    if tail:
        return "".join([f"; last lines of {path}:"] + [f"\n    {line}" for line in tail])
    # An empty log: on a full disk the role's reason could not be written to it either. Writing a note there
    # says whether that is why (a role that met the full disk first in its own log said nothing at all).
    try:
        append_line_durably(Path(path), "the loop found this log empty when its role ended\n")
    except OSError as exc:
        return f"; its log is empty: {disk_problem(exc) or exc}"
    return ""


@dataclass
class Role:
    name: str
    target: Callable[..., Any]  # a module-level function (spawned processes import it)
    args: tuple = ()
    process: mp.Process | None = None
    restarts: int = 0
    started_at: float = 0.0  # time.monotonic() of the latest start
    quick_failures: int = 0  # crashes in a row, each after a run shorter than healthy_seconds
    last_error: str | None = None  # the last line of the role's log after its latest crash
    same_failures: int = 0  # quick failures in a row whose log ended with last_error
    restart_at: float | None = None  # when a crashed role is due to start again
    done: bool = False  # exited cleanly on its own (e.g. a game limit was reached)
    failed: bool = False  # given up on: not restarted again


@dataclass
class Supervisor:
    log_dir: str | None = None
    roles: list[Role] = field(default_factory=list)
    restart_delay: float = 10.0  # seconds from a start to the restart after the first quick failure
    max_restart_delay: float = 300.0
    healthy_seconds: float = 300.0  # a run this long before a crash starts the failure count again
    max_quick_failures: int = 5
    max_same_failures: int = 3

    def __post_init__(self) -> None:
        self._ctx = mp.get_context("spawn")

    def add(self, name: str, target: Callable[..., Any], *args: Any) -> None:
        self.roles.append(Role(name, target, args))

    def _log_path(self, role: Role) -> str | None:
        return os.path.join(self.log_dir, f"{role.name}.log") if self.log_dir else None

    def _start(self, role: Role) -> None:
        role.process = self._ctx.Process(
            target=role_main, args=(role.target, role.args, os.getpid(), self._log_path(role)), name=role.name,
        )
        role.process.start()
        role.started_at = time.monotonic()

    def start_all(self) -> None:
        for role in self.roles:
            self._start(role)

    def check(self) -> list[str]:
        """Note children that ended, restart the crashed ones that are due; returns messages about what
        happened (a role that fails for good says so, with the end of its log)."""
        events = []
        now = time.monotonic()
        for role in self.roles:
            proc = role.process
            if role.done or role.failed or proc is None:
                continue
            if role.restart_at is None:
                if proc.is_alive():
                    continue
                if proc.exitcode == 0:
                    role.done = True
                    events.append(f"{role.name} finished")
                    continue
                events.append(self._crashed(role, proc.exitcode, now))
            if role.restart_at is not None and now >= role.restart_at:
                role.restart_at = None
                role.restarts += 1
                self._start(role)
        return events

    def _crashed(self, role: Role, code: int, now: float) -> str:
        """Decide between a later restart and giving up; the message says which."""
        ran = now - role.started_at
        role.quick_failures = role.quick_failures + 1 if ran < self.healthy_seconds else 1
        what = f"{role.name} exited with code {code} after {ran:.1f} s"
        if code == FATAL_EXIT_CODE:
            role.failed = True
            return f"{what} (fatal: its error would recur); failed for good, not restarted{self._tail(role, 1)}"
        # A process killed by a signal wrote no error of its own: its log's last line says nothing of why.
        path = self._log_path(role)
        error = next(iter(_log_tail(path, 1)), None) if path and code > 0 else None
        same = error is not None and error == role.last_error and role.quick_failures > 1
        role.same_failures = role.same_failures + 1 if same else 1
        role.last_error = error
        if same and role.same_failures >= self.max_same_failures:
            role.failed = True
            return f"{what}; failed the same way {role.same_failures} times in a row, not restarted: {error}"
        if role.quick_failures >= self.max_quick_failures:
            role.failed = True
            return (f"{what}; failed for good after {role.quick_failures} quick failures in a row "
                    f"(each within {self.healthy_seconds:g} s of its start), not restarted{self._tail(role)}")
        delay = min(self.restart_delay * 2 ** (role.quick_failures - 1), self.max_restart_delay)
        role.restart_at = role.started_at + delay
        return (f"{what}; restart {role.restarts + 1} in {max(0.0, role.restart_at - now):.1f} s "
                f"(backoff {delay:g} s, quick failure {role.quick_failures} of {self.max_quick_failures})")

    def _tail(self, role: Role, lines: int = LOG_TAIL_LINES) -> str:
        path = self._log_path(role)
        return log_tail_text(path, lines) if path else ""

    def failed_roles(self) -> list[str]:
        """Names of the roles given up on (see check()); the caller should stop and report them."""
        return [r.name for r in self.roles if r.failed]

    def all_done(self, names: set[str] | None = None) -> bool:
        return all(r.done for r in self.roles if names is None or r.name in names)

    def stop_all(self, timeout: float = 60.0) -> None:
        """SIGTERM every child, wait for them to save their state, then kill what is left."""
        for role in self.roles:
            if role.process is not None and role.process.is_alive():
                os.kill(role.process.pid, signal.SIGTERM)
        deadline = time.time() + timeout
        for role in self.roles:
            if role.process is not None:
                role.process.join(max(0.0, deadline - time.time()))
        for role in self.roles:
            if role.process is not None and role.process.is_alive():
                log.warning("%s did not stop in time; killing it", role.name)
                role.process.kill()
                role.process.join()
