"""The one-game face of the batched search, for play and analysis: no noise, deterministic.

`analyse(game, evaluator, simulations)` searches a game's current position and returns every legal move
with its visits, prior, win/draw/loss and proven value, and the principal variation. `GameSearch` searches
one game move after move (play, analysis, a match player on the clock): it keeps its tree between moves,
sends many leaves a network call and stops on simulations, time or both.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from selfplay import mcts
from selfplay.evaluators import PositionEvaluator
from selfplay.search import (BatchedSearch, SearchConfig, choose_move, move_order, moves_by_key, proven_wdl, warm_up,
                             wdl_of)
from zero.egdb import Egdb
from zero.game import Game, Move, Position


@dataclass(frozen=True)
class Proven:
    """A value the search proved (terminal positions, endgame databases, MCTS-solver backups): `value` is
    +1 win, 0 draw, -1 loss for the player it is told for, `plies` the plies to the end of the game with
    best play (the winner hurrying, the loser delaying; for a draw, to the draw the search saw)."""

    value: int
    plies: int
    by_database: bool = False  # read from an endgame database rather than proven by the search

    def __str__(self) -> str:
        word = {1: "win", 0: "draw", -1: "loss"}[self.value]
        text = f"{word} in {self.plies}" if self.value else word
        return f"database {text}" if self.by_database else text


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
    nodes: int = 0  # nodes in the tree (positions expanded and their children)
    seconds: float = 0.0  # the search's time
    # For the moves a caller asked about (candidate_lines): the move and the line the search expects after it.
    lines: dict[Move, list[Move]] = field(default_factory=dict)


def analyse(game: Game, evaluator: PositionEvaluator, simulations: int,
            config: SearchConfig | None = None, egdb: Egdb | None = None) -> Analysis:
    """Search the game's current position with `simulations` root visits: no noise, deterministic; with
    `egdb`, the positions it holds are exact leaves. Raises ValueError for a finished game."""
    if game.outcome is not None:
        raise ValueError(f"the game is over ({game.outcome.termination.value})")
    if simulations < 1:
        raise ValueError("simulations must be at least 1")
    config = config or SearchConfig()
    search = BatchedSearch(1, config, game.rules, simulations=simulations, egdb=egdb)
    search.set_root(0, game)
    search.start(0, simulations)
    search.run(evaluator)
    return analysis_of(search, game.position)


# Leaves a game searched alone sends the network in one call (virtual loss spreads them over the tree):
# more leaves make the CPU backend's batches cheaper per position, fewer keep the search sharper.
# Measured at 0.1 s a move on one core (benchmarks/single_game_bench.py, benchmarks/RESULTS.md).
SINGLE_GAME_LEAVES = 16
# Nodes in a single game's tree (about 140 bytes a node; pages are touched only as the tree grows): some
# 60,000 simulations, more than a CPU core searches in a minute. A full tree ends a search early.
SINGLE_GAME_CAPACITY = 1 << 20


class GameSearch:
    """One game searched move after move: one tree, kept between searches (the subtree of the moves played
    since the last one: its visits count toward the next search's simulations), `config.leaves_per_tree`
    leaves a network call. Not thread-safe."""

    def __init__(self, evaluator: PositionEvaluator, config: SearchConfig | None = None,
                 capacity: int = SINGLE_GAME_CAPACITY, egdb: Egdb | None = None) -> None:
        self.evaluator = evaluator
        self.config = config or SearchConfig(leaves_per_tree=SINGLE_GAME_LEAVES)
        self.capacity = capacity
        self.egdb = egdb  # with it, the positions it holds are exact leaves
        self._search: BatchedSearch | None = None
        self._root: tuple[Position, tuple[Move, ...]] | None = None  # the game's start and moves at the root

    def analyse(self, game: Game, simulations: int | None = None, seconds: float | None = None) -> Analysis:
        """Search the game's current position until its root has `simulations` visits, `seconds` have
        passed (the moves so far are played), the root is proven or the tree is full; at least one of the
        two limits must be given."""
        if game.outcome is not None:
            raise ValueError(f"the game is over ({game.outcome.termination.value})")
        if simulations is None and seconds is None:
            raise ValueError("a search needs a number of simulations, a time or both")
        if simulations is not None and simulations < 1:
            raise ValueError("simulations must be at least 1")
        if seconds is not None:
            warm_up(self.evaluator, self.config, game.rules, self.egdb)
        started = time.perf_counter()
        deadline = started + seconds if seconds is not None else math.inf
        search = self._rooted_at(game)
        search.start(0, simulations if simulations is not None else self.capacity)
        # At least one step even when the time is already spent (a loaded machine): a player on the clock
        # must answer with a move.
        while not search.complete()[0]:
            search.step(self.evaluator)
            if time.perf_counter() >= deadline:
                break
        search.stop(0)
        analysis = analysis_of(search, game.position)
        if self.egdb is not None and game.position.piece_count() <= self.egdb.max_pieces:
            analysis = with_database(analysis, self.egdb, game.position, search)
        analysis.seconds = time.perf_counter() - started
        return analysis

    def candidate_lines(self, position: Position, moves: list[Move]) -> dict[Move, list[Move]]:
        """After a search of `position` (the last analyse): candidate_lines of its tree."""
        return candidate_lines(self._search, 0, position, moves)

    def _rooted_at(self, game: Game) -> BatchedSearch:
        """The search with its root at the game's position: the tree follows the moves played since the
        last search when it holds them, else starts afresh."""
        start, moves = game.positions[0], tuple(game.moves)
        if self._search is None or self._search.rules != game.rules:
            self._search = BatchedSearch(1, self.config, game.rules, capacity=self.capacity, egdb=self.egdb)
            self._root = None
        last = self._root
        if last is not None and last[0] == start and moves[:len(last[1])] == last[1]:
            self._search.follow(0, moves[len(last[1]):], game)
        else:
            self._search.set_root(0, game)
        self._root = (start, moves)
        return self._search


def analysis_of(search: BatchedSearch, position: Position, g: int = 0) -> Analysis:
    """The Analysis of tree g of a finished search whose root is `position`.

    Moves are ordered best first (selfplay.search.move_order: proven wins, then by visits, proven losses
    last), and the principal variation follows the same order at every node, so its first move is the one
    best_move plays."""
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
    pv = principal_variation(search, g, 0, position)
    root_proven = search.root_proven(g)
    return Analysis(stats, pv, search.root_wdl(g), search.root_visits(g), search.root_value(g),
                    proven=None if root_proven is None else Proven(*root_proven),
                    nodes=int(search.forest.trees[g, mcts.USED]))


def candidate_lines(search: BatchedSearch, g: int, position: Position, moves: list[Move]) -> dict[Move, list[Move]]:
    """For each of the root's moves listed (the root of tree g is `position`), the line the search expects
    after it: the move, then the principal variation of its subtree."""
    lines = {}
    for move in moves:
        child = int(mcts.find_child(search.forest, g, move.from_square - 1, move.to_square - 1, move.captured))
        after = position.play(move)
        lines[move] = [move] + (principal_variation(search, g, child, after) if child >= 0 else [])
    return lines


def principal_variation(search: BatchedSearch, g: int, node: int, position: Position) -> list[Move]:
    """The line the search expects from `node` of tree g (whose position is `position`): the best child
    (selfplay.search.move_order) repeatedly, while the tree goes on and has visits."""
    f = search.forest
    line = []
    while f.links[g, node, mcts.STATE] == mcts.EXPANDED:
        first = int(f.links[g, node, mcts.FIRST_CHILD])
        children = f.stats[g, first: first + int(f.links[g, node, mcts.N_CHILDREN])]
        if children[:, mcts.VISITS].max() == 0:
            break
        proven = children[:, mcts.PROVEN_PLIES] >= 0
        node = first + int(move_order(children[:, mcts.VISITS], children[:, mcts.PRIOR],
                                      np.where(proven, -children[:, mcts.PROVEN_VALUE], np.nan),
                                      children[:, mcts.PROVEN_PLIES])[0])
        nd = f.nodes[g, node]
        move = moves_by_key(position)[(int(nd[mcts.MOVE_FROM]), int(nd[mcts.MOVE_TO]), int(nd[mcts.CAPTURED]))]
        line.append(move)
        position = position.play(move)
    return line


def with_database(analysis: Analysis, egdb: Egdb, position: Position, search: BatchedSearch,
                  g: int = 0) -> Analysis:
    """The analysis of a position the database holds (the root of tree g of `search`), with the database's
    exact values for the root and every move (the search may not have visited them all), the moves in the
    order they are best and the principal variation starting with the first."""
    stats = []
    for stat, (_, probe) in zip(sorted(analysis.moves, key=lambda s: str(s.move)),
                                sorted(egdb.move_values(position), key=lambda mv: str(mv[0]))):
        stat.proven = Proven(probe.value, max(probe.distance, 0), by_database=True)
        stat.q, stat.wdl = float(probe.value), proven_wdl(probe.value)
        stats.append(stat)
    order = move_order(np.array([s.visits for s in stats]), np.array([s.prior for s in stats]),
                       np.array([s.proven.value for s in stats], dtype=float),
                       np.array([s.proven.plies for s in stats]))
    root = egdb.probe(position)
    analysis.moves = [stats[k] for k in order]
    best = analysis.moves[0].move
    analysis.pv = candidate_lines(search, g, position, [best])[best]
    analysis.proven = Proven(root.value, max(root.distance, 0), by_database=True)
    analysis.root_wdl, analysis.root_value = proven_wdl(root.value), float(root.value)
    return analysis


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
