"""Many analysis queries searched together: one `BatchedSearch` whose trees are slots for positions.

Each position of a query (one, or one per ply of `analyze_plies`) waits for a free tree, is searched in
lockstep with every other position in flight (their leaves go to the network in one batch, as self-play's
games do) and is answered as soon as its own limits are reached, so answers come back out of order.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from play.queries import EngineSettings, Query, answer
from selfplay import mcts
from selfplay.analysis import analysis_of
from selfplay.evaluators import PositionEvaluator
from selfplay.search import BatchedSearch, moves_by_key
from zero.game import Game, Move, Position

# Root visits a tree may add in one step. A search whose descents all end on terminal nodes makes no
# network call and would otherwise run to its whole target inside one step, past its time limit and
# holding up every other tree.
VISITS_PER_STEP = 256


@dataclass
class Task:
    """One position of a query, waiting for a tree or being searched in one."""

    query: Query
    ply: int
    game: Game
    started: float = 0.0  # perf_counter when it got a tree

    def deadline(self) -> float:
        seconds = self.query.limits.seconds
        return self.started + seconds if seconds is not None else float("inf")


class AnalysisPool:
    """See the module docstring. Not thread-safe: one thread submits and steps."""

    def __init__(self, evaluator: PositionEvaluator, settings: EngineSettings):
        settings.validate()
        self.evaluator = evaluator
        self.settings = settings
        self.search = BatchedSearch(settings.slots, settings.search, settings.rules, capacity=settings.tree_nodes)
        self.waiting: deque[Task] = deque()
        self.running: list[Task | None] = [None] * settings.slots

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
        whose search is done."""
        self._start_waiting()
        if not any(self.running):
            return []
        for g, task in enumerate(self.running):
            if task is not None:
                self.search.start(g, min(self._visit_limit(task), self.search.root_visits(g) + VISITS_PER_STEP))
        self.search.step(self.evaluator)
        trees = self.search.forest.trees
        now = time.perf_counter()
        answers = []
        for g, task in enumerate(self.running):
            if task is None:
                continue
            nodes = int(trees[g, mcts.USED])
            limits = task.query.limits
            if (self.search.root_visits(g) >= self._visit_limit(task) or trees[g, mcts.FULL]
                    or now >= task.deadline() or (limits.nodes is not None and nodes >= limits.nodes)):
                self.search.stop(g)
                self.running[g] = None
                answers.append(self._answer(g, task, nodes, now - task.started))
        return answers

    def _start_waiting(self) -> None:
        for g, task in enumerate(self.running):
            if not self.waiting:
                return
            if task is not None:
                continue
            task = self.waiting.popleft()
            self.search.set_root(g, task.game)
            task.started = time.perf_counter()
            self.running[g] = task

    def _visit_limit(self, task: Task) -> int:
        return task.query.limits.simulations or self.settings.max_simulations

    def _answer(self, g: int, task: Task, nodes: int, seconds: float) -> dict[str, Any]:
        tree = OneTree(self.search, g)
        position = task.game.position
        analysis = analysis_of(tree, position)
        shown = analysis.moves if task.query.top is None else analysis.moves[: task.query.top]
        variations = candidate_variations(tree, position, [stat.move for stat in shown]) if task.query.pv else {}
        return answer(task.query, task.ply, position, analysis, variations, nodes, seconds)


class OneTree:
    """Tree g of a BatchedSearch seen as tree 0 of a search of its own, which is the tree
    `selfplay.analysis.analysis_of` reads: the forest's arrays sliced to row g (views, nothing copied) and
    every per-tree method called for g. A workaround until `analysis_of` takes the tree's index."""

    def __init__(self, search: BatchedSearch, g: int):
        self.forest = type(search.forest)(*(array[g: g + 1] for array in search.forest))
        self._search = search
        self._g = g

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._search, name)
        if not callable(attribute):
            return attribute

        def for_tree_g(tree: int, *args: Any, **kwargs: Any) -> Any:
            if tree != 0:
                raise IndexError(f"a OneTree view has only tree 0, not {tree}")
            return attribute(self._g, *args, **kwargs)

        return for_tree_g


def candidate_variations(tree: OneTree, position: Position, moves: list[Move]) -> dict[Move, list[Move]]:
    """For each of the root's moves listed, the line the search expects after it: the move, then the most
    visited child (ties by prior) repeatedly, as `analysis_of` follows the principal variation."""
    f = tree.forest
    first = int(f.links[0, 0, mcts.FIRST_CHILD])
    count = int(f.links[0, 0, mcts.N_CHILDREN]) if f.links[0, 0, mcts.STATE] == mcts.EXPANDED else 0
    child_of = {(int(f.nodes[0, c, mcts.MOVE_FROM]), int(f.nodes[0, c, mcts.MOVE_TO]),
                 int(f.nodes[0, c, mcts.CAPTURED])): c for c in range(first, first + count)}
    lines = {}
    for move in moves:
        line = [move]
        node = child_of.get((move.from_square - 1, move.to_square - 1, move.captured), -1)
        pos = position.play(move)
        while node >= 0 and f.links[0, node, mcts.STATE] == mcts.EXPANDED:
            first = int(f.links[0, node, mcts.FIRST_CHILD])
            children = f.stats[0, first: first + int(f.links[0, node, mcts.N_CHILDREN])]
            if children[:, mcts.VISITS].max() == 0:
                break
            node = first + int(np.lexsort((-children[:, mcts.PRIOR], -children[:, mcts.VISITS]))[0])
            nd = f.nodes[0, node]
            reply = moves_by_key(pos)[(int(nd[mcts.MOVE_FROM]), int(nd[mcts.MOVE_TO]), int(nd[mcts.CAPTURED]))]
            line.append(reply)
            pos = pos.play(reply)
        lines[move] = line
    return lines
