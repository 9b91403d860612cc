"""The self-play loop: self-play actors, trainer and gatekeeper in one resumable command.

The command is a supervisor: it writes (or checks) the run's config, starts each role in its own process,
restarts any that crash, prints a status line, and on Ctrl-C stops everything cleanly. The roles run on
this machine (train.loop.supervisor), or with --cluster ADDRESS as Ray actors on a Ray cluster (train.loop.cluster).
Every role keeps its state in the run directory, so after any crash (or a SIGKILL of everything) the same command
resumes:
actors append after their last committed game, the trainer continues from its last saved state with its
optimizer and its count of samples drawn, and the gatekeeper replays an undecided match.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import math
import os
import shutil
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from selfplay.actors.actor import SelfPlayConfig, actors_for_machine, load_ballot, run_actor
from selfplay.actors.reanalyser import ReanalyseConfig, run_reanalyser
from selfplay.replay.replay_buffer import ReplayDamage, ReplayError, ReplayReader, refuse_damaged_store
from train.arena.gating import Gatekeeper, GatingConfig, GatingInterrupted, read_gating_log
from train.arena.ratings import REFERENCE, RatingsTable
from train.learner.learning import TrainingDiverged
from train.learner.trainer import Trainer, TrainerConfig, window_size
from train.loop.cluster import ClusterConfig, ClusterError, RayRoles
from train.loop.supervisor import FATAL_EXIT_CODE, Supervisor, lower_priority
from zero.net.checkpoint import CheckpointError, load_checkpoint, resolve_checkpoint
from zero.run.config import (
    MOST_PROCESSES, ConfigError, atomic_write_bytes, load_config, remove_leftover_temp_files, save_config, setting,
    to_dict, write_run_record,
)
from zero.corpus.openings import BallotError
from zero.run.objectstore import LeaseError
from zero.run.rundir import RunDir, RunDirError
from zero.run.wandb_logging import WandbMissing, import_wandb

log = logging.getLogger("checkers_zero.loop")


# Far below what a machine can start (an actor count of 10^23 was saved in a run's config and hung every
# resume at "resuming ... actor(s)"). The one whole-number setting bounded in `validate`, not by its field:
# its message says what -1 means.
MOST_ACTORS = MOST_PROCESSES


@dataclass
class LoopConfig:
    """Everything a run needs; stored as RUN/loop-config.toml on the first start and reused on resume."""

    # A checkpoint file or another run's directory (its best network); "" = the shipped checkpoint
    # (checkpoints/shipped.pt). Copied into the run on its first start (`loop --from`).
    initial_checkpoint: str = ""
    # With initial_checkpoint a run directory: also take its newest replay window and its trainer state
    # (optimizer and step), so training goes on from that run (train.shipping.lineage; `loop --take-replay`).
    take_replay: bool = False
    # Self-play processes; -1 = sized for the machine (selfplay.actors.actor.actors_for_machine): one per core the
    # trainer and gatekeeper leave (with CUDA all feeding the GPU), and on a CPU-only machine at least two.
    actors: int = -1
    status_seconds: float = setting(15.0, above=0)  # how often the status line is printed (and logged to wandb)
    wandb: bool = False  # log to wandb (offline: no account needed; `wandb sync` uploads later)
    wandb_mode: str = "offline"
    # Where the replay store lives: "" = the run directory; an object-store URL (s3://bucket/prefix,
    # gs://..., az://...; credentials from the environment, zero.run.objectstore) puts it there, for actors on
    # machines that share no filesystem with it. Taken on the first start.
    replay_storage: str = ""
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    reanalyse: ReanalyseConfig = field(default_factory=ReanalyseConfig)
    gating: GatingConfig = field(default_factory=GatingConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)

    def validate(self) -> None:
        """Refuse settings no process could run with, before any process starts."""
        if self.actors < -1:
            raise ValueError("actors must be a number of processes, or -1 (sized for the machine)")
        if self.actors > MOST_ACTORS:
            raise ValueError(f"actors = {self.actors}: at most {MOST_ACTORS:,} processes")
        self.selfplay.validate()
        self.trainer.validate()
        self.reanalyse.validate()
        self.gating.search.validate()
        self.cluster.validate()


# ---------------------------------------------------------------------------------------------- roles

@contextlib.contextmanager
def stops_for_good(role: str, *errors: type[Exception]):
    """A role meeting one of these errors exits with the supervisor's fatal code and one log line: a
    restart would only meet it again (a damaged replay store, a ballot gone missing)."""
    try:
        yield
    except errors as exc:
        log.error("%s cannot go on: %s", role, exc)
        sys.exit(FATAL_EXIT_CODE)


def trainer_role(run_dir: str, cfg: LoopConfig, initial: str) -> None:
    with stops_for_good("trainer", ReplayDamage, TrainingDiverged, CheckpointError):
        _train(run_dir, cfg, initial)


def _train(run_dir: str, cfg: LoopConfig, initial: str) -> None:
    run = RunDir(run_dir)
    if cfg.trainer.expert_data == "auto" and not run.expert_data.exists():
        run.write_status("trainer", {"phase": "building the OCA expert dataset (first start only, ~40 s)"})
    trainer = Trainer(Path(run_dir), cfg.trainer, Path(initial))
    run.write_status("trainer", {"step": trainer.step, "phase": f"waiting for self-play positions (training "
                                                                f"starts at {cfg.trainer.min_positions})"})
    last = [0.0]

    def on_step(step: int, metrics: dict) -> None:
        if time.time() - last[0] > 5:
            last[0] = time.time()
            run.write_status("trainer", {"step": step, "samples_drawn": trainer.samples_drawn, **metrics})

    trainer.run(on_step=on_step)
    run.write_status("trainer", {"step": trainer.step, "samples_drawn": trainer.samples_drawn, "stopped": True})


def gatekeeper_role(run_dir: str, cfg: LoopConfig) -> None:
    import torch

    stop = {"now": False}

    def request_stop(*_):
        stop["now"] = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, request_stop)
    cuda = torch.cuda.is_available()
    lower_priority("gatekeeper", cfg.gating.process_niceness(cuda),
                   "gating.gpu_niceness" if cfg.gating.on_gpu(cuda) else "gating.niceness")
    run = RunDir(run_dir)
    with stops_for_good("gatekeeper", BallotError, FileNotFoundError):  # the ballot went missing mid-run
        keeper = Gatekeeper(run.root, cfg.gating, cfg.selfplay.rules, should_stop=lambda: stop["now"])
    try:
        while not stop["now"]:
            if not keeper.turn():
                keeper.show_phase("waiting for a candidate")
                time.sleep(5)
    except GatingInterrupted:
        log.info("gatekeeper stopped during a match; its finished games are kept and it resumes on restart")


def actor_role(run_dir: str, cfg: LoopConfig, actor_id: int) -> None:
    lower_priority(f"actor {actor_id}", cfg.selfplay.niceness, "selfplay.niceness")
    with stops_for_good(f"actor {actor_id}", ReplayDamage):
        run_actor(run_dir, actor_id, cfg.selfplay)


def reanalyser_role(run_dir: str, cfg: LoopConfig, worker: int) -> None:
    with stops_for_good(f"reanalyser {worker}", ReplayDamage):
        # The trainer's window: what is reanalysed is what it samples.
        run_reanalyser(run_dir, worker, cfg.reanalyse, cfg.selfplay, functools.partial(window_size, cfg.trainer))


def run_initial_checkpoint(run_dir: Path, source: Path) -> Path:
    """The run's own copy of the checkpoint it starts from, made on the first start.

    A run must not change under its feet when the file it was started from is replaced later (a newly
    shipped checkpoint, say): the trainer's fallback, the first best and its ratings all refer to the copy.
    """
    run = RunDir(run_dir)
    copies = run.initial_checkpoints()
    if copies:
        return copies[0]
    load_checkpoint(source)  # refuse a bad file before the run directory is touched
    copy = run.initial_checkpoint(source.stem)
    atomic_write_bytes(copy, source.read_bytes())
    return copy


# --------------------------------------------------------------------------------------------- status

def status_snapshot(run: Path) -> dict:
    """What the status line shows, read from the run directory alone."""
    layout = RunDir(run)
    try:
        reader = ReplayReader(run)
        snap: dict = {"games": reader.total_games(), "positions": reader.total_positions()}
    except ReplayError as exc:  # the role that meets it stops the run with the message; the line goes on
        snap = {"games": "?", "positions": "?", "replay_error": str(exc)}
    for role in ("trainer", "gatekeeper"):
        role_status = layout.read_status(role)
        if role_status is not None:
            snap[role] = role_status
    best = layout.read_best()
    if best:
        snap["best"] = best.name
        snap["best_step"] = best.step
    gates = [g for g in read_gating_log(run) if g["decision"] != "skipped"]
    if gates:
        snap["promotions"] = sum(1 for g in gates if g["decision"] == "promote")
    if layout.ratings.exists() and best:
        ratings = RatingsTable.load(layout.ratings).fit()
        # A best not yet tied to the anchor (its games so far only against the networks it gated, before the
        # calibration ladder) has no finite rating: "nan Elo" was printed.
        if best.name in ratings and math.isfinite(ratings[best.name].elo):
            rating = ratings[best.name]
            snap["best_elo"] = rating.elo
            if REFERENCE in ratings and math.isfinite(rating.ci95_ref):
                # The interval against the anchor is mostly the anchor's; the one against the reference
                # yardstick says how well the network's strength is known.
                snap["best_vs_reference"] = rating.elo - ratings[REFERENCE].elo
                snap["best_vs_reference_ci95"] = rating.ci95_ref
    return snap


class StatusRates:
    """Games an hour and trainer steps a second for the status line, measured over the last `window` seconds
    of this session, once they span `least` seconds (actors commit games in batches: a shorter span is noise)."""

    def __init__(self, window: float = 600.0, least: float = 60.0):
        self.window, self.least = window, least
        self.samples: deque[tuple[float, int, int | None]] = deque()  # (time, games, trainer step or None)

    def update(self, snap: dict, now: float) -> dict:
        """The rates at `now` from this status snapshot: games_per_hour, steps_per_second (each once known)."""
        games = snap.get("games")
        if not isinstance(games, int):  # the replay store could not be read this time
            return {}
        trainer = snap.get("trainer") or {}
        self.samples.append((now, games, trainer.get("step") if "loss" in trainer else None))
        while len(self.samples) > 1 and now - self.samples[1][0] >= self.window:
            self.samples.popleft()
        rates = {}
        start, first_games, _ = self.samples[0]
        if now - start >= self.least:
            rates["games_per_hour"] = max(0, games - first_games) * 3600 / (now - start)
        steps = [(t, step) for t, _, step in self.samples if step is not None]
        if steps and steps[-1][0] == now and now - steps[0][0] >= self.least:
            rates["steps_per_second"] = max(0, steps[-1][1] - steps[0][1]) / (now - steps[0][0])
        return rates


def _rate(value: float) -> str:
    return f"{value:.2f}" if value < 1 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def run_minutes(run: Path) -> float:
    """Minutes the loop has run on this run directory in earlier sessions (0 for a new run)."""
    return float((RunDir(run).read_status("loop") or {}).get("minutes", 0.0))


def record_run_minutes(run: Path, before: float, started: float) -> float:
    """Record the run's minutes so far (earlier sessions' and this one's) and return them, in seconds."""
    minutes = before + (time.time() - started) / 60
    RunDir(run).write_status("loop", {"minutes": round(minutes, 2)})
    return minutes * 60


def format_status(snap: dict, elapsed: float) -> str:
    """The loop's status, `elapsed` seconds into the run (earlier sessions counted), in lines of about 120
    characters: self-play and training; the best network; the match the gatekeeper is playing, with a gate's
    SPRT against its bounds (a decided gate has a log line of its own)."""
    clock = f"[{elapsed / 60:.1f} min]"
    per_hour = f" ({snap['games_per_hour']:.0f}/h)" if "games_per_hour" in snap else ""
    progress = [f"{clock} games {snap['games']}{per_hour}", f"positions {snap['positions']}"]
    if snap["games"] == 0 and snap.get("local_actors") == 0:
        progress[0] = f"{clock} games 0 (--actors 0: waiting for `checkers-zero selfplay --first-actor N` elsewhere)"
    elif snap["games"] == 0:
        progress[0] = f"{clock} games 0 (the first games are being played)"
    tr = snap.get("trainer")
    if tr:
        if "loss" in tr:
            per_second = f" ({_rate(snap['steps_per_second'])}/s)" if "steps_per_second" in snap else ""
            progress.append(f"step {tr['step']}{per_second} loss {tr['loss']:.3f}")
            if tr.get("reanalysed_share"):
                progress.append(f"reanalysed {tr['reanalysed_share']:.0%} of a batch")
        elif "phase" in tr:
            progress.append(f"trainer: {tr['phase']}")
    if "replay_error" in snap:
        progress.append(f"replay store: {snap['replay_error']}")
    lines = [" | ".join(progress)]
    if "best" in snap:
        elo = " (not rated yet)"
        if "best_elo" in snap:
            vs = (f", {snap['best_vs_reference']:+.0f}±{snap['best_vs_reference_ci95']:.0f} vs {REFERENCE}"
                  if "best_vs_reference" in snap else "")
            elo = f" ({snap['best_elo']:.0f} Elo{vs})"
        promotions = f" | promotions {snap['promotions']}" if "promotions" in snap else ""
        lines.append(f"{clock} best {snap['best']}{elo}{promotions}")
    keeper = snap.get("gatekeeper")
    if keeper and "match" in keeper and keeper["games"] < keeper["of"]:
        kind, _, players = keeper["match"].partition("-")  # gate-A-vs-B, calibration-A-vs-B, rating-A-vs-B
        match = f"{kind} {players.replace('-vs-', ' vs ')}"
        line = (f"{clock} {match}: game {keeper['games']}/{keeper['of']} "
                f"+{keeper['wins']}={keeper['draws']}-{keeper['losses']}")
        # A status written before a resume by an older gatekeeper has no pair counts.
        pairs, needed = keeper.get("pairs"), keeper.get("min_pairs", 0)
        if "llr" in keeper and pairs is not None and pairs < needed:
            line += f", pairs counted {pairs} of the {needed} the SPRT needs"
            if "next_pair_games" in keeper:
                # "pairs counted 0 of the 10" at game 38 read as broken: say what the count waits for.
                line += (f"\n{clock}   a pair counts once both its games and all earlier pairs are done: pair "
                         f"{pairs + 1} has {keeper['next_pair_games']} of 2, {keeper['games_waiting']} later "
                         f"games wait")
                if "last_pair_to_start" in keeper:
                    # Else the game count standing still while a game goes on reads as a stalled gate.
                    line += (f"\n{clock}   no game starts past pair {keeper['last_pair_to_start']} until pair "
                             f"{pairs + 1} is done (gating.pairs_ahead), so that its games go faster")
        elif "llr" in keeper:
            low, high = keeper["llr_bounds"]
            line += f", LLR {keeper['llr']:.2f} in ({low:.2f}, {high:.2f})" + (f", {pairs} pairs" if pairs else "")
        lines.append(line)
    elif keeper and "phase" in keeper:
        lines.append(f"{clock} gatekeeper: {keeper['phase']}")
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------- command

# Settings a run takes once, on its first start; a resumed run cannot honour a change to them.
# initial_checkpoint: the run copied it then, and its trainer, first best and ratings refer to the copy.
# take_replay: the copies are made then. replay_storage: the store holds the run's games there.
FIXED_AT_FIRST_START = ("initial_checkpoint", "take_replay", "replay_storage")


def resolve_config(run: Path, config_file: str | None, overrides: list[str]) -> LoopConfig:
    """A new run takes defaults + file + overrides; a resumed run takes its stored config (+ overrides), and
    a file or override that changes a setting it cannot honour any more is refused."""
    stored = RunDir(run).config_file
    cfg = load_config(LoopConfig, stored if stored.exists() and config_file is None else config_file, overrides)
    try:
        cfg.validate()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if stored.exists():
        first = load_config(LoopConfig, stored)
        for name in FIXED_AT_FIRST_START:
            if getattr(cfg, name) != getattr(first, name):
                raise ConfigError(f"{name}: {run} started with {getattr(first, name)!r} (see {stored}), and a "
                                  f"resumed run cannot change it to {getattr(cfg, name)!r}; start a new run "
                                  f"directory for that (--run NEW_DIR)")
    return cfg


def continuation_overrides(args: argparse.Namespace) -> list[str]:
    """`--from SOURCE` and `--take-replay` as the settings they stand for."""
    overrides = []
    if args.source is not None:
        overrides.append(f"initial_checkpoint={json.dumps(args.source)}")  # a JSON string is a TOML string
    if args.take_replay:
        overrides.append("take_replay=true")
    return overrides


def continue_source_run(run_dir: Path, cfg: LoopConfig) -> bool:
    """On a run's first start with take_replay: its copies of the source run's replay window and trainer
    state (train.shipping.lineage); False, with the reason printed, when the source cannot be continued."""
    from selfplay.replay.replay_buffer import ReplayError
    from train.shipping.lineage import LineageError, continue_run

    try:
        record = continue_run(run_dir, Path(cfg.initial_checkpoint), cfg.trainer)
    except (LineageError, ReplayError, CheckpointError) as exc:
        print(f"error: --take-replay: {exc}", file=sys.stderr)
        return False
    log.info("took %d games (%d positions) and the trainer state at step %d from %s", record["copied"]["games"],
             record["copied"]["positions"], record["trainer_state"]["step"], record["source"])
    return True


def first_missing_folder(path: Path) -> Path | None:
    """The outermost folder of `path` (itself included) that does not exist yet; None when it exists."""
    missing = None
    while not path.exists() and path != path.parent:
        missing, path = path, path.parent
    return missing


def run_loop(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    # Absolute: roles on a cluster start in folders of Ray's.
    run_dir = Path(args.run).resolve()
    run = RunDir(run_dir)
    overrides = list(args.overrides)
    if args.actors is not None:
        overrides.append(f"actors={args.actors}")
    if args.wandb:
        overrides.append("wandb=true")
    overrides += continuation_overrides(args)
    try:
        cfg = resolve_config(run_dir, args.config, overrides)
        wandb = import_wandb() if cfg.wandb else None
        # What every process of the run needs from the data folder, checked before any of them starts.
        load_ballot(cfg.selfplay.openings)
        load_ballot(cfg.gating.openings)
    except (ConfigError, WandbMissing, BallotError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    made = first_missing_folder(run_dir)  # the folders this start makes for the run, if any
    there = set(os.listdir(run_dir)) if made is None and run_dir.is_dir() else set()  # what it finds in the run
    try:
        # Before anything of the run is touched: a second loop on it would train, gate and rate twice.
        lock = run.take_loop_lock()
    except RunDirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def refuse(message: str | None) -> int:
        """Refuse the start (`message` None: said already), leaving nothing of it behind: a run folder
        holding loop.lock, or the copy of a first checkpoint, reads as a run that started."""
        if message is not None:
            print(f"error: {message}", file=sys.stderr)
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        else:
            for name in set(os.listdir(run_dir)) - there:
                path = run_dir / name
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        lock.close()
        return 2

    resumed = run.config_file.exists()
    # Nothing of the run is running now (the lock says so): temporary files are leftovers of a killed one.
    for leftover in remove_leftover_temp_files(run.root):
        log.info("removed %s, left by an interrupted write", leftover)
    if cfg.take_replay and not resumed and not continue_source_run(run_dir, cfg):
        return refuse(None)
    try:
        initial = run_initial_checkpoint(run_dir, resolve_checkpoint(cfg.initial_checkpoint))
        run.set_replay_storage(cfg.replay_storage)
    except CheckpointError as exc:
        return refuse(f"initial checkpoint: {exc}")
    except RunDirError as exc:
        return refuse(str(exc))
    try:
        # Before any role writes to the store or trains on it: they read only their own part of it.
        refuse_damaged_store(run_dir)
    except (ReplayError, LeaseError) as exc:  # LeaseError: an object store it cannot reach
        return refuse(str(exc))
    if run.read_best() is None:
        # Before any promotion the run's best is its starting checkpoint; actors read this file.
        run.write_best(initial, load_checkpoint(initial).step, "initial checkpoint of the run")
    run.logs.mkdir(exist_ok=True)
    save_config(cfg, run.config_file)
    write_run_record(run.logs, cfg, {"selfplay": cfg.selfplay.seed, "trainer": cfg.trainer.seed,
                                             "gating": cfg.gating.seed}, name=f"loop-{int(time.time())}")
    if args.cluster:
        try:
            sup = RayRoles(args.cluster, cfg.cluster, str(run.logs))
        except ClusterError as exc:
            return refuse(str(exc))
        actors = sup.actors_for(cfg.actors)
    else:
        import torch

        sup = Supervisor(log_dir=str(run.logs))
        actors = actors_for_machine(cfg.actors, torch.cuda.is_available(), os.cpu_count() or 1)
    if cfg.actors < 0:  # sized for the machine: reanalysers take the place of actors
        actors = max(1, actors - cfg.reanalyse.workers)
    minutes_before = run_minutes(run_dir)
    where = f" on the Ray cluster at {args.cluster}" if args.cluster else ""
    if cfg.reanalyse.workers:
        where = f" and {cfg.reanalyse.workers} reanalyser(s)" + where
    if resumed:
        # What goes on, not a restart: the trainer's step, the best network and the run's clock.
        trainer = RunDir(run_dir).read_status("trainer") or {}
        best = RunDir(run_dir).read_best()
        log.info("resuming run %s after %.1f minutes: the trainer goes on from step %s, the best network is %s "
                 "(the run started from %s); %d actor(s)%s", run_dir, minutes_before, trainer.get("step", 0),
                 best.name if best else initial.stem, initial.name, actors, where)
    else:
        log.info(starting_line(run_dir, initial, load_checkpoint(initial).step, actors, where))

    for a in range(actors):
        sup.add(f"actor-{a}", actor_role, str(run_dir), cfg, a)
    for w in range(cfg.reanalyse.workers):
        sup.add(f"reanalyser-{w}", reanalyser_role, str(run_dir), cfg, w)
    sup.add("trainer", trainer_role, str(run_dir), cfg, str(initial))
    sup.add("gatekeeper", gatekeeper_role, str(run_dir), cfg)

    wb = None
    if wandb is not None:
        wb = wandb.init(project="checkers-zero", dir=str(run_dir), mode=cfg.wandb_mode, config=to_dict(cfg),
                        name=run_dir.name, id=run_dir.name.replace("/", "-"), resume="allow")

    stop = {"now": False}

    def request_stop(*_):
        stop["now"] = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    started = time.time()
    sup.start_all()
    last_status = 0.0
    rates = StatusRates()
    decisions_shown = len(read_gating_log(run_dir))
    exit_code = 0
    try:
        while not stop["now"]:
            for event in sup.check():
                log.info(event)
            decisions_shown = show_new_decisions(run_dir, decisions_shown)
            failed = sup.failed_roles()
            if failed:
                # An error that recurs (a full disk, missing data, a setting no process can run with) must
                # stop the run with its message, not restart it forever.
                log.error("stopping: %s failed for good and will not be restarted (the reason is above)",
                          ", ".join(failed))
                exit_code = 1
                break
            if sup.all_done({r.name for r in sup.roles if r.name.startswith("actor-")}) and actors:
                log.info("all actors finished their games")
                break
            if args.minutes is not None and time.time() - started > args.minutes * 60:
                log.info("time limit reached")
                break
            if time.time() - last_status >= cfg.status_seconds:
                last_status = time.time()
                snap = status_snapshot(run_dir) | {"local_actors": actors}
                snap |= rates.update(snap, time.time())
                for line in format_status(snap, record_run_minutes(run_dir, minutes_before, started)).splitlines():
                    log.info(line)
                if wb is not None:
                    wb.log(_flat_status(snap), step=int(snap.get("trainer", {}).get("step", 0)))
            time.sleep(1.0)
    finally:
        log.info("stopping: waiting for every process to save its state")
        sup.stop_all()
        show_new_decisions(run_dir, decisions_shown)
        snap = status_snapshot(run_dir) | {"local_actors": actors}
        snap |= rates.update(snap, time.time())
        for line in format_status(snap, record_run_minutes(run_dir, minutes_before, started)).splitlines():
            log.info(line)
        if wb is not None:
            wb.finish()
        lock.close()
    return exit_code


def starting_line(run_dir: Path, initial: Path, step: int, actors: int, where: str) -> str:
    """The console's first line of a fresh run. It says why the trainer's count starts where it does: its
    steps go on from the starting network's (a ratings plot over steps puts the network and its descendants
    on one axis), and a fresh run whose status said step 99,930 read as a run that had trained already."""
    steps = (f"; the trainer's steps count on from the {step:,} that network was trained for" if step else "")
    return f"starting run {run_dir} from {initial} with {actors} actor(s){where}{steps}"


def show_new_decisions(run: Path, shown: int) -> int:
    """Log the gating decisions after the first `shown` ones and return how many there are: the gatekeeper's
    own log is a file, and a decision is what a user of the loop waits for."""
    decisions = read_gating_log(run)
    for line in Gatekeeper.decision_lines(decisions[shown:]):
        log.info(line)
    return len(decisions)


def _flat_status(snap: dict) -> dict:
    out = {k: v for k, v in snap.items() if isinstance(v, (int, float))}
    for k, v in snap.get("trainer", {}).items():
        if isinstance(v, (int, float)):
            out[f"trainer/{k}"] = v
    return out
