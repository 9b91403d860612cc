"""The one-position face of the batched search, for play and analysis: no noise, deterministic.

`analyse(game, evaluator, simulations)` searches a game's current position and returns every legal move
with its visits, prior and win/draw/loss, and the principal variation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from selfplay import mcts
from selfplay.evaluators import PositionEvaluator
from selfplay.search import BatchedSearch, SearchConfig, choose_move, move_order, moves_by_key, proven_wdl, wdl_of
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
    # Mean search value for the player making the move, in [-1, 1] (the exact one when proven); 0.0 unvisited
    q: float
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


def analysis_of(search: BatchedSearch, position: Position, g: int = 0) -> Analysis:
    """The Analysis of tree g of a finished search whose root is `position`.

    Moves are ordered best first (selfplay.search.move_order: proven wins, then by visits, proven losses
    last), and the principal variation follows the same order at every node, so its first move is the one
    best_move plays."""
    f = search.forest
    by_key = moves_by_key(position)
    ch = search.root_children(g)
    stats = []
    for k in move_order(ch.visits, ch.prior, ch.proven, ch.proven_plies):
        move = by_key[(int(ch.move_from[k]), int(ch.move_to[k]), int(ch.captured[k]))]
        n = int(ch.visits[k])
        q = float(ch.value_sum[k] / n) if n else 0.0
        wdl = wdl_of(ch.value_sum[k], ch.draw_sum[k], n) if n else None
        proven = None
        if ch.proven_plies[k] >= 0:
            proven = Proven(int(ch.proven[k]), int(ch.proven_plies[k]))
            q, wdl = float(proven.value), proven_wdl(proven.value)
        stats.append(MoveStats(move, n, float(ch.prior[k]), q, wdl, proven))
    pv = []
    node, pos = 0, position
    while f.links[g, node, mcts.STATE] == mcts.EXPANDED:
        first = int(f.links[g, node, mcts.FIRST_CHILD])
        children = f.stats[g, first: first + int(f.links[g, node, mcts.N_CHILDREN])]
        if children[:, mcts.VISITS].max() == 0:
            break
        proven = children[:, mcts.PROVEN_PLIES] >= 0
        child = first + int(move_order(children[:, mcts.VISITS], children[:, mcts.PRIOR],
                                       np.where(proven, -children[:, mcts.PROVEN_VALUE], np.nan),
                                       children[:, mcts.PROVEN_PLIES])[0])
        nd = f.nodes[g, child]
        move = moves_by_key(pos)[(int(nd[mcts.MOVE_FROM]), int(nd[mcts.MOVE_TO]), int(nd[mcts.CAPTURED]))]
        pv.append(move)
        pos = pos.play(move)
        node = child
    root_proven = search.root_proven(g)
    return Analysis(stats, pv, search.root_wdl(g), search.root_visits(g), search.root_value(g),
                    proven=None if root_proven is None else Proven(*root_proven))


def best_move(analysis: Analysis, temperature: float = 0.0, rng: np.random.Generator | None = None) -> Move:
    """The first of the analysis's moves (best first) at temperature 0; otherwise, unless a win is proven,
    sampled ~ visits^(1/temperature) among the moves not proven lost."""
    if not analysis.moves:
        raise ValueError("the analysis has no moves")
    if temperature > 0 and rng is None:
        rng = np.random.default_rng()
    moves = analysis.moves
    proven = np.array([np.nan if s.proven is None else s.proven.value for s in moves])
    plies = np.array([-1 if s.proven is None else s.proven.plies for s in moves])
    k = choose_move(np.array([s.visits for s in moves]), np.array([s.prior for s in moves]), proven, plies,
                    temperature, rng)
    return moves[k].move
