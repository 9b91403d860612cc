"""Child processes of the loop: started, watched, restarted after a crash, stopped cleanly.

Each role (an actor, the trainer, the gatekeeper) runs in its own spawned process that shares nothing with
the others but the run directory, so killing any one of them loses at most its unsaved work. A child
notices when its parent is gone (the loop was SIGKILLed) and stops itself, so a rerun of the same command
never finds two trainers or two writers of one actor's arrays.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger(__name__)

# A child that keeps dying is restarted at most this often.
MIN_RESTART_SECONDS = 10.0


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGTERM)
            return


def _child_main(target: Callable[..., Any], args: tuple, parent_pid: int, log_path: str | None) -> None:
    if log_path:
        logging.basicConfig(filename=log_path, level=logging.INFO,
                            format="%(asctime)s %(processName)s %(name)s: %(message)s")
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    target(*args)


@dataclass
class Role:
    name: str
    target: Callable[..., Any]  # a module-level function (spawned processes import it)
    args: tuple = ()
    process: mp.Process | None = None
    restarts: int = 0
    last_start: float = 0.0
    done: bool = False  # exited cleanly on its own (e.g. a game limit was reached)


@dataclass
class Supervisor:
    log_dir: str | None = None
    roles: list[Role] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._ctx = mp.get_context("spawn")

    def add(self, name: str, target: Callable[..., Any], *args: Any) -> None:
        self.roles.append(Role(name, target, args))

    def _start(self, role: Role) -> None:
        log_path = os.path.join(self.log_dir, f"{role.name}.log") if self.log_dir else None
        role.process = self._ctx.Process(
            target=_child_main, args=(role.target, role.args, os.getpid(), log_path), name=role.name,
        )
        role.process.start()
        role.last_start = time.time()

    def start_all(self) -> None:
        for role in self.roles:
            self._start(role)

    def check(self) -> list[str]:
        """Restart children that died; returns messages about what happened."""
        events = []
        for role in self.roles:
            proc = role.process
            if role.done or proc is None or proc.is_alive():
                continue
            if proc.exitcode == 0:
                role.done = True
                events.append(f"{role.name} finished")
                continue
            if time.time() - role.last_start < MIN_RESTART_SECONDS:
                continue
            role.restarts += 1
            events.append(f"{role.name} exited with code {proc.exitcode}; restarting (restart {role.restarts})")
            self._start(role)
        return events

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
