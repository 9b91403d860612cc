"""The alpha-beta player: the search of zero.alphabeta.search with one of its evaluations
(zero.alphabeta.evaluations), the classical one (zero.yardsticks.classical.ClassicalPlayer, a yardstick) or the
distilled network (zero.distilled), to a fixed depth or on the clock."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from zero.alphabeta import search as ab
from zero.alphabeta.evaluations import DistilledEvaluation, new_work
from zero.corpus.opening_book import OpeningBook
from zero.distilled.kernels import SCORE_UNITS
from zero.distilled.model import DistilledEval, load_eval as load_distilled
from zero.endgames.egdb import Egdb, no_tables
from zero.rules.game import Game, Move, Position
from zero.rules.player import MAX_TIMED_DEPTH, SearchingPlayer, player_rng
from zero.run.config import check_settings, setting

_UNLIMITED_NODES = 1 << 62
# The first depth an aspiration window narrows (Selectivity.aspiration): shallower iterations cost too little
# for a re-search to be saved, and their scores swing from one ply to the next.
ASPIRATION_DEPTH = 5


def repetitions(game: Game, legal: list[Move]) -> np.ndarray:
    """For each legal move (1 or 0): whether it leads back to a position of the game since its last
    irreversible move (capture or man move), with the same side to move."""
    window = game.no_progress[-1]
    earlier = {game.positions[-1 - back] for back in range(1, window + 1, 2)}
    pos = game.position
    return np.array([int(not pos.is_irreversible(m) and pos.play(m) in earlier) for m in legal], dtype=np.int64)


@dataclass(frozen=True)
class Selectivity:
    """What the search prunes beyond alpha-beta (zero.alphabeta.search). Off (`Selectivity.none()`),
    a fixed-depth search returns exactly the fixed-depth minimax score, as the calibrated classical yardstick
    and the tests need; on, it looks deeper in the same time and its score is no longer that minimax."""

    reductions: int = setting(2, low=0, high=4)  # plies a late quiet move is searched less deep (0: none)
    reduce_after: int = setting(2, low=1, high=64)  # moves of a node searched at full depth before reducing
    deeper_cuts: bool = True  # a table entry searched deeper than asked cuts too (else only at its own depth)
    # A leaf whose side to move is threatened with a capture is searched a ply deeper (at most
    # search.MOST_EXTENSIONS times a line): a static evaluation cannot see whether the threat is met.
    # Off: on, it played level at equal time (+5, -9 .. +18, 288 games at 0.1 s; benchmarks/RESULTS.md).
    threat_extensions: bool = False
    # Each iteration from ASPIRATION_DEPTH searches a window this wide (in the evaluation's units: thousandths of
    # a logit for the distilled one) either side of the last iteration's score, widened to the full window on
    # the side a score falls out of (0: the full window always). Exact either way: a bound is searched again.
    # Off: every width searched as many nodes to depth 12 or more (40: +27 %, 200: +3 %, 400: +2 %, 800: -2 %;
    # benchmarks/alphabeta_speed.py's 48 positions): the root's null windows already narrow it, and the score
    # swings from one ply to the next.
    aspiration: int = setting(0, low=0, high=100_000)
    # A quiet move that refuted the opponent's move is tried after the killers the next time that move is met.
    # Exact either way: it changes the order, not the minimax score. Off: level (+6 % nodes to depth 12, -1 %
    # to depth 10 without reductions).
    countermoves: bool = False
    # A capture that answers a capture, searched a ply deeper (within the same MOST_EXTENSIONS a line as the
    # threats'): an exchange's depth is spent past it rather than inside it.
    recapture_extensions: bool = False
    # A null-window node whose evaluation clears beta by this margin (the evaluation's units) is searched
    # search.VERIFY_PLIES shallower first and cut if that search clears beta too; else at full depth (0: never).
    # Off: 100 halved the nodes to depth 12 (1,524,939 against 3,256,358) and played level at equal time (-4,
    # -15 .. +8, 288 games at 0.1 s, 6-piece database both sides; benchmarks/RESULTS.md).
    verified_pruning: int = setting(0, low=0, high=100_000)

    def __post_init__(self) -> None:
        check_settings(self)

    @classmethod
    def none(cls) -> "Selectivity":
        return cls(reductions=0, deeper_cuts=False, aspiration=0, countermoves=False, recapture_extensions=False,
                   verified_pruning=0)


class AlphaBetaSearchPlayer(SearchingPlayer):
    """The alpha-beta search as a player, with one of its evaluations (zero.alphabeta.evaluations): to a fixed
    depth or on the clock (`seconds` a move), always by iterative deepening, each iteration searching the
    previous one's best move first (from the table).

    Ties between root moves are broken at random (seeded, reseeded by `reset` as the match runner does).
    A fixed-depth player starts every search with an empty table (a new generation of its entries), so its
    move is a function of the game (its position, and the positions since its last capture or man move,
    for the repetitions) and the seed, as a calibrated yardstick's must be; one on the clock
    keeps its table from move to move (every entry is exact for its depth, so keeping it is sound) and, as
    AlphaBetaPlayer on the clock, is as reproducible as the clock: each iteration may visit as many nodes as
    the time left allows at the rate measured so far, and the move is the best of the deepest iteration
    that finished a root move.

    egdb: an endgame database whose positions (neither side able to capture) are exact leaves; None for none.
    use_tt, use_ordering: switch the table and the move ordering off (tests: they change only the speed).
    selectivity: reductions and deeper table cuts (Selectivity; none unless given).
    """

    def __init__(self, kind: str, evaluation: NamedTuple, depth: int | None = None, seed: int = 0,
                 seconds: float | None = None, egdb: Egdb | None = None, tt_bits: int = 18, use_tt: bool = True,
                 use_ordering: bool = True, book: OpeningBook | None = None,
                 selectivity: Selectivity | None = None) -> None:
        """kind: the player's name before its depth or time ("classical", "distilled"); evaluation: what its
        search scores the quiet leaves with (ClassicalEvaluation, DistilledEvaluation). book: where it has the
        position, its move is played at once."""
        if (depth is None) == (seconds is None):
            raise ValueError(f"the {kind} player takes a depth or a time per move, not both")
        if depth is not None and not 1 <= depth <= ab.MAX_DEPTH:
            raise ValueError(f"{kind} depth must be 1 to {ab.MAX_DEPTH}, got {depth}")
        if seconds is not None and not 0 < seconds < float("inf"):
            raise ValueError(f"the {kind} player needs a positive time per move, got {seconds}")
        self.name = f"{kind}:{depth}" if depth is not None else f"{kind}:t{seconds:g}"
        self.depth = depth
        self.seconds = seconds
        self.seed = seed
        self._evaluation = evaluation
        self._work = new_work(evaluation, ab.MAX_PLY)
        self.egdb = egdb
        self.book = book
        self._tables = egdb.tables if egdb is not None else no_tables()
        self._rng = player_rng(seed, None)
        self._state = ab.new_state(tt_bits)
        counters = self._state["counters"]
        counters[ab.C_USE_TT] = int(use_tt)
        counters[ab.C_USE_ORDERING] = int(use_ordering)
        counters[ab.C_GENERATION] = 1
        self.selectivity = selectivity or Selectivity.none()
        counters[ab.C_REDUCTIONS] = self.selectivity.reductions
        counters[ab.C_REDUCE_AFTER] = self.selectivity.reduce_after
        counters[ab.C_DEEPER_CUTS] = int(self.selectivity.deeper_cuts)
        counters[ab.C_THREAT_EXTENSIONS] = int(self.selectivity.threat_extensions)
        counters[ab.C_COUNTERMOVES] = int(self.selectivity.countermoves)
        counters[ab.C_RECAPTURE_EXTENSIONS] = int(self.selectivity.recapture_extensions)
        counters[ab.C_VERIFY_MARGIN] = self.selectivity.verified_pruning
        self.last_score: int | None = None  # of the last searched move, for the side that moved
        self.last_nodes = 0
        self.last_depth = 0  # depth of the iteration the last move came from

    def choose(self, game: Game) -> Move:
        if self.book is not None and (move := self.book.move(game.position)) is not None:
            return move
        return super().choose(game)

    def reset(self, seed: int) -> None:
        self._rng = player_rng(self.seed, seed)

    def _iteration(self, pos: Position, depth: int, order: np.ndarray, max_nodes: int,
                   draws: np.ndarray | None = None, window: tuple[int, int] = (-ab.INFINITY, ab.INFINITY),
                   ) -> tuple[int, int, bool]:
        """One iteration of search_root within `window` at the root and `max_nodes` more nodes."""
        s = self._state
        counters = s["counters"]
        counters[ab.C_MAX_NODES] = min(counters[ab.C_NODES] + max_nodes, _UNLIMITED_NODES)
        counters[ab.C_ROOT_ALPHA], counters[ab.C_ROOT_BETA] = window
        if draws is None:
            draws = np.zeros(len(order), dtype=np.int64)
        score, row, complete = ab.search_root(
            pos.black, pos.white, pos.kings, pos.black_to_move, depth, order, draws, s["frames"], s["moves"],
            s["order"], s["rows"], s["tt"], s["killers"], s["history"], s["countermoves"], counters,
            self._evaluation, self._work, self._tables)
        return int(score), int(row), bool(complete)

    def _deepening(self, pos: Position, depth: int, order: np.ndarray, draws: np.ndarray, last: int | None,
                   node_budget: Callable[[], int | None]) -> tuple[int, int, bool]:
        """The iteration to `depth` (search_root), within an aspiration window around `last` (the previous
        iteration's score) when the selectivity asks for one, searched again with the failing side opened until
        the score falls inside. Returns (score, row, complete) as search_root; a row only where it is known
        better than the window's floor (an incomplete search's row that failed low is -1). node_budget(): the
        nodes the next search may visit, None when the time is up."""
        width = self.selectivity.aspiration
        alpha, beta = -ab.INFINITY, ab.INFINITY
        if width and depth >= ASPIRATION_DEPTH and last is not None and abs(last) < ab.WIN_THRESHOLD:
            alpha, beta = last - width, last + width
        while True:
            budget = node_budget()
            if budget is None:
                return 0, -1, False
            score, row, complete = self._iteration(pos, depth, order, budget, draws, (alpha, beta))
            if score <= alpha:  # every root move failed low: its row is not known best
                if not complete:
                    return score, -1, False
                alpha = -ab.INFINITY
            elif score >= beta:  # a move beat the window (a cut, which completes the iteration): a bound
                beta = ab.INFINITY
            else:
                return score, row, complete

    def search(self, game: Game | Position) -> tuple[Move, int, int]:
        """(best move, its score for the side to move, nodes visited). Given a Game, a move back to a position
        the game has been in (since its last capture or man move) scores as a draw: a side ahead avoids the
        repetitions that would draw the game, a side behind seeks them."""
        pos = game.position if isinstance(game, Game) else game
        legal = pos.legal_moves()
        if not legal:
            raise ValueError(f"no legal move in {pos}")
        draws = repetitions(game, legal) if isinstance(game, Game) else np.zeros(len(legal), dtype=np.int64)
        s = self._state
        counters = s["counters"]
        counters[ab.C_NODES] = 0
        s["killers"].fill(-1)
        s["countermoves"].fill(-1)
        s["history"] >>= 1
        if self.seconds is None:
            counters[ab.C_GENERATION] += 1  # an empty table: the move depends on the position and seed alone
        order = self._rng.permutation(len(legal)).astype(np.int64)
        start = time.perf_counter()
        deadline = start + (self.seconds or 0.0)
        best_row, best_score = -1, 0

        def node_budget() -> int | None:
            if self.seconds is None or best_row < 0:
                return _UNLIMITED_NODES
            # The first iteration always finishes, so that there is a move; later ones stop on the node budget
            # the time left buys at the rate measured so far.
            now = time.perf_counter()
            if now >= deadline:
                return None
            return max(1, int((deadline - now) * counters[ab.C_NODES] / max(now - start, 1e-6)))

        for depth in range(1, (self.depth or MAX_TIMED_DEPTH) + 1):
            score, row, complete = self._deepening(pos, depth, order, draws, best_score if best_row >= 0 else None,
                                                   node_budget)
            if row >= 0:
                best_row, best_score, self.last_depth = row, score, depth
            if self.seconds is not None and (not complete or abs(best_score) > ab.WIN_THRESHOLD):
                break  # out of time, or a forced result: a deeper search would only change its distance
        return legal[best_row], best_score, int(counters[ab.C_NODES])

    def principal_variation(self, pos: Position, first: Move, most: int = 40) -> list[Move]:
        """The line the last search expects: `first`, then in each position the best move of its table entry,
        while the table holds the position with a best move (at most `most` moves; a repeated position, where
        the table's moves would go round, ends it)."""
        s = self._state
        tt, generation = s["tt"], s["counters"][ab.C_GENERATION]
        line, seen = [first], {pos}
        pos = pos.play(first)
        while len(line) < most and pos not in seen:
            seen.add(pos)
            row = ab.table_move(tt, pos.black, pos.white, pos.kings, pos.black_to_move, generation)
            legal = pos.legal_moves()
            if not 0 <= row < len(legal):
                break
            line.append(legal[row])
            pos = pos.play(legal[row])
        return line


class DistilledPlayer(AlphaBetaSearchPlayer):
    """The alpha-beta search with the distilled evaluation (zero.distilled: the shipped file unless given
    another), to a fixed depth or on the clock (AlphaBetaSearchPlayer), selective (Selectivity()) unless told."""

    def __init__(self, depth: int | None = None, seed: int = 0, seconds: float | None = None,
                 evaluation: DistilledEval | None = None, egdb: Egdb | None = None, tt_bits: int = 20,
                 use_tt: bool = True, use_ordering: bool = True, book: OpeningBook | None = None,
                 selectivity: Selectivity | None = None) -> None:
        evaluation = evaluation if evaluation is not None else load_distilled()
        super().__init__("distilled", DistilledEvaluation(*evaluation.arrays), depth, seed, seconds, egdb, tt_bits,
                         use_tt, use_ordering, book, selectivity if selectivity is not None else Selectivity())
        self.evaluation = evaluation

    def expected_score(self, pos: Position) -> float:
        """The side to move's expected score by this player's search of `pos`: the sigmoid of its score's
        logit, 1 or 0 for a proven result (and 0 with no move to play)."""
        if not pos.legal_moves():
            return 0.0
        _move, score, _nodes = self.search(pos)
        if abs(score) > ab.WIN_THRESHOLD:
            return float(score > 0)
        return 1.0 / (1.0 + math.exp(-score / SCORE_UNITS))
