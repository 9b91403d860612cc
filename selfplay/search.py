"""Search settings, the batched search driver, and the single-game analysis API.

`BatchedSearch` runs one tree per game in flight (kernels in `selfplay.mcts`): every `step` selects leaves
in all active trees, sends their planes to the evaluator in one batch and backs the answers up. Games are
independent: each starts its own search (`start`) with its own visit target, and is read out and advanced
(`play`, which keeps the played move's subtree) when `complete` says so.

`analyse(game, evaluator, simulations)` is the one-position face of the same search, for play and
analysis: no noise, deterministic.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from selfplay import mcts
from selfplay.evaluators import PositionEvaluator
from zero import movegen
from zero.encoding import NUM_PLANES, action_index
from zero.game import Game, Move, Position, RulesConfig
from zero.players import PLAYER_FACTORIES, Player, PlayerSpecError


@dataclass
class SearchConfig:
    """PUCT search and self-play move choice. Defaults are starting points for English checkers
    (about 8 legal moves a position), not tuned values."""

    full_simulations: int = 400  # root visits of a full search (its visit counts are policy targets)
    fast_simulations: int = 64  # root visits of a cheap search (plays the move, no policy target)
    full_search_prob: float = 0.25  # playout-cap randomization: share of moves that get a full search
    c_puct: float = 1.5  # exploration weight in PUCT
    fpu_reduction: float = 0.25  # unvisited child's Q = parent Q - this * sqrt(visited prior mass)
    fpu_reduction_root: float = 0.0  # the same at the root, where noise should be free to act
    dirichlet_alpha: float = 1.0  # alpha x legal moves ~ 8-10, the ratio AlphaZero used in chess and Go
    dirichlet_fraction: float = 0.25  # share of the root prior replaced by noise (full searches)
    noise_in_fast_searches: bool = False  # fast searches give no target, so noise only weakens their play
    virtual_loss: float = 1.0  # each in-flight visit counts as a loss of this size while it is pending
    leaves_per_tree: int = 2  # leaves per tree per network batch (virtual loss spreads them)
    temperature: float = 1.0  # move sampling ~ visits^(1/T) for the opening plies
    temperature_plies: int = 16  # plies played with `temperature`; later moves use final_temperature
    final_temperature: float = 0.0  # 0 = always the most visited move
    resign_threshold: float = -0.9  # resign when the root value for the side to move falls below this
    resign_min_ply: int = 20  # no resignation before this ply
    resign_playthrough: float = 0.1  # share of games that never resign, to measure wrong resignations
    tree_capacity: int = 0  # nodes per tree (a full tree ends its search early); 0 = nodes_per_tree()
    reuse_tree: bool = True  # keep the played move's subtree for the next search

    def validate(self) -> None:
        if self.full_simulations < 1 or self.fast_simulations < 1:
            raise ValueError("simulations must be at least 1")
        if not 0.0 <= self.full_search_prob <= 1.0 or not 0.0 <= self.resign_playthrough <= 1.0:
            raise ValueError("probabilities must lie in [0, 1]")
        if self.leaves_per_tree < 1:
            raise ValueError("leaves_per_tree must be at least 1")

    def nodes_per_tree(self) -> int:
        """Pool size: tree_capacity, or by default room for a full search (about 8 children per
        expansion) plus as much again for the subtree kept from the previous move."""
        return self.tree_capacity or 16 * max(self.full_simulations, self.fast_simulations) + movegen.MAX_MOVES + 1

    def temperature_at(self, ply: int) -> float:
        return self.temperature if ply < self.temperature_plies else self.final_temperature


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

    def move(self, k: int, position: Position) -> Move:
        """Child k as the legal Move of `position` (the root's position) it stands for."""
        key = (int(self.move_from[k]), int(self.move_to[k]), int(self.captured[k]))
        return _moves_by_key(position)[key]


@dataclass
class StageTimes:
    """Wall time per stage of the search loop and what it did, for benchmarks and progress logs."""

    select: float = 0.0  # tree descent and the rules' checks of new nodes
    encode: float = 0.0  # network input planes of the leaves
    evaluate: float = 0.0
    expand: float = 0.0  # expansion and backup
    leaves: int = 0  # positions sent to the evaluator
    terminal_visits: int = 0  # simulations that ended on a terminal node (no network call)
    batches: int = 0

    @property
    def simulations(self) -> int:
        return self.leaves + self.terminal_visits

    @property
    def tree_seconds(self) -> float:
        return self.select + self.expand


class BatchedSearch:
    """G search trees in lockstep; see the module docstring."""

    def __init__(self, games: int, config: SearchConfig | None = None, rules: RulesConfig | None = None,
                 capacity: int | None = None):
        self.config = config or SearchConfig()
        self.config.validate()
        self.rules = rules or RulesConfig()
        self.games = games
        self.forest = mcts.new_forest(games, capacity or self.config.nodes_per_tree(),
                                      self.rules.no_progress_plies + 2)
        self.active = np.zeros(games, dtype=np.bool_)
        batch = games * self.config.leaves_per_tree
        self._leaf_game = np.zeros(batch, dtype=np.int64)
        self._leaf_node = np.zeros(batch, dtype=np.int64)
        self._leaf_reps = np.zeros(batch, dtype=np.int64)
        self._planes = np.zeros((batch, NUM_PLANES, 8, 8), dtype=np.float32)
        self._moves = movegen.new_move_buffer()
        self._actions = np.zeros(movegen.MAX_MOVES, dtype=np.int64)
        self._priors = np.zeros(movegen.MAX_MOVES, dtype=np.float64)
        self._new_index = np.zeros(self.forest.links.shape[1], dtype=np.int32)
        self._noise: dict[int, np.random.Generator] = {}
        self.times = StageTimes()

    # -- tree set-up ----------------------------------------------------------------------------------
    def set_root(self, g: int, game: Game) -> None:
        """Start tree g afresh at the game's current position."""
        pos = game.position
        mcts.reset_tree(self.forest, g, pos.black, pos.white, pos.kings, pos.black_to_move, game.no_progress[-1])
        self._set_history(g, game)

    def _set_history(self, g: int, game: Game) -> None:
        # Positions since the last irreversible move, before the current one: all a repetition can match.
        window = game.no_progress[-1]
        earlier = game.positions[len(game.positions) - 1 - window: -1]
        self.forest.trees[g, mcts.HISTORY_LEN] = len(earlier)
        for i, p in enumerate(earlier):
            self.forest.history[g, i, :3] = p.black, p.white, p.kings  # mcts.BLACK, WHITE, KINGS

    def play(self, g: int, move: Move, game: Game) -> int:
        """Advance tree g past `move`, which `game` has just played; returns the nodes kept (0 = fresh)."""
        child = mcts.find_child(self.forest, g, move.from_square - 1, move.to_square - 1, move.captured)
        if child < 0 or not self.config.reuse_tree:
            self.set_root(g, game)
            return 0
        kept = mcts.advance_root(self.forest, g, child, self._new_index)
        self._set_history(g, game)
        return int(kept)

    # -- searching -----------------------------------------------------------------------------------
    def start(self, g: int, simulations: int, noise: np.random.Generator | None = None) -> None:
        """Begin a search of tree g that ends when its root has `simulations` visits (reused ones count).

        With `noise`, Dirichlet noise from that generator is mixed into the root priors (as soon as the
        root is expanded)."""
        self.forest.trees[g, mcts.TARGET] = simulations
        self.active[g] = True
        self._noise.pop(g, None)
        if noise is not None:
            if self.forest.links[g, 0, mcts.STATE] == mcts.EXPANDED:
                self._mix_noise(g, noise)
            else:
                self._noise[g] = noise

    def _mix_noise(self, g: int, rng: np.random.Generator) -> None:
        n = int(self.forest.links[g, 0, mcts.N_CHILDREN])
        noise = rng.dirichlet(np.full(n, self.config.dirichlet_alpha))
        mcts.mix_root_noise(self.forest, g, noise, self.config.dirichlet_fraction)

    def stop(self, g: int) -> None:
        self.active[g] = False
        self._noise.pop(g, None)

    def complete(self) -> np.ndarray:
        """Active trees whose search is done (target reached or pool full)."""
        f = self.forest
        return self.active & ((f.stats[:, 0, mcts.VISITS] >= f.trees[:, mcts.TARGET]) | (f.trees[:, mcts.FULL] != 0))

    def step(self, evaluator: PositionEvaluator) -> int:
        """One select -> evaluate -> expand/backup round over all active trees; returns the leaves evaluated."""
        c = self.config
        t0 = time.perf_counter()
        n, n_terminal = mcts.select_leaves(
            self.forest, self.active, c.leaves_per_tree, c.c_puct, c.fpu_reduction, c.fpu_reduction_root,
            c.virtual_loss, self.rules.repetitions_for_draw, self.rules.no_progress_plies,
            self._leaf_game, self._leaf_node, self._leaf_reps, self._moves,
        )
        t1 = time.perf_counter()
        self.times.select += t1 - t0
        self.times.terminal_visits += n_terminal
        if n == 0:
            return 0
        mcts.encode_leaves(self.forest, n, self._leaf_game, self._leaf_node, self._leaf_reps, self._planes)
        t_encoded = time.perf_counter()
        self.times.encode += t_encoded - t1
        logits, wdl = evaluator.evaluate(self._planes[:n])
        t2 = time.perf_counter()
        mcts.expand_and_backup(self.forest, n, self._leaf_game, self._leaf_node, logits, wdl,
                               self._moves, self._actions, self._priors)
        for g in list(self._noise):
            if self.forest.links[g, 0, mcts.STATE] == mcts.EXPANDED:
                self._mix_noise(g, self._noise.pop(g))
        t3 = time.perf_counter()
        self.times.evaluate += t2 - t_encoded
        self.times.expand += t3 - t2
        self.times.leaves += n
        self.times.batches += 1
        return n

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
        return RootChildren(
            nodes[:, mcts.MOVE_FROM].copy(), nodes[:, mcts.MOVE_TO].copy(), nodes[:, mcts.CAPTURED].copy(),
            stats[:, mcts.VISITS].astype(np.int64), stats[:, mcts.PRIOR].copy(), stats[:, mcts.VALUE_SUM].copy(),
            stats[:, mcts.DRAW_SUM].copy(),
        )

    def root_value(self, g: int) -> float:
        """Search value of the root for its side to move, in [-1, 1] (0 before any visit)."""
        root = self.forest.stats[g, 0]
        n = root[mcts.VISITS]
        return float(-root[mcts.VALUE_SUM] / n) if n else 0.0

    def root_wdl(self, g: int) -> tuple[float, float, float]:
        root = self.forest.stats[g, 0]
        return _wdl(-root[mcts.VALUE_SUM], root[mcts.DRAW_SUM], root[mcts.VISITS])

    def root_visits(self, g: int) -> int:
        return int(self.forest.stats[g, 0, mcts.VISITS])


def _wdl(value_sum: float, draw_sum: float, visits: int) -> tuple[float, float, float]:
    """(win, draw, loss) from summed values and draw probabilities: q = win - loss, d = draw."""
    q, d = value_sum / visits, draw_sum / visits
    win = max(0.0, (1.0 + q - d) / 2)
    loss = max(0.0, (1.0 - q - d) / 2)
    return float(win), float(d), float(loss)


def visit_policy(children: RootChildren, black_to_move: bool) -> tuple[np.ndarray, np.ndarray]:
    """Visit shares per perspective action index (moves sharing an action add up): the policy target."""
    shares: dict[int, float] = {}
    total = children.visits.sum()
    for frm, to, n in zip(children.move_from, children.move_to, children.visits):
        a = int(action_index(int(frm), int(to), bool(black_to_move)))
        shares[a] = shares.get(a, 0.0) + float(n) / total
    actions = np.array(list(shares), dtype=np.int16)
    return actions, np.array([shares[int(a)] for a in actions], dtype=np.float32)


def sample_by_visits(visits: np.ndarray, temperature: float, rng: np.random.Generator | None) -> int:
    """Index of the chosen child: the most visited (first on ties) at temperature 0, else sampled
    with probability proportional to visits^(1/temperature)."""
    if temperature <= 0 or rng is None or visits.sum() == 0:
        return int(np.argmax(visits))
    weights = visits.astype(np.float64) ** (1.0 / temperature)
    return int(rng.choice(len(visits), p=weights / weights.sum()))


# -- analysis API --------------------------------------------------------------------------------------

@dataclass
class MoveStats:
    move: Move
    visits: int
    prior: float
    q: float  # mean search value for the player making the move, in [-1, 1]; 0.0 when unvisited
    wdl: tuple[float, float, float] | None  # win/draw/loss for the player making the move; None unvisited


@dataclass
class Analysis:
    moves: list[MoveStats]  # every legal move, most visited first
    pv: list[Move]  # principal variation: most visited child, repeatedly
    root_wdl: tuple[float, float, float]  # win/draw/loss for the side to move
    simulations: int  # root visits the search made
    root_value: float = 0.0  # win - loss for the side to move


def analyse(game: Game, evaluator: PositionEvaluator, simulations: int, config: SearchConfig | None = None,
            seed: int = 0) -> Analysis:
    """Search the game's current position with `simulations` root visits: no noise, deterministic.

    `seed` is accepted so callers can pass one; this search draws no random numbers. Raises ValueError
    for a finished game."""
    del seed
    if game.outcome is not None:
        raise ValueError(f"the game is over ({game.outcome.termination.value})")
    if simulations < 1:
        raise ValueError("simulations must be at least 1")
    config = config or SearchConfig()
    # Room for every expansion a search of this size can make (about 8 children each, 16 to be safe).
    capacity = max(config.tree_capacity, 16 * simulations + movegen.MAX_MOVES + 1)
    search = BatchedSearch(1, config, game.rules, capacity=capacity)
    search.set_root(0, game)
    search.start(0, simulations)
    search.run(evaluator)
    return analysis_of(search, game.position)


def _moves_by_key(position: Position) -> dict[tuple[int, int, int], Move]:
    return {(m.from_square - 1, m.to_square - 1, m.captured): m for m in position.legal_moves()}


def analysis_of(search: BatchedSearch, position: Position) -> Analysis:
    """The Analysis of tree 0 of a finished search whose root is `position`.

    Moves are ordered by visits, ties by prior, and the principal variation follows the same order at
    every node, so its first move is the one best_move plays."""
    f = search.forest
    by_key = _moves_by_key(position)
    ch = search.root_children(0)
    stats = []
    for k in range(len(ch.visits)):
        move = by_key[(int(ch.move_from[k]), int(ch.move_to[k]), int(ch.captured[k]))]
        n = int(ch.visits[k])
        q = float(ch.value_sum[k] / n) if n else 0.0
        wdl = _wdl(ch.value_sum[k], ch.draw_sum[k], n) if n else None
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
        move = _moves_by_key(pos)[(int(nd[mcts.MOVE_FROM]), int(nd[mcts.MOVE_TO]), int(nd[mcts.CAPTURED]))]
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


# -- player --------------------------------------------------------------------------------------------

class MctsPlayer:
    """zero.players.Player that searches every position (`simulations` root visits, no noise) and plays
    the most visited move, or samples at `temperature` > 0. A single legal move is played without search."""

    def __init__(self, evaluator: PositionEvaluator, simulations: int, config: SearchConfig | None = None,
                 temperature: float = 0.0, name: str | None = None, seed: int = 0) -> None:
        self.evaluator = evaluator
        self.simulations = simulations
        self.config = config
        self.temperature = temperature
        self.name = name or f"mcts:{simulations}"
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self.last_analysis: Analysis | None = None

    def reset(self, seed: int) -> None:
        self._rng = np.random.default_rng([self.seed, seed])

    def choose(self, game: Game) -> Move:
        legal = game.legal_moves()
        if len(legal) == 1:
            return legal[0]
        self.last_analysis = analyse(game, self.evaluator, self.simulations, self.config)
        return best_move(self.last_analysis, self.temperature, self._rng)


DEFAULT_PLAYER_SIMULATIONS = 200


def _mcts_factory(args: str, seed: int) -> Player:
    """'mcts', 'mcts:SIMS', 'mcts:PATH' or 'mcts:PATH:SIMS' (default: the shipped checkpoint, 200 visits),
    on the CPU."""
    from zero.checkpoint import DEFAULT_CHECKPOINT, CheckpointError
    from zero.inference import Evaluator

    path, _, sims = args.rpartition(":")
    if not sims.isdigit():
        path, sims = args, ""
    simulations = int(sims) if sims else DEFAULT_PLAYER_SIMULATIONS
    if simulations < 1:
        raise PlayerSpecError(f"mcts needs at least 1 simulation, got {args!r}")
    try:
        evaluator = Evaluator.from_checkpoint(path or DEFAULT_CHECKPOINT, device="cpu")
    except CheckpointError as exc:
        raise PlayerSpecError(str(exc)) from exc
    return MctsPlayer(evaluator, simulations, name=f"mcts:{path or 'default'}:{simulations}", seed=seed)


PLAYER_FACTORIES["mcts"] = _mcts_factory
