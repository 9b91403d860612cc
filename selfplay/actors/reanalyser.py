"""A reanalyser: searches stored self-play positions again with the newest network (reanalyse).

`run_reanalyser(run_dir, worker, config, selfplay, window)` is the whole process (the loop starts
`reanalyse.workers` of them beside the actors). Over and over it draws a committed game from the training
window (uniformly among the games holding its newest `window(committed)` positions), replays the game from
its PDN, and searches each of its positions that had a choice (forced moves have no policy target) with
`simulations` simulations and no noise, `games_in_flight` positions at once in one batched search. Each
search's visit shares and root value are appended to the store as that position's fresh target
(selfplay.replay.reanalysis_store), which the trainer lays over the position's row.

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

from selfplay.actors.actor import (MAX_GAMES_IN_FLIGHT, MOST_QUEUED_POSITIONS, CheckpointInfo, SelfPlayConfig,
                                   StopRequest, current_best, newest_network)
from selfplay.replay.reanalysis_store import ReanalysisWriter
from selfplay.replay.replay_buffer import ReplayReader
from selfplay.tree_search.search import MOST_SIMULATIONS, BatchedSearch, visit_policy
from zero.corpus.pdn import PdnError, read_pdn_text
from zero.rules.game import Game, Position
from zero.run.config import MOST_PROCESSES, MOST_SEED, check_settings, setting

log = logging.getLogger(__name__)


@dataclass
class ReanalyseConfig:
    """Reanalyse (`[reanalyse]` in the loop's config). The search settings, rules, device and precision are
    self-play's (`[selfplay]`)."""

    # Reanalysers the loop runs beside the actors; on a machine sized automatically (actors = -1) they take
    # the place of as many actors. 0: none.
    workers: int = setting(0, low=0, high=MOST_PROCESSES)
    simulations: int = setting(200, low=1, high=MOST_SIMULATIONS)  # per position reanalysed
    games_in_flight: int = setting(64, low=1, high=MAX_GAMES_IN_FLIGHT)  # positions searched at once, CPU
    gpu_games_in_flight: int = setting(512, low=1, high=MAX_GAMES_IN_FLIGHT)  # ... and on CUDA
    # Loading a network is not free (the int8 model of a new checkpoint is derived on the CPU): a newer
    # candidate is looked for this often.
    network_poll_seconds: float = setting(60.0, low=0)
    commit_targets: int = setting(1024, low=1, high=MOST_QUEUED_POSITIONS)  # entries queued before a commit
    # The games drawn derive from it, the worker id and its entries so far.
    seed: int = setting(0, low=0, high=MOST_SEED)

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
        self.network: CheckpointInfo | None = None  # the network in use, and its evaluator (set by run)
        self.evaluator = None
        self._last_poll = 0.0

    def _load_network(self, info: CheckpointInfo):
        import torch

        from zero.net.inference import Evaluator

        torch.set_num_threads(self.selfplay.torch_threads)
        return Evaluator.from_checkpoint(info.path, device=self.selfplay.device, precision=self.selfplay.precision)

    def _load(self, network: CheckpointInfo):
        """`network`'s evaluator, or None when it cannot be loaded: a candidate can be removed by the
        gatekeeper between being listed and being read."""
        from zero.net.checkpoint import CheckpointError

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

    def _wanted(self, busy: int = 0) -> bool:
        """Whether to start another search, with `busy` searches in flight."""
        return self.stop.mode is None and (self.limit is None or self.stats.positions + busy < self.limit)

    def _use(self, network: CheckpointInfo, evaluator) -> None:
        self.network, self.evaluator = network, evaluator
        self.stats.network = network.name
        log.info("reanalyser %d (pid %d): network %s (step %d), %d positions at once, %d simulations each",
                 self.worker, os.getpid(), network.name, network.step, self.in_flight, self.config.simulations)

    def _newer_network(self) -> CheckpointInfo | None:
        """A newer network than the one in use, looked for once every network_poll_seconds."""
        if time.monotonic() - self._last_poll <= self.config.network_poll_seconds:
            return None
        self._last_poll = time.monotonic()
        found = newest_network(self.run_dir)
        return found if (found.path, found.step) != (self.network.path, self.network.step) else None

    def _fill(self, search: BatchedSearch, slots: list[_Root | None], queue: deque[_Root],
              reader: ReplayReader) -> int:
        """Start a search in every free slot that positions are there for; returns the searches in flight."""
        busy = sum(s is not None for s in slots)
        for g, slot in enumerate(slots):
            if slot is not None:
                continue
            if not queue and self._wanted(busy):
                queue.extend(self._draw_game(reader))
            if not queue or not self._wanted(busy):
                break
            slots[g] = queue.popleft()
            search.set_root(g, slots[g].game)
            search.start(g, self.config.simulations)
            busy += 1
        return busy

    def run(self) -> ReanalyseStats:
        t0 = last_log = time.perf_counter()
        reader = ReplayReader(self.run_dir)
        first = newest_network(self.run_dir)
        evaluator = self._load(first)
        if evaluator is None:
            first = current_best(self.run_dir)
            evaluator = self.load_evaluator(first)
        self._use(first, evaluator)
        self._last_poll = time.monotonic()
        search = BatchedSearch(self.in_flight, self.selfplay.search, self.selfplay.rules,
                               simulations=self.config.simulations)
        slots: list[_Root | None] = [None] * self.in_flight
        queue: deque[_Root] = deque()
        newer: CheckpointInfo | None = None
        with ReanalysisWriter(self.run_dir, self.worker, commit_targets=self.config.commit_targets) as writer:
            # A restart draws other games than the start before it, and the same ones given the same store.
            self.rng = np.random.default_rng([self.config.seed, self.worker, writer.committed])
            while self.stop.mode is None:
                newer = newer or self._newer_network()
                if newer is not None and not any(s is not None for s in slots):
                    # Only between searches: every entry names the one network that searched it.
                    loaded = self._load(newer)
                    if loaded is not None:
                        self._use(newer, loaded)
                    newer = None
                # While a newer network waits, the searches in flight finish and no new one starts.
                busy = (sum(s is not None for s in slots) if newer is not None
                        else self._fill(search, slots, queue, reader))
                if not busy:
                    if not self._wanted():
                        break
                    time.sleep(0.5)  # no game committed yet
                    continue
                search.step(self.evaluator)
                for g in map(int, np.flatnonzero(search.complete())):
                    root, slots[g] = slots[g], None
                    search.stop(g)
                    actions, shares = visit_policy(search.root_children(g), root.game.position.black_to_move)
                    writer.append(root.actor_id, root.row, actions, shares, search.root_value(g), self.network.step)
                    self.stats.positions += 1
                if time.perf_counter() - last_log > 60:
                    last_log = time.perf_counter()
                    log.info("reanalyser %d: %d positions of %d games (%.0f a second)", self.worker,
                             self.stats.positions, self.stats.games, self.stats.positions / (last_log - t0))
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
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):  # see selfplay.actors.actor.run_actor
            signal.signal(sig, signal.SIG_IGN)
