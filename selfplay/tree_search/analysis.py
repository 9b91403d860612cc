"""The one-game face of the batched search, for play and analysis: no noise, deterministic.

`analyse(game, evaluator, simulations)` searches a game's current position and returns every legal move
with its visits, prior, win/draw/loss and proven value, and the principal variation. `GameSearch` searches
one game move after move (play, analysis, a match player on the clock): it keeps its tree between moves,
sends many leaves a network call and stops on simulations, time or both; choosing a move to play, it plays
a forced move unsearched and stops on the clock once its move can no longer change.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from selfplay.tree_search import mcts
from selfplay.tree_search.evaluators import PositionEvaluator
from selfplay.tree_search.search import (
    BatchedSearch, SearchConfig, choose_move, move_order, moves_by_key, proven_wdl, warm_up, wdl_of,
)
from selfplay.tree_search.time_manager import MoveTimer, TimeManager
from zero.endgames.egdb import DRAW, MAX_DISTANCE, Egdb
from zero.rules.game import Game, Move, Position
from zero.run.machine import process_memory


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
    depth: int | None = None  # an alpha-beta search's (play.engine.AlphaBetaEngine): its move's iteration's
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
# The policy softmax temperature of a game searched alone: flatter priors send some of the visits to the
# moves the network ranks second. At 0.1 s a move, 1.4 measured +19 Elo (+2 .. +37) against 1.0
# (benchmarks/RESULTS.md). Self-play and gating keep 1.0 (their visit counts are the training targets).
SINGLE_GAME_POLICY_TEMPERATURE = 1.4
# Nodes a single game's tree starts with (about 140 bytes a node; pages are touched only as the tree grows):
# some 60,000 simulations, more than a CPU core searches in a minute. A search that fills it doubles it, up
# to SINGLE_GAME_MEMORY_SHARE of the process's memory, so that the clock, not the pool, ends a long search.
SINGLE_GAME_CAPACITY = 1 << 20
# The share of the memory the process may have that one game's tree may grow to; a search that fills that
# stops early. The rest is the network's, the interpreter's and the growth's: a pool that doubles holds its
# old nodes and its new ones at once.
SINGLE_GAME_MEMORY_SHARE = 0.25
# Root visits a search may add in one step. A step whose descents all end on proven nodes makes no network
# call and would otherwise run to its whole target inside one step, past its time limit (and, searching many
# trees in one batch, holding up every other tree).
VISITS_PER_STEP = 256
# The visit target of a search that only the clock (or a proven root) ends.
NO_VISIT_LIMIT = 1 << 62


def single_game_search(search: SearchConfig | None = None) -> SearchConfig:
    """The search settings of a game searched alone (play, analysis, the engine, match players on the clock):
    `search` (or the defaults) with the leaves a network call and the policy temperature measured for it."""
    return dataclasses.replace(search or SearchConfig(), leaves_per_tree=SINGLE_GAME_LEAVES,
                               policy_temperature=SINGLE_GAME_POLICY_TEMPERATURE)


def max_single_game_capacity(node_bytes: int, trees: int = 1, least: int = SINGLE_GAME_CAPACITY) -> int:
    """The most nodes a tree may grow to: SINGLE_GAME_MEMORY_SHARE of the memory this process may have
    (zero.run.machine.process_memory), shared by the `trees` of one pool (each tree's pool is as large as
    the largest's), never less than `least` (the size the trees start with) nor more than a pool can index."""
    memory = process_memory()
    if memory is None:  # nothing says how much there is: the starting size is the bound
        return least
    return min(mcts.MOST_NODES, max(least, int(SINGLE_GAME_MEMORY_SHARE * memory) // (node_bytes * trees)))


def make_room(search: BatchedSearch, g: int, most: int) -> bool:
    """Whether tree g has room for its search to go on: a full one doubles every tree's pool, up to `most`
    nodes. A pool the process cannot get the memory for stays as it is, and the search stops there with
    what it has rather than taking the process (and every other search in it) down."""
    if not search.forest.trees[g, mcts.FULL]:
        return True
    capacity = search.forest.links.shape[1]
    if capacity >= most:
        return False
    try:
        search.grow(min(2 * capacity, most))
    except MemoryError:
        return False
    return True


class GameSearch:
    """One game searched move after move: one tree, kept between searches (the subtree of the moves played
    since the last one: its visits count toward the next search's simulations), `config.leaves_per_tree`
    leaves a network call. `analyse` spends the whole budget (analysis); `choose` picks the move to play,
    spending no more than it needs (`selfplay.tree_search.time_manager`). Time is read from `clock` (seconds; tests
    drive a fake one). Not thread-safe."""

    def __init__(self, evaluator: PositionEvaluator, config: SearchConfig | None = None,
                 capacity: int = SINGLE_GAME_CAPACITY, egdb: Egdb | None = None, *,
                 max_capacity: int | None = None, time_manager: TimeManager | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        """`capacity`: the nodes the tree starts with; a search that fills it doubles it, up to
        `max_capacity` (default max_single_game_capacity), where it stops early."""
        self.evaluator = evaluator
        self.config = config or single_game_search()
        self.capacity = capacity
        self.max_capacity = max_capacity
        self.egdb = egdb  # with it, the positions it holds are exact leaves
        self.time_manager = time_manager or TimeManager()
        self.time_manager.validate()
        self.clock = clock
        self._search: BatchedSearch | None = None
        self._root: tuple[Position, tuple[Move, ...]] | None = None  # the game's start and moves at the root
        # The root value the last `choose` found, by side to move, in the game the tree follows: a value
        # that falls below it makes a search on the clock think on.
        self._chosen_value: dict[bool, float] = {}

    def analyse(self, game: Game, simulations: int | None = None, seconds: float | None = None) -> Analysis:
        """Search the game's current position until its root has `simulations` visits, `seconds` have
        passed (the moves so far are played), the root is proven or the tree cannot grow; at least one of
        the two limits must be given."""
        return self._run(game, simulations, seconds, stop_early=False)

    def choose(self, game: Game, simulations: int | None = None, seconds: float | None = None,
               most_seconds: float | None = None) -> tuple[Move, Analysis | None]:
        """The move to play and the search behind it. A forced move (the only legal one) is played at once,
        unsearched (None): no network call, and the tree follows it at the next search. Otherwise a search
        as `analyse`'s, except that on the clock it stops as soon as its move can no longer change
        (selfplay.tree_search.time_manager.decided), and with `most_seconds` (above `seconds`, a game clock's move) it
        thinks on past `seconds`, up to `most_seconds`, while its choice is unstable
        (selfplay.tree_search.time_manager.Instability)."""
        if game.outcome is not None:
            raise ValueError(f"the game is over ({game.outcome.termination.value})")
        legal = game.legal_moves()
        if len(legal) == 1:
            return legal[0], None
        analysis = self._run(game, simulations, seconds, stop_early=seconds is not None, most_seconds=most_seconds)
        self._chosen_value[game.position.black_to_move] = analysis.root_value
        return best_move(analysis), analysis

    def _run(self, game: Game, simulations: int | None, seconds: float | None, stop_early: bool,
             most_seconds: float | None = None) -> Analysis:
        if game.outcome is not None:
            raise ValueError(f"the game is over ({game.outcome.termination.value})")
        if simulations is None and seconds is None:
            raise ValueError("a search needs a number of simulations, a time or both")
        if simulations is not None and simulations < 1:
            raise ValueError("simulations must be at least 1")
        # On a budget of simulations too: there the first search compiled the kernels in silence (81 s after
        # "Engine thinking (64 simulations)..." after an install on a busy machine, issue 85), where warm_up
        # says what it does while it takes long.
        warm_up(self.evaluator, self.config, game.rules, self.egdb)
        started = self.clock()
        limit = simulations if simulations is not None else NO_VISIT_LIMIT
        search = self._rooted_at(game)
        timer = MoveTimer(self.time_manager, started, seconds, stop_early=stop_early, most_seconds=most_seconds,
                          previous_value=self._chosen_value.get(game.position.black_to_move),
                          kept=search.root_visits(0), limit=limit)
        # At least one step even when the time is already spent (a loaded machine): a player on the clock
        # must answer with a move.
        while search.root_visits(0) < limit and search.root_proven(0) is None and make_room(
                search, 0, self.max_capacity or max_single_game_capacity(search.node_bytes())):
            search.start(0, min(limit, search.root_visits(0) + VISITS_PER_STEP))
            search.step(self.evaluator)
            if timer.done(search, 0, self.clock()):
                break
        search.drain()
        search.stop(0)
        analysis = analysis_of(search, game.position)
        if self.egdb is not None and game.position.piece_count() <= self.egdb.max_pieces:
            analysis = with_database(analysis, self.egdb, game.position)
        analysis.seconds = self.clock() - started
        return analysis

    def candidate_lines(self, position: Position, moves: list[Move]) -> dict[Move, list[Move]]:
        """After a search of `position` (the last analyse): candidate_lines of its tree, or the database's
        lines where it holds the position (database_lines)."""
        if self.egdb is not None and position.piece_count() <= self.egdb.max_pieces:
            return database_lines(self.egdb, position, moves)
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
            self._chosen_value.clear()  # another game's values
        self._root = (start, moves)
        return self._search


# The moves of a drawn database position's line (a won or lost one goes to the game's end): a drawn line
# never ends, and a few moves show how the draw is held.
DRAWN_LINE_MOVES = 12


def analysis_of(search: BatchedSearch, position: Position, g: int = 0) -> Analysis:
    """The Analysis of tree g of a finished search whose root is `position`.

    Moves are ordered best first (selfplay.tree_search.search.move_order: proven wins, then by visits, proven losses
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
    (selfplay.tree_search.search.move_order) repeatedly, while the tree goes on and has visits."""
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


def database_lines(egdb: Egdb, position: Position, moves: list[Move]) -> dict[Move, list[Move]]:
    """For each of the moves listed from `position`, which the database holds: the move, then the database's
    line (Egdb.line), to the game's end after a win or a loss, DRAWN_LINE_MOVES after a draw. Not the tree's:
    a proven root stops the search within a few simulations and its children are never expanded, so the
    tree's line was the move alone (issue 85)."""
    lines = {}
    for move in moves:
        after = position.play(move)
        lines[move] = [move] + egdb.line(after, DRAWN_LINE_MOVES if egdb.probe(after).value == DRAW
                                         else MAX_DISTANCE)
    return lines


def with_database(analysis: Analysis, egdb: Egdb, position: Position) -> Analysis:
    """The analysis of a position the database holds, with the database's exact values for the root and
    every move (the search may not have visited them all), the moves in the order they are best and the
    principal variation starting with the first."""
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
    analysis.pv = database_lines(egdb, position, [best])[best]
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
