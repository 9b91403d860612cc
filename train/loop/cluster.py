"""The loop's roles on a Ray cluster (`checkers-zero loop --cluster ADDRESS`).

Each role (an actor, the trainer, the gatekeeper) becomes a Ray actor, `RoleHost`, that runs the role in
a child process exactly as the local supervisor does (train.loop.supervisor: the same entry point, log file,
signals and fatal exit code), on whichever node Ray places it. The roles still share nothing but the run
directory, which must be storage every node sees at the same path (a shared filesystem; the replay store
may instead live on an object store, zero.run.objectstore).

Placement (`placement`): one CPU per role; self-play actors spread over the nodes; where the cluster has
GPUs the trainer takes one (half of it when there is only one) and the actors and the gatekeeper share
what is left, so each of them runs its network on a GPU (Ray sets CUDA_VISIBLE_DEVICES, and the roles'
device "auto" follows it).

Restarts are Ray's: a role whose process crashes takes its host down with it (`os._exit`), and Ray starts
the host again, and with it the role, up to `ClusterConfig.max_restarts` times; a killed worker process is
restarted the same way. A role that exits with FATAL_EXIT_CODE (an error that would recur) is not
restarted: the loop stops the run with its message, as it does locally.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from train.loop.supervisor import FATAL_EXIT_CODE, LOG_TAIL_LINES, log_tail_text, role_main
from zero.run.config import check_settings, setting

log = logging.getLogger(__name__)

# Environment the roles need wherever they run (the data folder, the endgame databases, ...).
FORWARDED_ENV_PREFIXES = ("CHECKERS_ZERO_",)


@dataclass
class ClusterConfig:
    """How the loop runs its roles on a Ray cluster (only with --cluster)."""

    # Ray restarts of each role's process before the run stops with its error.
    max_restarts: int = setting(5, low=0, high=1000)
    # A restarted role waits this long before it starts, so that the role's previous process (which
    # notices within a second that its host is gone, and stops) has committed its games and let go of
    # its locks.
    restart_grace_seconds: float = setting(5.0, low=0)

    def validate(self) -> None:
        check_settings(self, "cluster")


class ClusterError(RuntimeError):
    """The cluster cannot be used (Ray missing, no cluster at the address)."""


def placement(role: str, resources: dict[str, float], actors: int) -> dict[str, Any]:
    """Ray options for `role` ("actor-N", "trainer" or "gatekeeper") on a cluster with these total
    resources (ray.cluster_resources()) running `actors` self-play actors."""
    gpus = float(resources.get("GPU", 0.0))
    trainer_gpus = 1.0 if gpus >= 2 else 0.5 * gpus
    options: dict[str, Any] = {"num_cpus": 1}
    if role == "trainer":
        options["num_gpus"] = trainer_gpus
        return options
    if gpus:
        # Ray places fractional shares at 1/10,000 of a GPU; round down so that they always fit.
        options["num_gpus"] = min(1.0, int((gpus - trainer_gpus) / (actors + 1) * 10_000) / 10_000)
    if role.startswith("actor-"):
        options["scheduling_strategy"] = "SPREAD"
    return options


def cluster_actors(setting: int, resources: dict[str, float]) -> int:
    """Self-play actors for actors = -1 on a cluster: one per CPU the trainer and the gatekeeper leave."""
    return setting if setting >= 0 else max(1, int(resources.get("CPU", 0)) - 2)


class RoleHost:
    """One role on one node: its child process, started when Ray starts (or restarts) this actor."""

    def __init__(self, name: str, target: Callable[..., Any], args: tuple, log_path: str, grace: float):
        import ray

        if ray.get_runtime_context().was_current_actor_reconstructed:
            time.sleep(grace)
        self.process = mp.get_context("spawn").Process(target=role_main, args=(target, args, os.getpid(), log_path),
                                                       name=name)
        self.process.start()

    def poll(self) -> tuple[str, int]:
        """("running", "done" or "fatal", this host's process id); a crashed role ends this process, for
        Ray to restart it."""
        code = self.process.exitcode
        if code is None:
            return "running", os.getpid()
        if code == 0:
            return "done", os.getpid()
        if code == FATAL_EXIT_CODE:
            return "fatal", os.getpid()
        os._exit(1)

    def stop(self, timeout: float) -> None:
        """SIGTERM the role, give it `timeout` seconds to save its state, then kill it."""
        if self.process.is_alive():
            os.kill(self.process.pid, signal.SIGTERM)
            self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


@dataclass
class _Remote:
    name: str
    target: Callable[..., Any]
    args: tuple
    handle: Any = None
    pid: int | None = None  # the host's process id at the last answer: a new one means Ray restarted it
    restarts: int = 0
    lost_since: float | None = None  # when the host stopped answering (crashed, killed, being restarted)
    done: bool = False
    failed: bool = False


@dataclass
class RayRoles:
    """The roles of one loop on a Ray cluster, with the local Supervisor's interface (add, start_all,
    check, failed_roles, all_done, stop_all)."""

    address: str
    config: ClusterConfig
    log_dir: str
    roles: list[_Remote] = field(default_factory=list)
    # A host that has not answered for this long after it was lost is taken as gone for good.
    lost_timeout: float = 120.0

    def __post_init__(self) -> None:
        try:
            import ray
        except ImportError:
            raise ClusterError("--cluster needs Ray: pip install -e \".[cluster]\"") from None
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV_PREFIXES)}
        try:
            ray.init(address=self.address, log_to_driver=False, runtime_env={"env_vars": env})
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ClusterError(f"no Ray cluster at {self.address} ({exc}); start one with `ray start --head`") from None
        self.resources = ray.cluster_resources()
        self._host = ray.remote(RoleHost)

    def actors_for(self, setting: int) -> int:
        return cluster_actors(setting, self.resources)

    def add(self, name: str, target: Callable[..., Any], *args: Any) -> None:
        self.roles.append(_Remote(name, target, args))

    def _log_path(self, role: _Remote) -> str:
        return os.path.join(self.log_dir, f"{role.name}.log")

    def start_all(self) -> None:
        actors = sum(r.name.startswith("actor-") for r in self.roles)
        for role in self.roles:
            options = placement(role.name, self.resources, actors)
            role.handle = self._host.options(name=None, max_restarts=self.config.max_restarts, max_task_retries=0,
                                             **options).remote(role.name, role.target, role.args,
                                                               self._log_path(role), self.config.restart_grace_seconds)
        log.info("cluster %s (%s): %d roles placed by Ray", self.address,
                 ", ".join(f"{k} {v:g}" for k, v in sorted(self.resources.items()) if k in ("CPU", "GPU")),
                 len(self.roles))

    def check(self) -> list[str]:
        """Ask every role how it is; returns messages about what changed (restarts, ends, failures)."""
        import ray

        live = [r for r in self.roles if not (r.done or r.failed)]
        asked = {role.handle.poll.remote(): role for role in live}
        ready, _ = ray.wait(list(asked), num_returns=len(asked), timeout=5.0)
        events = []
        now = time.monotonic()
        for ref in ready:
            role = asked[ref]
            try:
                state, pid = ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                events.extend(self._lost(role, exc, now))
                continue
            if role.pid is not None and pid != role.pid:
                role.restarts += 1
                events.append(f"{role.name} restarted by Ray (restart {role.restarts} of {self.config.max_restarts})")
            role.pid, role.lost_since = pid, None
            if state == "done":
                role.done = True
                events.append(f"{role.name} finished")
            elif state == "fatal":
                role.failed = True
                events.append(f"{role.name} exited with code {FATAL_EXIT_CODE} (fatal: its error would recur); "
                              f"failed for good, not restarted{self._tail(role, 1)}")
        return events

    def _lost(self, role: _Remote, exc: Exception, now: float) -> list[str]:
        first = role.lost_since is None
        role.lost_since = role.lost_since if not first else now
        if role.restarts >= self.config.max_restarts or now - role.lost_since > self.lost_timeout:
            role.failed = True
            return [f"{role.name} failed for good after {role.restarts} restart(s) by Ray "
                    f"({type(exc).__name__}){self._tail(role)}"]
        return [f"{role.name} lost its process ({type(exc).__name__}); Ray restarts it"] if first else []

    def _tail(self, role: _Remote, lines: int = LOG_TAIL_LINES) -> str:
        return log_tail_text(self._log_path(role), lines)

    def failed_roles(self) -> list[str]:
        return [r.name for r in self.roles if r.failed]

    def all_done(self, names: set[str] | None = None) -> bool:
        return all(r.done for r in self.roles if names is None or r.name in names)

    def stop_all(self, timeout: float = 60.0) -> None:
        """SIGTERM every role through its host, wait for them to save their state, then end the hosts."""
        import ray

        stopping = [r.handle.stop.remote(timeout) for r in self.roles if r.handle is not None]
        ready, _ = ray.wait(stopping, num_returns=len(stopping), timeout=timeout + 10)
        if len(ready) < len(stopping):
            log.warning("%d role(s) did not stop in time; ending them", len(stopping) - len(ready))
        for role in self.roles:
            if role.handle is not None:
                ray.kill(role.handle, no_restart=True)
        ray.shutdown()
