"""The one-position face of the batched search, for play and analysis: no noise, deterministic.

`analyse(game, evaluator, simulations)` searches a game's current position and returns every legal move
with its visits, prior and win/draw/loss, and the principal variation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from selfplay import mcts
from selfplay.evaluators import PositionEvaluator
from selfplay.search import BatchedSearch, SearchConfig, moves_by_key, sample_by_visits, wdl_of
from zero.game import Game, Move, Position


@dataclass(frozen=True)
class Proven:
    """A value the search proved (terminal positions, endgame databases, MCTS-solver backups): `value` is
    +1 win, 0 draw, -1 loss for the player it is told for, `plies` the plies to the end of the game with
    best play (the winner hurrying, the loser delaying; for a draw, to the draw the search saw)."""

    value: int
    plies: int

    def __str__(self) -> str:
        word = {1: "win", 0: "draw", -1: "loss"}[self.value]
        return f"{word} in {self.plies}" if self.value else word


@dataclass
class MoveStats:
    move: Move
    visits: int
    prior: float
    q: float  # mean search value for the player making the move, in [-1, 1]; 0.0 when unvisited
    wdl: tuple[float, float, float] | None  # win/draw/loss for the player making the move; None unvisited
    proven: Proven | None = None  # for the player making the move, when the search proved it


@dataclass
class Analysis:
    moves: list[MoveStats]  # every legal move, most visited first
    pv: list[Move]  # principal variation: most visited child, repeatedly
    root_wdl: tuple[float, float, float]  # win/draw/loss for the side to move
    simulations: int  # root visits the search made
    root_value: float = 0.0  # win - loss for the side to move
    # The network's estimate of the plies left in the game from the root (its moves-left head), when the
    # evaluator has one; the search itself does not use it.
    plies_left: float | None = None
    proven: Proven | None = None  # for the side to move, when the search proved the root


def analyse(game: Game, evaluator: PositionEvaluator, simulations: int,
            config: SearchConfig | None = None) -> Analysis:
    """Search the game's current position with `simulations` root visits: no noise, deterministic.
    Raises ValueError for a finished game."""
    if game.outcome is not None:
        raise ValueError(f"the game is over ({game.outcome.termination.value})")
    if simulations < 1:
        raise ValueError("simulations must be at least 1")
    config = config or SearchConfig()
    search = BatchedSearch(1, config, game.rules, simulations=simulations)
    search.set_root(0, game)
    search.start(0, simulations)
    search.run(evaluator)
    return analysis_of(search, game.position)


def analysis_of(search: BatchedSearch, position: Position) -> Analysis:
    """The Analysis of tree 0 of a finished search whose root is `position`.

    Moves are ordered by visits, ties by prior, and the principal variation follows the same order at
    every node, so its first move is the one best_move plays."""
    f = search.forest
    by_key = moves_by_key(position)
    ch = search.root_children(0)
    stats = []
    for k in range(len(ch.visits)):
        move = by_key[(int(ch.move_from[k]), int(ch.move_to[k]), int(ch.captured[k]))]
        n = int(ch.visits[k])
        q = float(ch.value_sum[k] / n) if n else 0.0
        wdl = wdl_of(ch.value_sum[k], ch.draw_sum[k], n) if n else None
        stats.append(MoveStats(move, n, float(ch.prior[k]), q, wdl))
    stats.sort(key=lambda s: (-s.visits, -s.prior))
    pv = []
    node, pos = 0, position
    while f.links[0, node, mcts.STATE] == mcts.EXPANDED:
        first = int(f.links[0, node, mcts.FIRST_CHILD])
        children = f.stats[0, first: first + int(f.links[0, node, mcts.N_CHILDREN])]
        if children[:, mcts.VISITS].max() == 0:
            break
        child = first + int(np.lexsort((-children[:, mcts.PRIOR], -children[:, mcts.VISITS]))[0])
        nd = f.nodes[0, child]
        move = moves_by_key(pos)[(int(nd[mcts.MOVE_FROM]), int(nd[mcts.MOVE_TO]), int(nd[mcts.CAPTURED]))]
        pv.append(move)
        pos = pos.play(move)
        node = child
    return Analysis(stats, pv, search.root_wdl(0), search.root_visits(0), search.root_value(0))


def best_move(analysis: Analysis, temperature: float = 0.0, rng: np.random.Generator | None = None) -> Move:
    """The most visited move at temperature 0; otherwise sampled ~ visits^(1/temperature)."""
    if not analysis.moves:
        raise ValueError("the analysis has no moves")
    visits = np.array([s.visits for s in analysis.moves])
    if temperature > 0 and rng is None:
        rng = np.random.default_rng()
    return analysis.moves[sample_by_visits(visits, temperature, rng)].move
