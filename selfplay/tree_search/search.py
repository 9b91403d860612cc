"""PUCT settings and the batched search driver.

`BatchedSearch` runs one tree per game in flight (kernels in `selfplay.tree_search.mcts`): every `step` selects leaves
in all active trees, sends their planes to the evaluator in one batch and backs the answers up. Games are
independent: each starts its own search (`start`) with its own visit target, and is read out and advanced
(`play`, which keeps the played move's subtree) when `complete` says so.

`selfplay.tree_search.analysis` is the one-position face of the same search, for play and analysis.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from selfplay.tree_search import mcts
from selfplay.tree_search.answer_table import new_answer_arrays
from selfplay.tree_search.evaluators import CachedEvaluator, PositionEvaluator, gives_plies_left
from zero.endgames.egdb import Egdb, no_tables
from zero.net.encoding import NUM_PLANES, action_index
from zero.rules import movegen
from zero.rules.game import Game, Move, Position, RulesConfig
from zero.run.config import check_settings, setting


# The most root visits any search may be asked for (self-play, reanalysis, gating, shipping, the engine's
# queries): a tree of a million simulations holds some 16 million nodes, about 2 GB.
MOST_SIMULATIONS = 1_000_000
# The most leaves a tree sends a network call: far above the 1 to 64 ever measured.
MOST_LEAVES_PER_TREE = 256


@dataclass
class SearchConfig:
    """PUCT settings: how a tree is searched, whoever searches it (self-play, gating, matches, play).
    What to do with a search (how many simulations, noise, temperature, resignation) is the caller's
    choice (selfplay.actors.actor.SelfPlayConfig, train.arena.gating.GatingConfig). Defaults are starting points for
    English checkers (about 8 legal moves a position), not tuned values."""

    c_puct: float = setting(1.5, above=0)  # exploration weight in PUCT
    # The weight grows with the parent's visits, c_puct + c_puct_growth * ln((N + c_puct_base) / c_puct_base)
    # (AlphaZero's form): a node searched long explores more widely. 0, a constant weight, by default: growth 1
    # measured -8 Elo (-27 .. +10) at 0.1 s a move (benchmarks/RESULTS.md).
    c_puct_growth: float = setting(0.0, low=0)
    c_puct_base: float = setting(1000.0, above=0)  # the visits at which the growth reaches ln 2
    # Priors are softmax(logits / policy_temperature): above 1 flattens the network's policy, so the search
    # looks more at moves the network ranks second (lc0's policy softmax temperature). A game searched alone
    # uses selfplay.tree_search.analysis.SINGLE_GAME_POLICY_TEMPERATURE; 1 here keeps self-play's targets as they were.
    policy_temperature: float = setting(1.0, above=0)
    # What a draw is worth to the side to move at the root, in the search's selection: a child's Q for the
    # root's side adds draw_value times its draw probability (the opponent's nodes subtract it), so below 0
    # the search prefers the lines where the game stays decisive, against an opponent likely to go wrong
    # (lc0's contempt). 0, a draw's worth in a zero-sum game, for self-play and gating, whose targets it
    # would bias.
    draw_value: float = setting(0.0, low=-1, high=1)
    # Whether the opponent's nodes subtract the draw value (a zero-sum search: the opponent is supposed to
    # want the draw as much as the root's side shuns it), or value a draw at 0 as an opponent whose own
    # search has no draw value does.
    draw_value_zero_sum: bool = True
    fpu_reduction: float = setting(0.25, low=0)  # unvisited child's Q = parent Q - this * sqrt(visited prior mass)
    fpu_reduction_root: float = setting(0.0, low=0)  # the same at the root, where noise should be free to act
    virtual_loss: float = setting(1.0, low=0)  # each in-flight visit counts as a loss of this size while pending
    # Leaves per tree per network batch (virtual loss spreads them).
    leaves_per_tree: int = setting(2, low=1, high=MOST_LEAVES_PER_TREE)
    # Nodes per tree (a full tree ends its search early); 0 = sized by nodes_per_tree.
    tree_capacity: int = setting(0, low=0, high=mcts.MOST_NODES)
    reuse_tree: bool = True  # keep the played move's subtree for the next search
    # A position where a capture is pending (captures are compulsory) is expanded without a network call,
    # its captures taking equal priors, and the descent goes on: the network judges the quiet positions
    # after an exchange, where a static value is reliable, and shots a few plies deep reach the root. Off
    # by default: at 0.1 s a move it measured -1 Elo (-26 .. +23) against the same player without
    # (benchmarks/RESULTS.md), though it finds shots a material-only value misses.
    resolve_captures: bool = False
    # Positions an endgame database holds as exact leaves below the root, when the search is given one (play,
    # analyze, serve, engine and review load the largest built; self-play and matches only when asked). At
    # 0.1 s a move with the 5-piece database it measured +38 Elo (+14 .. +61) against the same player using
    # the database at the root only (benchmarks/RESULTS.md; the -44 measured earlier predates the time
    # manager). A database at the root (exact play in its positions) is used regardless.
    database_leaves: bool = True
    # Network calls a game searched alone (selfplay.tree_search.analysis.GameSearch, the analysis engine) keeps in
    # flight at once, each on a core of its own while the tree goes on selecting the next leaves. 1 by
    # default: on 2 cores 2 searched 1.2-1.5x the simulations, but their pending leaves made the search less
    # selective and it lost games at 0.1 s a move (benchmarks/RESULTS.md).
    threads: int = setting(1, low=1, high=256)
    # The moves-left utility (lc0's; selfplay.tree_search.mcts's docstring has the formula): where a node's
    # result is clear (|Q| past moves_left_threshold), a child's score gains up to moves_left_weight for
    # leading to the end sooner when the chooser wins, later when it loses, by the network's moves-left
    # head, moves_left_slope of the weight a ply of difference. A network's value says a won ending is won
    # whichever way it goes, and without this the search may wander (into a repetition, or the no-progress
    # draw) where a shorter way converts it; a lost one, it may give up sooner than it must. Proven nodes
    # already count their exact plies. 0, off, by default until a match at equal time shows a weight that
    # wins; an evaluator without the head (zero.net.inference.Evaluator of a network without it, the uniform
    # and material ones) leaves it off whatever the weight. The slope and threshold are starting points
    # (lc0's threshold; a slope that reaches the full effect at 20 plies of difference), not tuned values.
    moves_left_weight: float = setting(0.0, low=0, high=1)
    moves_left_slope: float = setting(0.05, above=0, high=1)  # of the weight, per ply of difference
    moves_left_threshold: float = setting(0.8, low=0, below=1)  # |Q| past which the utility acts

    def validate(self) -> None:
        check_settings(self, "search")

    def nodes_per_tree(self, simulations: int) -> int:
        """Pool size for searches of up to `simulations` root visits: tree_capacity, or by default room for
        such a search (about 8 children per expansion) plus as much again for the subtree kept from the
        previous move."""
        return self.tree_capacity or 16 * simulations + movegen.MAX_MOVES + 1

    @property
    def opponent_draw_value(self) -> float:
        """What the search supposes a draw is worth to the side not to move at the root."""
        return -self.draw_value if self.draw_value_zero_sum else 0.0


@dataclass(frozen=True)
class RootNoise:
    """Dirichlet noise to mix into a root's priors (self-play's exploration; gating and play use none)."""

    rng: np.random.Generator
    alpha: float
    fraction: float


@dataclass
class RootChildren:
    """The root's children after a search: moves as (from bit, to bit, captured mask) and their stats."""

    move_from: np.ndarray
    move_to: np.ndarray
    captured: np.ndarray
    visits: np.ndarray
    prior: np.ndarray
    value_sum: np.ndarray  # from the view of the side to move at the root
    draw_sum: np.ndarray
    # Proven values from the view of the side to move at the root: +1 win, 0 draw, -1 loss, NaN unproven;
    # and the plies to the end with best play, the move itself included (-1 unproven).
    proven: np.ndarray
    proven_plies: np.ndarray

    def best(self, temperature: float = 0.0, rng: np.random.Generator | None = None) -> int:
        """The child to play (see choose_move)."""
        return choose_move(self.visits, self.prior, self.proven, self.proven_plies, temperature, rng)

    def move(self, k: int, position: Position) -> Move:
        """Child k as the legal Move of `position` (the root's position) it stands for."""
        key = (int(self.move_from[k]), int(self.move_to[k]), int(self.captured[k]))
        return moves_by_key(position)[key]


@dataclass
class StageTimes:
    """Wall time per stage of the search loop and what it did, for benchmarks and progress logs."""

    # Tree descent, the rules' checks of new nodes, the leaves' input planes, and the expansion of those
    # whose answer the evaluator's table held.
    select: float = 0.0
    evaluate: float = 0.0
    expand: float = 0.0  # expansion and backup
    leaves: int = 0  # positions sent to the evaluator
    terminal_visits: int = 0  # simulations that ended on a terminal node (no network call)
    recalled: int = 0  # simulations that ended on a leaf the evaluator's table answered (no network call)
    batches: int = 0

    @property
    def simulations(self) -> int:
        return self.leaves + self.terminal_visits + self.recalled

    @property
    def tree_seconds(self) -> float:
        return self.select + self.expand


class LeafBatch:
    """The leaves of one network call: tree, node and repetition count of each, and their input planes."""

    def __init__(self, size: int) -> None:
        self.game = np.zeros(size, dtype=np.int64)
        self.node = np.zeros(size, dtype=np.int64)
        self.reps = np.zeros(size, dtype=np.int64)
        self.planes = np.zeros((size, NUM_PLANES, 8, 8), dtype=np.float32)
        self.n = 0
        self.answer: Future | None = None  # the network's answer, while the call is in flight


class RootHalving(Protocol):
    """A root searched by sequential halving (selfplay.tree_search.gumbel.SequentialHalving): each root child's visit
    limit in the current phase and its tie-break score, which the kernel reads."""

    limit: np.ndarray
    score: np.ndarray

    def due(self, visits: np.ndarray) -> bool: ...

    def advance(self, children: RootChildren, prior: np.ndarray) -> bool: ...

    def choice(self, children: RootChildren, prior: np.ndarray) -> int: ...


class HalvingSpec(Protocol):
    """How to begin a RootHalving once the root's priors are known (selfplay.tree_search.gumbel.GumbelRoot)."""

    def begin(self, prior: np.ndarray, simulations: int) -> RootHalving: ...


class BatchedSearch:
    """G search trees in lockstep; see the module docstring."""

    def __init__(self, games: int, config: SearchConfig | None = None, rules: RulesConfig | None = None, *,
                 simulations: int = 0, capacity: int = 0, egdb: Egdb | None = None):
        """`simulations`: the largest search it will run (sizes the node pools), unless `capacity` says
        how many nodes a tree holds. With `egdb` and `config.database_leaves`, positions it holds are exact
        leaves below the root."""
        self.config = config or SearchConfig()
        self.config.validate()
        if not (simulations or capacity):
            raise ValueError("BatchedSearch needs the largest search it will run (simulations) or a capacity")
        self.rules = rules or RulesConfig()
        self.games = games
        self.forest = mcts.new_forest(games, capacity or self.config.nodes_per_tree(simulations),
                                      self.rules.no_progress_plies + 2)
        self.active = np.zeros(games, dtype=np.bool_)
        self._batch = LeafBatch(games * self.config.leaves_per_tree)
        # The plies left of leaves from an evaluator not asked for them (read only, so shared by every call).
        self._no_plies = np.zeros(len(self._batch.node), dtype=np.float32)
        self._in_flight: deque[LeafBatch] = deque()  # overlapped network calls, oldest first
        self._idle: list[LeafBatch] = []
        self._pool: ThreadPoolExecutor | None = None  # the threads of the calls in flight, made on first use
        self._moves = movegen.new_move_buffer()
        self._no_answers = new_answer_arrays(0)
        self._actions = np.zeros(movegen.MAX_MOVES, dtype=np.int64)
        self._priors = np.zeros(movegen.MAX_MOVES, dtype=np.float64)
        self._new_index = np.zeros(self.forest.links.shape[1], dtype=np.int32)
        self._noise: dict[int, RootNoise] = {}
        # The network's priors at a root before Dirichlet noise was mixed into them (network_prior).
        self._clean_prior: dict[int, np.ndarray] = {}
        self._tables = egdb.tables if egdb is not None and self.config.database_leaves else no_tables()
        # Roots searched by sequential halving: their specs until the root is expanded, then their state,
        # kept after the search for `halving_choice`; the kernel reads the flags, limits and scores.
        self._halving_spec: dict[int, HalvingSpec] = {}
        self._halving: dict[int, RootHalving] = {}
        self._halving_on = np.zeros(games, dtype=np.bool_)
        self._root_limit = np.zeros((games, movegen.MAX_MOVES), dtype=np.float32)
        self._root_score = np.zeros((games, movegen.MAX_MOVES), dtype=np.float32)
        self.times = StageTimes()

    # -- tree set-up ----------------------------------------------------------------------------------
    def set_root(self, g: int, game: Game) -> None:
        """Start tree g afresh at the game's current position."""
        pos = game.position
        self._clean_prior.pop(g, None)
        self._halving.pop(g, None)
        mcts.reset_tree(self.forest, g, pos.black, pos.white, pos.kings, pos.black_to_move, game.no_progress[-1])
        self._set_history(g, game)

    def grow(self, capacity: int) -> None:
        """Give every tree a pool of `capacity` nodes (more than now), its nodes kept and its full flag
        cleared: a search that filled its pool goes on (its leaf that found no room is searched again). A
        MemoryError leaves the pool as it was: the new pool and its index array are both made before either
        replaces the old (a pool larger than its index array would have the kernels write past that array)."""
        old = self.forest
        if capacity <= old.links.shape[1]:
            raise ValueError(f"a pool of {old.links.shape[1]} nodes cannot grow to {capacity}")
        new = mcts.new_forest(self.games, capacity, old.history.shape[1])
        new_index = np.zeros(capacity, dtype=np.int32)
        for g in range(self.games):  # only each tree's nodes in use: the new pool's other pages stay untouched
            used = int(old.trees[g, mcts.USED])
            new.stats[g, :used], new.links[g, :used], new.nodes[g, :used] = (
                old.stats[g, :used], old.links[g, :used], old.nodes[g, :used])
        new.trees[:], new.history[:] = old.trees, old.history
        new.trees[:, mcts.FULL] = 0
        self.forest, self._new_index = new, new_index

    def node_bytes(self) -> int:
        """Memory a node of the pools takes (what a pool of n nodes costs is n times this, per tree)."""
        return sum(int(a.strides[1]) for a in (self.forest.stats, self.forest.links, self.forest.nodes))

    def _set_history(self, g: int, game: Game) -> None:
        # Positions since the last irreversible move, before the current one: all a repetition can match.
        window = game.no_progress[-1]
        earlier = game.positions[len(game.positions) - 1 - window: -1]
        self.forest.trees[g, mcts.HISTORY_LEN] = len(earlier)
        for i, p in enumerate(earlier):
            self.forest.history[g, i, :3] = p.black, p.white, p.kings  # mcts.BLACK, WHITE, KINGS

    def play(self, g: int, move: Move, game: Game) -> int:
        """Advance tree g past `move`, which `game` has just played; returns the nodes kept (0 = fresh)."""
        return self.follow(g, [move], game)

    def follow(self, g: int, moves: Sequence[Move], game: Game) -> int:
        """Advance tree g past `moves`, the last moves `game` has played, keeping the subtree they reach
        (a fresh root where the tree does not hold it); returns the nodes kept (0 = fresh)."""
        kept = 0
        for move in moves:
            child = mcts.find_child(self.forest, g, move.from_square - 1, move.to_square - 1, move.captured)
            if child < 0 or not self.config.reuse_tree:
                self.set_root(g, game)
                return 0
            kept = mcts.advance_root(self.forest, g, child, self._new_index)
            self._clean_prior.pop(g, None)
        if self.forest.links[g, 0, mcts.STATE] == mcts.TERMINAL:
            # A database leaf (the game is not over, so not the rules'): the root's moves are to be searched.
            self.set_root(g, game)
            return 0
        self._set_history(g, game)
        return int(kept)

    # -- searching -----------------------------------------------------------------------------------
    def start(self, g: int, simulations: int, noise: RootNoise | None = None,
              halving: HalvingSpec | None = None) -> None:
        """Begin a search of tree g that ends when its root has `simulations` visits (reused ones count).

        With `noise`, Dirichlet noise is mixed into the root priors (as soon as the root is expanded). With
        `halving`, the root is searched by sequential halving (selfplay.tree_search.gumbel), PUCT below it."""
        self.forest.trees[g, mcts.TARGET] = simulations
        self.active[g] = True
        self._noise.pop(g, None)
        self._halving.pop(g, None)
        self._halving_spec.pop(g, None)
        self._halving_on[g] = False
        if noise is not None:
            if self.forest.links[g, 0, mcts.STATE] == mcts.EXPANDED:
                self._mix_noise(g, noise)
            else:
                self._noise[g] = noise
        if halving is not None:
            self._halving_spec[g] = halving
            if self.forest.links[g, 0, mcts.STATE] == mcts.EXPANDED:
                self._begin_halving(g)

    def _begin_halving(self, g: int) -> None:
        spec = self._halving_spec.pop(g)
        added = int(self.forest.trees[g, mcts.TARGET] - self.forest.stats[g, 0, mcts.VISITS])
        self._halving[g] = spec.begin(self.network_prior(g), max(added, 1))
        self._halving_on[g] = True
        self._set_limits(g)

    def _set_limits(self, g: int) -> None:
        halving = self._halving[g]
        n = len(halving.limit)
        self._root_limit[g, :n] = halving.limit
        self._root_score[g, :n] = halving.score

    def halving_choice(self, g: int) -> int | None:
        """The move sequential halving chose at tree g's root (root_children's index), None where the search
        was not one (or its root was never expanded)."""
        halving = self._halving.get(g)
        return None if halving is None else halving.choice(self.root_children(g), self.network_prior(g))

    def _mix_noise(self, g: int, noise: RootNoise) -> None:
        first, n = (int(x) for x in self.forest.links[g, 0, [mcts.FIRST_CHILD, mcts.N_CHILDREN]])
        self._clean_prior.setdefault(g, self.forest.stats[g, first:first + n, mcts.PRIOR].copy())
        mcts.mix_root_noise(self.forest, g, noise.rng.dirichlet(np.full(n, noise.alpha)), noise.fraction)

    def stop(self, g: int) -> None:
        self.active[g] = False
        self._noise.pop(g, None)
        self._halving_spec.pop(g, None)
        self._halving_on[g] = False

    def complete(self) -> np.ndarray:
        """Active trees whose search is done (target reached or pool full)."""
        f = self.forest
        return self.active & ((f.stats[:, 0, mcts.VISITS] >= f.trees[:, mcts.TARGET]) | (f.trees[:, mcts.FULL] != 0)
                              | (f.stats[:, 0, mcts.PROVEN_PLIES] >= 0))

    def step(self, evaluator: PositionEvaluator) -> int:
        """One select -> evaluate -> expand/backup round over all active trees; returns the leaves evaluated.
        With config.threads > 1 the calls overlap (_step_overlapped): `drain` before the tree is read or
        moved. A CachedEvaluator's remembered answers expand their leaves during the selection."""
        if self.config.threads > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.config.threads, thread_name_prefix="network")
            return self._step_overlapped(evaluator, self._pool, self.config.threads)
        batch = self._batch
        if not self._select(batch, evaluator):
            return 0
        t0 = time.perf_counter()
        answer = self._evaluate(evaluator, batch.planes[:batch.n])
        self.times.evaluate += time.perf_counter() - t0
        self._back_up(batch, *answer)
        return batch.n

    def _weighs_plies_left(self, evaluator: PositionEvaluator) -> bool:
        """Whether this search's moves-left utility is on: a weight, and an evaluator with the head."""
        return self.config.moves_left_weight > 0.0 and gives_plies_left(evaluator)

    def _evaluate(self, evaluator: PositionEvaluator, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The evaluator's (logits, wdl, plies left) for `planes`: the plies from its `predict` where the
        search weighs them, else 0 (`evaluate` alone: nothing asked of an evaluator that has no use)."""
        if self._weighs_plies_left(evaluator):
            logits, wdl, plies = evaluator.predict(planes)
            if plies is not None:
                return logits, wdl, np.ascontiguousarray(plies, dtype=np.float32)
        else:
            logits, wdl = evaluator.evaluate(planes)
        return logits, wdl, self._no_plies[:len(planes)]

    def _step_overlapped(self, evaluator: PositionEvaluator, pool: Executor, calls: int) -> int:
        """`step` with up to `calls` network calls in flight in `pool`'s threads: the tree selects the next
        leaves (virtual loss and pending leaves steering it away from those in flight) while the network
        judges the last ones. Backs up the oldest call; returns its leaves (0: none in flight, none to
        select)."""
        while len(self._in_flight) < calls:
            batch = self._idle.pop() if self._idle else LeafBatch(len(self._batch.node))
            if not self._select(batch, evaluator):
                self._idle.append(batch)
                break
            batch.answer = pool.submit(self._evaluate, evaluator, batch.planes[:batch.n])
            self._in_flight.append(batch)
        if not self._in_flight:
            return 0
        batch = self._in_flight.popleft()
        t0 = time.perf_counter()
        answer = batch.answer.result()
        self.times.evaluate += time.perf_counter() - t0
        self._back_up(batch, *answer)
        self._idle.append(batch)
        return batch.n

    def drain(self) -> None:
        """Back up every network call still in flight (with config.threads > 1)."""
        while self._in_flight:
            batch = self._in_flight.popleft()
            self._back_up(batch, *batch.answer.result())
            self._idle.append(batch)

    def abandon(self) -> None:
        """After a step that failed: forget the network calls in flight and stop every search. Their leaves
        are never backed up, so a tree must be set afresh (set_root) before it is searched again."""
        self._in_flight.clear()
        for g in np.flatnonzero(self.active):
            self.stop(int(g))

    def _select(self, batch: LeafBatch, evaluator: PositionEvaluator) -> int:
        """Select leaves in the active trees into `batch` with their input planes; returns how many. The
        leaves `evaluator`'s table answers (a CachedEvaluator's) are expanded on the way, not selected."""
        c = self.config
        moves_left_weight = c.moves_left_weight if self._weighs_plies_left(evaluator) else 0.0
        t0 = time.perf_counter()
        for g in np.flatnonzero(self._halving_on):
            halving = self._halving[g]
            first, n = self.forest.links[g, 0, mcts.FIRST_CHILD], self.forest.links[g, 0, mcts.N_CHILDREN]
            if halving.due(self.forest.stats[g, first:first + n, mcts.VISITS]):
                halving.advance(self.root_children(g), self.network_prior(g))
                self._set_limits(g)
        table = evaluator.table if isinstance(evaluator, CachedEvaluator) else None
        with table.lock if table is not None else contextlib.nullcontext():
            batch.n, n_terminal, n_recalled = mcts.select_leaves(
                self.forest, self.active, c.leaves_per_tree, c.c_puct, c.c_puct_growth, c.c_puct_base,
                c.fpu_reduction, c.fpu_reduction_root, c.virtual_loss, c.resolve_captures,
                self.rules.repetitions_for_draw, self.rules.no_progress_plies, batch.game, batch.node, batch.reps,
                batch.planes, self._moves, self._tables, self._halving_on, self._root_limit, self._root_score,
                table.arrays if table is not None else self._no_answers, self._actions, self._priors,
                c.policy_temperature, c.draw_value, c.opponent_draw_value, moves_left_weight, c.moves_left_slope,
                c.moves_left_threshold,
            )
            if table is not None:
                table.hits += n_recalled
        self.times.select += time.perf_counter() - t0
        self.times.terminal_visits += n_terminal
        self.times.recalled += n_recalled
        return batch.n

    def _back_up(self, batch: LeafBatch, logits: np.ndarray, wdl: np.ndarray, plies: np.ndarray) -> None:
        t0 = time.perf_counter()
        mcts.expand_and_backup(self.forest, batch.n, batch.game, batch.node, logits, wdl, plies,
                               self._moves, self._actions, self._priors, self.config.policy_temperature)
        for g in list(self._noise):
            if self.forest.links[g, 0, mcts.STATE] == mcts.EXPANDED:
                self._mix_noise(g, self._noise.pop(g))
        for g in list(self._halving_spec):
            if self.forest.links[g, 0, mcts.STATE] == mcts.EXPANDED:
                self._begin_halving(g)
        self.times.expand += time.perf_counter() - t0
        self.times.leaves += batch.n
        self.times.batches += 1

    def run(self, evaluator: PositionEvaluator) -> None:
        """Step until every active tree's search is complete."""
        while self.step(evaluator):
            pass

    # -- reading results ------------------------------------------------------------------------------
    def root_children(self, g: int) -> RootChildren:
        f = self.forest
        first, n, state = (int(x) for x in f.links[g, 0, [mcts.FIRST_CHILD, mcts.N_CHILDREN, mcts.STATE]])
        sl = slice(first, first + n) if state == mcts.EXPANDED else slice(0, 0)
        stats, nodes = f.stats[g, sl], f.nodes[g, sl]
        proven = stats[:, mcts.PROVEN_PLIES] >= 0
        return RootChildren(
            nodes[:, mcts.MOVE_FROM].copy(), nodes[:, mcts.MOVE_TO].copy(), nodes[:, mcts.CAPTURED].copy(),
            stats[:, mcts.VISITS].astype(np.int64), stats[:, mcts.PRIOR].copy(), stats[:, mcts.VALUE_SUM].copy(),
            stats[:, mcts.DRAW_SUM].copy(),
            np.where(proven, -stats[:, mcts.PROVEN_VALUE], np.nan),  # a child's value is for its side to move
            np.where(proven, stats[:, mcts.PROVEN_PLIES] + 1, -1).astype(np.int64),  # the move itself counts
        )

    def network_prior(self, g: int) -> np.ndarray:
        """The network's priors of the root's children (root_children's order), without the Dirichlet noise
        that root_children's priors may carry."""
        if g in self._clean_prior:
            return self._clean_prior[g].copy()
        return self.root_children(g).prior

    def root_proven(self, g: int) -> tuple[int, int] | None:
        """The root's proven value for its side to move (+1, 0, -1) and plies to the end, or None."""
        root = self.forest.stats[g, 0]
        return None if root[mcts.PROVEN_PLIES] < 0 else (int(root[mcts.PROVEN_VALUE]), int(root[mcts.PROVEN_PLIES]))

    def root_value(self, g: int) -> float:
        """Value of the root for its side to move, in [-1, 1]: the proven one, else the search's mean (0
        before any visit)."""
        root = self.forest.stats[g, 0]
        if root[mcts.PROVEN_PLIES] >= 0:
            return float(root[mcts.PROVEN_VALUE])
        n = root[mcts.VISITS]
        return float(-root[mcts.VALUE_SUM] / n) if n else 0.0

    def root_wdl(self, g: int) -> tuple[float, float, float]:
        """Win/draw/loss of the root for its side to move: certain when proven, else the search's mean."""
        root = self.forest.stats[g, 0]
        if root[mcts.PROVEN_PLIES] >= 0:
            return proven_wdl(root[mcts.PROVEN_VALUE])
        return wdl_of(-root[mcts.VALUE_SUM], root[mcts.DRAW_SUM], root[mcts.VISITS])

    def root_plies_left(self, g: int, evaluator: PositionEvaluator) -> float | None:
        """Plies to the end of the game from the root, where the search (run with `evaluator`) knows them: a
        proven win or loss's exact plies, else the mean plies backed up when the search weighed them; None
        otherwise (without the network's plies the sum counts only the tree's depth), and for a proven
        draw, whose plies count to the draw the search saw rather than to the game's end."""
        root = self.forest.stats[g, 0]
        if root[mcts.PROVEN_PLIES] >= 0:
            return float(root[mcts.PROVEN_PLIES]) if root[mcts.PROVEN_VALUE] != 0 else None
        n = root[mcts.VISITS]
        return float(root[mcts.PLIES_SUM] / n) if n and self._weighs_plies_left(evaluator) else None

    def root_visits(self, g: int) -> int:
        return int(self.forest.stats[g, 0, mcts.VISITS])


def proven_wdl(value: float) -> tuple[float, float, float]:
    """The win/draw/loss of a proven value (+1, 0, -1)."""
    return float(value > 0), float(value == 0), float(value < 0)


def wdl_of(value_sum: float, draw_sum: float, visits: int) -> tuple[float, float, float]:
    """(win, draw, loss) from summed values and draw probabilities: q = win - loss, d = draw."""
    q, d = value_sum / visits, draw_sum / visits
    win = max(0.0, (1.0 + q - d) / 2)
    loss = max(0.0, (1.0 - q - d) / 2)
    return float(win), float(d), float(loss)


def visit_policy(children: RootChildren, black_to_move: bool) -> tuple[np.ndarray, np.ndarray]:
    """Visit shares per perspective action index (moves sharing an action add up): the policy target."""
    return per_action(children, black_to_move, children.visits / children.visits.sum())


def per_action(children: RootChildren, black_to_move: bool, shares: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A policy over the root's children (`shares`, one per child) as (perspective action indices, shares):
    the form a policy target is stored in, moves that share an action adding up."""
    by_action: dict[int, float] = {}
    for frm, to, share in zip(children.move_from, children.move_to, shares):
        a = int(action_index(int(frm), int(to), bool(black_to_move)))
        by_action[a] = by_action.get(a, 0.0) + float(share)
    actions = np.array(list(by_action), dtype=np.int16)
    return actions, np.array([by_action[int(a)] for a in actions], dtype=np.float32)


def move_order(visits: np.ndarray, prior: np.ndarray, proven: np.ndarray, proven_plies: np.ndarray) -> np.ndarray:
    """A node's children, best first, from their statistics for the player choosing among them (proven
    values +1, 0, -1, NaN unproven): proven wins, fastest first; then the moves not proven lost, most
    visited first (ties by prior); then proven losses, longest resistance first."""
    group = np.where(proven == 1, 0, np.where(proven == -1, 2, 1))
    within = np.where(group == 0, proven_plies, np.where(group == 2, -proven_plies, -visits))
    return np.lexsort((-prior, within, group))


def choose_move(visits: np.ndarray, prior: np.ndarray, proven: np.ndarray, proven_plies: np.ndarray,
                temperature: float = 0.0, rng: np.random.Generator | None = None) -> int:
    """Which root child to play: the first of move_order; at a temperature, unless a win is proven, a
    move sampled ~ visits^(1/temperature) among those not proven lost."""
    order = move_order(visits, prior, proven, proven_plies)
    safe = np.flatnonzero(~(proven == -1))
    if temperature <= 0 or rng is None or proven[order[0]] == 1 or visits[safe].sum() == 0:
        return int(order[0])
    return int(safe[sample_by_visits(visits[safe], temperature, rng)])


def sample_by_visits(visits: np.ndarray, temperature: float, rng: np.random.Generator | None) -> int:
    """Index of the chosen child: the most visited (first on ties) at temperature 0, else sampled
    with probability proportional to visits^(1/temperature)."""
    if temperature <= 0 or rng is None or visits.sum() == 0:
        return int(np.argmax(visits))
    weights = visits.astype(np.float64) ** (1.0 / temperature)
    return int(rng.choice(len(visits), p=weights / weights.sum()))


def moves_by_key(position: Position) -> dict[tuple[int, int, int], Move]:
    return {(m.from_square - 1, m.to_square - 1, m.captured): m for m in position.legal_moves()}


# Whether this process has run every search kernel once (warm_up).
_warmed_up = False
# A warm-up that takes longer than this is compiling, and says so.
WARM_UP_NOTICE_SECONDS = 1.0


def warm_up(evaluator: PositionEvaluator, config: SearchConfig | None = None, rules: RulesConfig | None = None,
            egdb: Egdb | None = None) -> None:
    """Run every search kernel once on a throwaway tree, and the evaluator on its leaves, before any clock
    starts: numba compiles the kernels on their first call (or loads them from its cache), which after an
    install takes longer than a whole move's time, and a search on the clock must spend its time searching.
    Once per process; a warm-up that takes more than a second says so on stderr while it runs."""
    global _warmed_up
    if _warmed_up:
        return
    notice = threading.Timer(WARM_UP_NOTICE_SECONDS, lambda: print(
        "preparing the search: compiling its kernels (once after an install, up to half a minute) ...",
        file=sys.stderr, flush=True))
    notice.daemon = True
    notice.start()
    try:
        game = Game(rules=rules or RulesConfig())
        search = BatchedSearch(1, config, game.rules, simulations=64, egdb=egdb)
        search.set_root(0, game)
        search.start(0, 32)
        search.run(evaluator)
        move = game.legal_moves()[0]
        game.play(move)
        search.follow(0, [move], game)  # the re-rooting kernels of a tree kept between moves
        search.start(0, 64)
        search.run(evaluator)
    finally:
        notice.cancel()
    _warmed_up = True
