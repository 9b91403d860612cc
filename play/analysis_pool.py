"""Many analysis queries searched together: one `BatchedSearch` whose trees are slots for positions.

Each position of a query (one, or one per ply of `analyze_plies`) waits for a free tree, is searched in
lockstep with every other position in flight (their leaves go to the network in one batch, as self-play's
games do) and is answered as soon as its own limits are reached, so answers come back out of order.

A tree keeps its search after its answer until another position needs it. A position asked with a time
limit alone (a move on the clock) that continues the game of one searched before (the same start, its moves
and more) is searched on in that tree, from the subtree of the moves played since, as a match player on
the clock keeps its tree from move to move: a program playing a game through the engine, one query a move,
searches as `play` does (unless that subtree fills most of the largest pool a tree may have). A budget of
simulations or nodes is an analysis's, and is searched afresh, so that its answer counts exactly that budget.
A move on a game clock spends it as a match player on one does (`selfplay.tree_search.time_manager.MoveTimer`): it may
stop before its time or think on past it.
"""

from __future__ import annotations

import math
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from play.analysis_json import analysis_json
from play.engine import plies_left
from play.queries import EngineSettings, Query, error_answer
from selfplay.tree_search import mcts
from selfplay.tree_search.analysis import (
    VISITS_PER_STEP, analysis_of, candidate_lines, database_lines, make_room, max_single_game_capacity, with_database,
)
from selfplay.tree_search.evaluators import PositionEvaluator
from selfplay.tree_search.search import BatchedSearch, warm_up
from selfplay.tree_search.time_manager import MoveTimer, move_time
from zero.endgames.egdb import Egdb
from zero.rules.game import Game, Move, Position


# A search that fills the largest pool the trees may have stops, whatever its time: a subtree kept from the
# game's earlier moves that holds more than this share of it is dropped and the move searched afresh.
KEPT_SHARE_OF_LARGEST_POOL = 0.5


@dataclass
class Task:
    """One position of a query, waiting for a tree or being searched in one."""

    query: Query
    ply: int
    game: Game
    started: float = 0.0  # the pool's clock when it got a tree
    timer: MoveTimer | None = None  # with a time limit: when its search ends


class AnalysisPool:
    """See the module docstring. Not thread-safe: one thread submits and steps."""

    def __init__(self, evaluator: PositionEvaluator, settings: EngineSettings, egdb: Egdb | None = None,
                 network: PositionEvaluator | None = None, clock: Callable[[], float] = time.perf_counter):
        """With `egdb`, the positions it holds are exact, in the search and in the answers. `network`: the
        evaluator whose moves-left head gives the answers' plies_left (`evaluator` may be a cache over it).
        Time is read from `clock` (seconds; tests drive a fake one)."""
        settings.validate()
        self.clock = clock
        self.evaluator = evaluator
        self.network = network or evaluator
        self.settings = settings
        self.egdb = egdb
        # Before the first query's clock starts (its time counts from when it gets a tree).
        warm_up(evaluator, settings.search, settings.rules, egdb)
        try:
            self.search = BatchedSearch(settings.slots, settings.search, settings.rules,
                                        capacity=settings.tree_nodes, egdb=egdb)
        except MemoryError:  # each count has its bound; their product may still be more than the process has
            raise ValueError(f"{settings.slots} trees of {settings.tree_nodes:,} nodes do not fit in the memory this "
                             f"process may have: ask for fewer slots or tree nodes") from None
        # The most nodes a tree's pool grows to: SINGLE_GAME_MEMORY_SHARE of the process's memory over all the
        # trees.
        self.most_nodes = max_single_game_capacity(self.search.node_bytes(), settings.slots,
                                                   least=settings.tree_nodes)
        self.waiting: deque[Task] = deque()
        self.running: list[Task | None] = [None] * settings.slots
        # The game (start, moves) each tree's root was last searched for, None for a tree never used.
        self.rooted: list[tuple[Position, tuple[Move, ...]] | None] = [None] * settings.slots
        self.last_used = [0] * settings.slots  # when each tree last got a position (counting self.uses)
        self.uses = 0
        # The root value each tree's last move on a game clock found, by side to move, in the game it
        # follows: a value that falls below it makes the next move's search think on.
        self.clock_values: list[dict[bool, float]] = [{} for _ in range(settings.slots)]

    @property
    def idle(self) -> bool:
        return not self.waiting and not any(self.running)

    @property
    def wants_more(self) -> bool:
        """Whether taking another query now would keep every tree busy: fewer positions wait than there are
        trees (callers feeding a long stream of queries hold the rest back)."""
        return len(self.waiting) < self.settings.slots

    def submit(self, query: Query) -> None:
        self.waiting.extend(Task(query, ply, game) for ply, game in query.positions())

    def step(self) -> list[dict[str, Any]]:
        """Give waiting positions the free trees, run one batched search step, and answer every position
        whose search is done. A position whose search or answer fails is answered with an error (its
        query's id, the error's text) and the others go on; a step that fails answers every position in
        flight so, and the engine goes on with those waiting."""
        answers = self._start_waiting()
        if not any(self.running):
            return answers
        for g, task in enumerate(self.running):
            if task is not None:
                self.search.start(g, min(self._visit_limit(task), self.search.root_visits(g) + VISITS_PER_STEP))
        try:
            self.search.step(self.evaluator)
        except Exception as exc:
            return answers + self._all_failed(exc)
        now = self.clock()
        done = []
        for g, task in enumerate(self.running):
            if task is not None:
                try:
                    if self._done(g, task, now):
                        done.append(g)
                except Exception as exc:
                    answers.append(self._failed(g, exc))
        if done:
            # A finished tree is read and then given to another position: nothing of it may be in flight.
            try:
                self.search.drain()
            except Exception as exc:
                return answers + self._all_failed(exc)
        for g in done:
            task = self.running[g]
            try:
                if task.query.limits.clock_left is not None:
                    self.clock_values[g][task.game.position.black_to_move] = self.search.root_value(g)
                answers.append(self._answer(g, task, now - task.started))
            except Exception as exc:
                answers.append(self._failed(g, exc))
            else:
                self.search.stop(g)
                self.running[g] = None
        return answers

    def _all_failed(self, exc: Exception) -> list[dict[str, Any]]:
        """The error answers of every position in flight, after the step they share failed."""
        traceback.print_exception(exc, file=sys.stderr)  # a bug: its report needs where it happened
        self.search.abandon()
        return [self._given_up(g, exc) for g, task in enumerate(self.running) if task is not None]

    def _failed(self, g: int, exc: Exception) -> dict[str, Any]:
        """The error answer of the position in tree g, whose search or answer failed: a failure costs that
        position, never the process nor the other positions in flight."""
        traceback.print_exception(exc, file=sys.stderr)
        return self._given_up(g, exc)

    def _given_up(self, g: int, exc: Exception) -> dict[str, Any]:
        """Free tree g, which holds no game to search on from, and answer its position with the error."""
        task = self.running[g]
        self.search.stop(g)
        self.running[g] = None
        self.rooted[g] = None
        self.clock_values[g] = {}
        return error_answer(f"internal error at ply {task.ply}: {exc!r}", task.query.id)

    def _done(self, g: int, task: Task, now: float) -> bool:
        nodes = int(self.search.forest.trees[g, mcts.USED])
        limits = task.query.limits
        # Room last: a search that ends anyway must not grow every tree's pool on its way out.
        return bool(self.search.root_visits(g) >= self._visit_limit(task)
                    or self.search.root_proven(g) is not None
                    or (limits.nodes is not None and nodes >= limits.nodes)
                    or (task.timer is not None and task.timer.done(self.search, g, now))
                    or not self._room(g, task))

    def _room(self, g: int, task: Task) -> bool:
        """Whether tree g's search can go on: a full pool grows (every tree's) for a search that its time or
        simulations end, as a game searched alone does; a query's `nodes` is counted in the pool it began in.
        Without this a game on the clock filled the pool within a move or two of its endgame, and every
        search after that ended at once, whatever its time."""
        if task.query.limits.nodes is not None:
            return not self.search.forest.trees[g, mcts.FULL]
        return make_room(self.search, g, self.most_nodes)

    def _start_waiting(self) -> list[dict[str, Any]]:
        """Give waiting positions the free trees; returns the error answers of those that failed to start."""
        failed = []
        while self.waiting:
            free = [g for g, task in enumerate(self.running) if task is None]
            if not free:
                break
            task = self.waiting.popleft()
            start, moves = task.game.positions[0], tuple(task.game.moves)
            # The tree of this game's latest position searched before, else one holding no other game's,
            # else the one searched longest ago.
            continued = [g for g in free if self.rooted[g] is not None and self.rooted[g][0] == start
                         and moves[:len(self.rooted[g][1])] == self.rooted[g][1]] \
                if task.query.limits.clock_only else []
            g = max(continued, key=lambda g: len(self.rooted[g][1])) if continued else \
                min(free, key=lambda g: (self.rooted[g] is not None, self.last_used[g]))
            self.running[g] = task
            try:
                if continued:
                    kept = self.search.follow(g, moves[len(self.rooted[g][1]):], task.game)
                    if kept > KEPT_SHARE_OF_LARGEST_POOL * self.most_nodes:
                        self.search.set_root(g, task.game)
                else:
                    self.search.set_root(g, task.game)
                    self.clock_values[g] = {}
                self.rooted[g] = (start, moves)
                self.uses += 1
                self.last_used[g] = self.uses
                task.started = self.clock()
                task.timer = self._timer(g, task)
            except Exception as exc:
                failed.append(self._failed(g, exc))
        return failed

    def _timer(self, g: int, task: Task) -> MoveTimer | None:
        """When a timed search of `task` in tree `g` ends: at its `time`; a move on a game clock as a match
        player on one spends it (selfplay.tree_search.time_manager): the increment and a share of the rest, less once
        its move can no longer change, more while its choice is unstable, never more than is left, and
        nothing for a forced move."""
        limits = task.query.limits
        manager = self.settings.time_manager
        if limits.clock_left is None:
            if limits.seconds is None:
                return None
            return MoveTimer(manager, task.started, limits.seconds)
        if len(task.game.legal_moves()) == 1:
            return MoveTimer(manager, task.started, 0.0)  # a forced move: answered after the first step
        position = task.game.position
        above = None if self.egdb is None else position.piece_count() - self.egdb.max_pieces
        budget = move_time(manager, limits.increment, limits.clock_left - limits.increment, above)
        cap = min(limits.clock_left, limits.seconds if limits.seconds is not None else math.inf)
        return MoveTimer(manager, task.started, min(budget.target, cap), stop_early=True,
                         most_seconds=min(budget.most, cap),
                         previous_value=self.clock_values[g].get(position.black_to_move),
                         kept=self.search.root_visits(g), limit=self._visit_limit(task))

    def _visit_limit(self, task: Task) -> int:
        return task.query.limits.simulations or self.settings.max_simulations

    def _answer(self, g: int, task: Task, seconds: float) -> dict[str, Any]:
        position = task.game.position
        analysis = analysis_of(self.search, position, g)
        held = self.egdb is not None and position.piece_count() <= self.egdb.max_pieces
        if held:
            analysis = with_database(analysis, self.egdb, position)
        query = task.query
        if query.pv:
            shown = analysis.moves if query.top is None else analysis.moves[: query.top]
            moves = [stat.move for stat in shown]
            analysis.lines = (database_lines(self.egdb, position, moves) if held
                              else candidate_lines(self.search, g, position, moves))
        analysis.seconds = seconds  # the query's time; analysis_of counted the tree's nodes
        analysis.plies_left = plies_left(self.network, task.game)
        return analysis_json(analysis, position, task.ply, query_id=query.id, top=query.top, pv=query.pv,
                             wdl=query.wdl)
