"""The layout of a run directory: every path name a run uses, its best-network pointer and status files.

Actors, trainer, gatekeeper and the loop share nothing but a run directory, so this module is the one
place that says where each of them finds what it needs (as minigo's fsdb does):

    RUN/
      loop-config.toml        the resolved settings, reused on resume
      logs/                   one log per process, and a record (config, code version, seeds) per start
      replay.zarr/            the replay store (selfplay.replay.replay_buffer)
      replay-locks/           one lock file per actor id, held by the live writer of that actor
      replay-storage.url      present when the replay store and its locks live on an object store
                              instead (zero.run.objectstore): the URL they live under, as
                              URL/replay.zarr and URL/replay-locks/actor-N.lock (a lease, not an flock)
      expert-oca/             the OCA expert dataset the trainer mixes in, built on first use
      checkpoints/            initial-NAME.pt (the run's copy of its start), candidate-NNNNNNN.pt,
                              trainer-state.pt, best.json (the current best network)
      matches/                every gating, rating and calibration match as PDN; NAME.games.jsonl holds
                              the finished games of a match in progress, so a stop loses only games in flight
      gating.jsonl            one line per gating decision
      ratings.json            all results behind the Elo table; ratings.png is drawn from it
      status/                 each role's latest figures (ROLE.json), for the status line
      report/                 `checkers-zero report`: its fixed self-play positions, the calibration plot
      loop.lock               names the loop that owns the run (its process id and host; the lock is an
                              flock on the run directory itself, which no file operation in it can undo)
      continued-from.json     a run started with `loop --from RUN --take-replay`: what it took from that run
      run-id                  a random name the run gets with its first trainer state, recorded in every
                              network it writes: a directory found later at a network's recorded path is
                              its run only if the names match (runs on other machines share paths)

A run directory is accepted wherever a checkpoint is expected (`zero.net.checkpoint.resolve_checkpoint`), and
then means its current best network.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from zero.run.config import atomic_write_bytes, naming_write_errors
from zero.run.objectstore import Lease, LeaseError, ObjectPath, is_object_store_url

CONFIG_FILE = "loop-config.toml"
# The distilled player's loop (train.loop.distilled_loop) keeps its own config: a run is one loop's or the other's.
DISTILLED_CONFIG_FILE = "distilled-loop-config.toml"
REPLAY_STORAGE_FILE = "replay-storage.url"
RUN_ID_FILE = "run-id"
CANDIDATE_PREFIX = "candidate-"
REPLAY_STORE = "replay.zarr"


@dataclass(frozen=True)
class BestRecord:
    """The current best network of a run, as `checkpoints/best.json` names it."""

    path: Path  # absolute
    name: str
    step: int
    promoted: str = ""
    reason: str = ""


class RunDirError(ValueError):
    """A run directory, or one of its records, that cannot be used; the message names the file."""


@dataclass(frozen=True)
class RunDir:
    """Paths of one run directory (nothing is created until something is written)."""

    root: Path

    def __init__(self, root: str | Path) -> None:
        object.__setattr__(self, "root", Path(root))

    # -- paths -------------------------------------------------------------------------------------------
    @property
    def config_file(self) -> Path:
        return self.root / CONFIG_FILE

    @property
    def loop_lock_file(self) -> Path:
        return self.root / "loop.lock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def replay_storage_file(self) -> Path:
        return self.root / REPLAY_STORAGE_FILE

    @property
    def replay_storage(self) -> Path | ObjectPath:
        """Where the replay store and its writer locks live: the run directory, or the object-store URL
        the run was started with."""
        try:
            url = self.replay_storage_file.read_text().strip()
        except FileNotFoundError:
            return self.root
        return ObjectPath(url)

    def set_replay_storage(self, url: str) -> None:
        """Put the run's replay store under an object-store URL ("" = the run directory); once only, before
        anything is written there."""
        if not url:
            return
        if not is_object_store_url(url):
            raise RunDirError(f"replay storage {url!r} is not an object-store URL (s3://, gs://, az://, memory://)")
        if self.replay_storage_file.exists():
            if self.replay_storage_file.read_text().strip() != url:
                raise RunDirError(f"{self.replay_storage_file}: the run keeps its replay store at "
                                  f"{self.replay_storage_file.read_text().strip()}, not {url}")
            return
        atomic_write_bytes(self.replay_storage_file, url.encode())

    @property
    def replay_store(self) -> Path | ObjectPath:
        return self.replay_storage / REPLAY_STORE

    @property
    def replay_locks(self) -> Path | ObjectPath:
        return self.replay_storage / "replay-locks"

    def replay_lock(self, actor_id: int) -> Path | ObjectPath:
        return self.replay_locks / f"actor-{actor_id}.lock"

    def take_replay_lock(self, actor_id: int) -> "FileLock | Lease":
        """Make this process the one writer of replay actor `actor_id` (RunDirError when another one is);
        an flock in the run directory, a lease on an object store. `close()` the lock to let go."""
        return self._take_writer_lock(self.replay_lock(actor_id), f"replay actor {actor_id}")

    def reanalysis_lock(self, worker: int) -> Path | ObjectPath:
        return self.replay_locks / f"reanalyser-{worker}.lock"

    def take_reanalysis_lock(self, worker: int) -> "FileLock | Lease":
        """Make this process the one writer of reanalyser `worker`'s targets, as take_replay_lock."""
        return self._take_writer_lock(self.reanalysis_lock(worker), f"reanalyser {worker}")

    def _take_writer_lock(self, path: Path | ObjectPath, what: str) -> "FileLock | Lease":
        if isinstance(path, ObjectPath):
            try:
                return Lease(path).acquire()
            except LeaseError as exc:
                raise RunDirError(f"another process is writing {what} ({exc})") from None
        return take_file_lock(path, f"another process is writing {what} in {self.root}")

    @property
    def expert_data(self) -> Path:
        return self.root / "expert-oca"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def trainer_state(self) -> Path:
        return self.checkpoints / "trainer-state.pt"

    @property
    def best_file(self) -> Path:
        return self.checkpoints / "best.json"

    @property
    def distilled_config_file(self) -> Path:
        return self.root / DISTILLED_CONFIG_FILE

    def evaluation_candidate(self, cycle: int) -> Path:
        """The distilled evaluation that cycle `cycle` of the distilled loop trains (and gates)."""
        return self.checkpoints / f"{CANDIDATE_PREFIX}{cycle:04d}.npz"

    def initial_evaluation(self) -> Path:
        """The run's copy of the distilled evaluation it started from: its generation 0."""
        return self.checkpoints / "initial-distilled.npz"

    def candidate(self, step: int) -> Path:
        return self.checkpoints / f"{CANDIDATE_PREFIX}{step:07d}.pt"

    def candidates(self) -> list[tuple[int, Path]]:
        """(step, absolute path) of every candidate checkpoint, oldest first."""
        found = []
        for path in self.checkpoints.resolve().glob(f"{CANDIDATE_PREFIX}*.pt"):
            step = path.stem[len(CANDIDATE_PREFIX):]
            if step.isdigit():
                found.append((int(step), path))
        return sorted(found)

    def initial_checkpoint(self, source_name: str) -> Path:
        """Where the run keeps its own copy of the checkpoint it started from. A source that is itself a run's
        start keeps its name: a run continuing a run continuing the shipped network starts from
        `initial-shipped.pt`, not `initial-initial-shipped.pt`."""
        return self.checkpoints / f"initial-{source_name.removeprefix('initial-')}.pt"

    def initial_checkpoints(self) -> list[Path]:
        return sorted(self.checkpoints.glob("initial-*.pt"))

    @property
    def continuation_file(self) -> Path:
        """What a run took from the run it continues (train.shipping.lineage), written once its copies are made."""
        return self.root / "continued-from.json"

    @property
    def matches(self) -> Path:
        return self.root / "matches"

    def match_pdn(self, name: str) -> Path:
        return self.matches / f"{name.replace(':', '')}.pdn"

    def match_journal(self, name: str) -> Path:
        """The finished games of a match still being played (one JSON line each), kept until it is decided."""
        return self.matches / f"{name.replace(':', '')}.games.jsonl"

    @property
    def report_positions(self) -> Path:
        """The fixed self-play positions `checkers-zero report` scores every checkpoint on."""
        return self.root / "report" / "selfplay-positions.npz"

    @property
    def report_plot(self) -> Path:
        return self.root / "report" / "calibration.png"

    @property
    def gating_log(self) -> Path:
        return self.root / "gating.jsonl"

    @property
    def ratings(self) -> Path:
        return self.root / "ratings.json"

    @property
    def ratings_plot(self) -> Path:
        return self.root / "ratings.png"

    @property
    def status(self) -> Path:
        return self.root / "status"

    def status_file(self, role: str) -> Path:
        return self.status / f"{role}.json"

    # -- what a run directory is -------------------------------------------------------------------------
    def is_run(self) -> bool:
        """Whether this looks like a run directory (a loop or self-play has used it)."""
        return self.root.is_dir() and (self.config_file.exists() or self.best_file.exists()
                                       or self.replay_storage_file.exists() or self.replay_store.exists())

    def identity(self) -> str:
        """The run's random name, made on first use: written whole to a file of its own and linked into
        place, so that a crash never leaves an empty name and a race between two writers keeps the first."""
        name = self._recorded_identity()
        if name is None:
            self.root.mkdir(parents=True, exist_ok=True)
            written = self.root / f"{RUN_ID_FILE}.{os.getpid()}.tmp"
            try:
                with naming_write_errors(self.root / RUN_ID_FILE):
                    written.write_text(uuid.uuid4().hex)
                    os.link(written, self.root / RUN_ID_FILE)
            except FileExistsError:
                pass
            finally:
                written.unlink(missing_ok=True)
            name = self._recorded_identity()
        return name

    def _recorded_identity(self) -> str | None:
        try:
            return (self.root / RUN_ID_FILE).read_text().strip()
        except FileNotFoundError:
            return None

    def network_provenance(self, **more) -> dict:
        """What a network the run writes records of it (zero.net.checkpoint's provenance)."""
        return {"run": str(self.root), "run_id": self.identity(), "source": "self-play", **more}

    def made(self, provenance: dict) -> bool:
        """Whether this directory is the run that wrote a network of this provenance: the recorded path's
        directory, with the recorded name (a network from before run names is taken at its path)."""
        if not self.is_run():
            return False
        recorded = provenance.get("run_id")
        return recorded is None or recorded == self._recorded_identity()

    # -- the best network --------------------------------------------------------------------------------
    def read_best(self) -> BestRecord | None:
        """The current best network, or None before the run has one. A relative path in the record is
        relative to the run directory."""
        path = self.best_file
        if not path.exists():
            return None
        try:
            record = json.loads(path.read_text())
            target = Path(record["path"])
            if not target.is_absolute():
                target = self.root / target
            return BestRecord(target.resolve(), str(record.get("name", target.stem)), int(record.get("step", 0)),
                              str(record.get("promoted", "")), str(record.get("reason", "")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RunDirError(f"{path}: unreadable best-network record ({exc})") from exc

    def write_best(self, checkpoint: Path, step: int, reason: str) -> BestRecord:
        """Point the run's best network at `checkpoint` (one atomic replacement of best.json)."""
        record = BestRecord(Path(checkpoint).resolve(), Path(checkpoint).stem, int(step),
                            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), reason)
        data = {"path": str(record.path), "name": record.name, "step": record.step, "promoted": record.promoted,
                "reason": record.reason}
        atomic_write_bytes(self.best_file, json.dumps(data, indent=1).encode())
        return record

    # -- status files ------------------------------------------------------------------------------------
    def write_status(self, role: str, data: dict) -> None:
        atomic_write_bytes(self.status_file(role), json.dumps(data).encode())

    def read_status(self, role: str) -> dict | None:
        """A role's latest status, or None when it has written none (or it cannot be read right now)."""
        try:
            return json.loads(self.status_file(role).read_text())
        except (OSError, ValueError):
            return None

    # -- ownership ---------------------------------------------------------------------------------------
    def take_loop_lock(self) -> "FileLock":
        """Make this process the one loop of the run; keep the returned lock until it stops (`close()`).

        The lock is an flock on the run directory itself, not on a file in it: a file can be deleted or
        replaced while its lock is held, and a second loop would then lock the new file and run beside the
        first. The kernel drops an flock when its holder dies (kill -9 included), so a lock left by a dead
        loop never blocks a resume. loop.lock only names the holder, for the RunDirError that refuses a
        second loop."""
        if self.root.exists() and not self.root.is_dir():
            raise RunDirError(f"{self.root} is a file, not a run directory")
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            try:
                holder = self.loop_lock_file.read_text().strip()
            except OSError:
                holder = ""
            holder = holder or "a process that has not written its name yet"
            raise RunDirError(f"{self.root} is in use by another loop ({holder}); stop it first, or use another "
                              f"--run directory") from None
        try:
            with naming_write_errors(self.loop_lock_file):
                self.loop_lock_file.write_text(f"process {os.getpid()} on host {socket.gethostname()}, "
                                               f"started {time.strftime('%Y-%m-%d %H:%M:%S')}")
        except BaseException:
            # The caller never gets the lock to close: kept open, it would refuse this process's own retry.
            os.close(fd)
            raise
        return FileLock(fd)


def take_file_lock(path: Path, busy: str) -> "FileLock":
    """An exclusive flock on `path` (created with its folder if absent) for the one writer of something;
    RunDirError(busy) when another process holds it. `close()` the lock to let go."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        # The kernel drops the lock when the holder dies (SIGKILL included): a restart never waits on it.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunDirError(busy) from None
    return FileLock(fd)


class FileLock:
    """An flock held through an open file descriptor: the kernel keeps it until the holder closes it or
    dies, so it cannot be lost while held (check() never raises; generation 0 says there is no lease to
    fence)."""

    generation = 0

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def check(self) -> None:
        pass

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
