"""A reanalyser: searches stored self-play positions again with the newest network (reanalyse).

`run_reanalyser(run_dir, worker, config, selfplay, window)` is the whole process (the loop starts
`reanalyse.workers` of them beside the actors). Over and over it draws a committed game from the training
window (uniformly among the games holding its newest `window(committed)` positions), replays the game from
its PDN, and searches each of its positions that had a choice (forced moves have no policy target) with
`simulations` simulations and no noise, `games_in_flight` positions at once in one batched search. Each
search's visit shares and root value are appended to the store as that position's fresh target
(selfplay.reanalysis_store), which the trainer lays over the position's row.

The network is the trainer's newest candidate (the run's best before the first one), looked for every
`network_poll_seconds`: a newer one is loaded once the searches in flight have finished, so every entry
names the one network that made it. A stop signal (SIGINT, SIGUSR1, SIGTERM) commits the finished entries
and ends the process; the searches in flight are dropped (they are drawn afresh on the next start).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from selfplay.actor import MAX_GAMES_IN_FLIGHT, CheckpointInfo, SelfPlayConfig, StopRequest, current_best
from selfplay.reanalysis_store import ReanalysisWriter
from selfplay.replay_buffer import ReplayReader
from selfplay.search import BatchedSearch, visit_policy
from zero.config import check_settings, setting
from zero.game import Game, Position
from zero.pdn import PdnError, read_pdn_text
from zero.rundir import RunDir

log = logging.getLogger(__name__)


@dataclass
class ReanalyseConfig:
    """Reanalyse (`[reanalyse]` in the loop's config). The search settings, rules, device and precision are
    self-play's (`[selfplay]`)."""

    # Reanalysers the loop runs beside the actors; on a machine sized automatically (actors = -1) they take
    # the place of as many actors. 0: none.
    workers: int = setting(0, low=0)
    simulations: int = setting(200, low=1)  # per position reanalysed
    games_in_flight: int = setting(64, low=1, high=MAX_GAMES_IN_FLIGHT)  # positions searched at once, CPU
    gpu_games_in_flight: int = setting(512, low=1, high=MAX_GAMES_IN_FLIGHT)  # ... and on CUDA
    # Loading a network is not free (the int8 model of a new checkpoint is derived on the CPU): a newer
    # candidate is looked for this often.
    network_poll_seconds: float = setting(60.0, low=0)
    commit_targets: int = setting(1024, low=1)  # entries queued before a commit
    seed: int = setting(0, low=0)  # the games drawn derive from it, the worker id and its entries so far

    def validate(self) -> None:
        check_settings(self, "reanalyse")


@dataclass
class ReanalyseStats:
    worker: int
    games: int = 0  # stored games drawn
    positions: int = 0  # positions reanalysed (entries committed or queued)
    network: str = ""
    elapsed: float = 0.0


@dataclass
class _Root:
    actor_id: int
    row: int
    game: Game  # the stored game up to this position


def newest_network(run_dir: Path) -> CheckpointInfo:
    """The trainer's newest candidate, or the run's best before there is one."""
    candidates = RunDir(run_dir).candidates()
    if candidates:
        step, path = candidates[-1]
        return CheckpointInfo(path, path.stem, step)
    return current_best(run_dir)


def game_roots(actor_id: int, first_row: int, pdn: str, rows: dict[str, np.ndarray], rules) -> list[_Root]:
    """The positions of a stored game that had a choice, each with the game up to it (its history is what
    repetitions and the no-progress count are judged by). [] when the PDN does not replay to the rows."""
    parsed = next(read_pdn_text(pdn), None)
    if parsed is None or isinstance(parsed, PdnError) or len(parsed.moves) < len(rows["ply"]):
        return []
    game = Game(parsed.start, rules=rules)
    roots = []
    for k, move in enumerate(parsed.moves[:len(rows["ply"])]):
        stored = Position(int(rows["black"][k]), int(rows["white"][k]), int(rows["kings"][k]),
                          bool(rows["black_to_move"][k]))
        if stored != game.position:
            return []
        if not rows["forced"][k]:
            roots.append(_Root(actor_id, first_row + k, game.prefix(game.ply)))
        game.play(move)
    return roots


class Reanalyser:
    """One reanalysis process; see the module docstring. `positions` stops it after that many entries
    (None: until a stop signal); `load_evaluator(checkpoint_info)` builds the network evaluator."""

    def __init__(self, run_dir: str | Path, worker: int, config: ReanalyseConfig, selfplay: SelfPlayConfig,
                 window: Callable[[int], int], positions: int | None = None,
                 load_evaluator: Callable[[CheckpointInfo], object] | None = None):
        config.validate()
        selfplay.validate()
        import torch

        cuda = torch.cuda.is_available()
        self.selfplay = selfplay.sized_for(cuda)
        self.in_flight = config.gpu_games_in_flight if self.selfplay.device == "cuda" else config.games_in_flight
        self.run_dir = Path(run_dir)
        self.worker = worker
        self.config = config
        self.window = window
        self.limit = positions
        self.load_evaluator = load_evaluator or self._load_network
        self.rng: np.random.Generator | None = None  # seeded in run(), once the entries made so far are known
        self.stats = ReanalyseStats(worker)
        self.stop = StopRequest()

    def _load_network(self, info: CheckpointInfo):
        import torch

        from zero.inference import Evaluator

        torch.set_num_threads(self.selfplay.torch_threads)
        return Evaluator.from_checkpoint(info.path, device=self.selfplay.device, precision=self.selfplay.precision)

    def _load(self, network: CheckpointInfo):
        """`network`'s evaluator, or None when it cannot be loaded: a candidate can be removed by the
        gatekeeper between being listed and being read."""
        from zero.checkpoint import CheckpointError

        try:
            return self.load_evaluator(network)
        except (CheckpointError, OSError, ValueError, KeyError) as exc:
            log.warning("reanalyser %d: cannot load %s (%s)", self.worker, network.path, exc)
            return None

    def _draw_game(self, reader: ReplayReader) -> list[_Root]:
        """The positions to reanalyse of one game drawn from the window ([] when none is committed yet)."""
        reader.refresh()
        actors, firsts = reader.window_games(self.window(reader.positions_committed()))
        if not len(actors):
            return []
        k = int(self.rng.integers(len(actors)))
        stored = reader.stored_game(int(actors[k]), int(firsts[k]))
        self.stats.games += 1
        roots = game_roots(stored.actor_id, stored.first_row, stored.pdn, stored.rows, self.selfplay.rules)
        if not roots and not stored.rows["forced"].all():
            log.warning("reanalyser %d: game %d does not replay to its stored positions; skipped",
                        self.worker, stored.game_id)
        return roots

    def _wanted(self) -> bool:
        return self.stop.mode is None and (self.limit is None or self.stats.positions < self.limit)

    def run(self) -> ReanalyseStats:
        t0 = time.perf_counter()
        reader = ReplayReader(self.run_dir)
        network = newest_network(self.run_dir)
        evaluator = self._load(network)
        if evaluator is None:
            network = current_best(self.run_dir)
            evaluator = self.load_evaluator(network)
        self.stats.network = network.name
        log.info("reanalyser %d (pid %d): network %s (step %d), %d positions at once, %d simulations each",
                 self.worker, os.getpid(), network.name, network.step, self.in_flight, self.config.simulations)
        search = BatchedSearch(self.in_flight, self.selfplay.search, self.selfplay.rules,
                               simulations=self.config.simulations)
        slots: list[_Root | None] = [None] * self.in_flight
        queue: deque[_Root] = deque()
        last_poll = last_log = time.monotonic()
        newer: CheckpointInfo | None = None
        with ReanalysisWriter(self.run_dir, self.worker, commit_targets=self.config.commit_targets) as writer:
            # A restart draws other games than the start before it, and the same ones given the same store.
            self.rng = np.random.default_rng([self.config.seed, self.worker, writer.committed])
            while self.stop.mode is None:
                busy = sum(s is not None for s in slots)
                if newer is None and time.monotonic() - last_poll > self.config.network_poll_seconds:
                    last_poll = time.monotonic()
                    found = newest_network(self.run_dir)
                    newer = found if found.step != network.step or found.path != network.path else None
                if newer is not None and not busy:  # every entry names the network that searched it
                    loaded = self._load(newer)
                    if loaded is not None:
                        network, evaluator = newer, loaded
                        self.stats.network = network.name
                        log.info("reanalyser %d: network %s (step %d)", self.worker, network.name, network.step)
                    newer = None
                for g in range(self.in_flight):
                    if newer is not None or not self._wanted() or \
                            self.limit is not None and self.stats.positions + busy >= self.limit:
                        break
                    if slots[g] is None:
                        if not queue:
                            queue.extend(self._draw_game(reader))
                        if not queue:
                            break
                        slots[g] = queue.popleft()
                        search.set_root(g, slots[g].game)
                        search.start(g, self.config.simulations)
                        busy += 1
                if not busy:
                    if not self._wanted():
                        break
                    time.sleep(0.5 if newer is None else 0)  # no game committed yet
                    continue
                search.step(evaluator)
                for g in np.flatnonzero(search.complete()):
                    root, slots[g] = slots[g], None
                    search.stop(int(g))
                    actions, shares = visit_policy(search.root_children(int(g)), root.game.position.black_to_move)
                    writer.append(root.actor_id, root.row, actions, shares, search.root_value(int(g)), network.step)
                    self.stats.positions += 1
                if time.monotonic() - last_log > 60:
                    last_log = time.monotonic()
                    log.info("reanalyser %d: %d positions of %d games (%.0f a second)", self.worker,
                             self.stats.positions, self.stats.games, self.stats.positions / (time.perf_counter() - t0))
        self.stats.elapsed = time.perf_counter() - t0
        return self.stats


def run_reanalyser(run_dir: str, worker: int, config: ReanalyseConfig, selfplay: SelfPlayConfig,
                   window: Callable[[int], int], positions: int | None = None,
                   handle_sigint: bool = True) -> ReanalyseStats:
    """Process entry point: reanalyse until stopped by a signal (or `positions` entries are made)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    reanalyser = Reanalyser(run_dir, worker, config, selfplay, window, positions)
    reanalyser.stop.install(handle_sigint)
    try:
        return reanalyser.run()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):  # see selfplay.actor.run_actor
            signal.signal(sig, signal.SIG_IGN)
