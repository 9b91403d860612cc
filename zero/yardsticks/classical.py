"""The classical engine: a yardstick and sparring partner above material alpha-beta, not the product.

Alpha-beta with a transposition table, move ordering and quiescence over an evaluation of a few dozen
hand-made features whose weights are fitted by logistic regression on the results of the OCA expert games
(`checkers-zero classical fit`, train/learner/classical_fit.py). The kernels are zero.yardsticks.classical_kernels
(their twin: zero.yardsticks.classical_reference); this module holds the weights file and the player.

The weights file (checkpoints/classical_eval.json, in the repository) holds an integer weight (points)
for each feature, by name in the kernels' order, the scale (points per unit of logit: the fit's
P(win) = sigmoid(points / scale)), the sha256 of the data it was fitted on, the command that wrote it and
the fit's figures. Loading checks all of that against the code and refuses a damaged or mismatched file
with a one-line EvalFileError.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zero.endgames.egdb import Egdb, no_tables
from zero.rules.game import Game, Move, Position
from zero.run.data import REPOSITORY
from zero.yardsticks import classical_kernels as ck
from zero.yardsticks.players import SearchingPlayer, player_rng

DEFAULT_EVAL = REPOSITORY / "checkpoints" / "classical_eval.json"
EVAL_FORMAT = "checkers-zero-classical-eval"
EVAL_VERSION = 1
MAX_WEIGHT = 10**7  # points: far below the win score even summed over every feature

# Deepest iteration of a search on the clock (an endgame with few moves can go deep within its time).
MAX_TIMED_DEPTH = 40
_UNLIMITED_NODES = 1 << 62


class EvalFileError(ValueError):
    """A weights file that is missing, unreadable or does not fit the code's features; the message is one
    line that names the file."""


@dataclass(frozen=True)
class ClassicalEval:
    """Fitted weights: points per unit of each feature (kernels' order), and points per unit of logit."""

    weights: np.ndarray  # int64, one per ck.FEATURES
    scale: float
    meta: dict = field(default_factory=dict, compare=False)

    def evaluate(self, position: Position) -> int:
        """Points for the side to move (the kernel's evaluation)."""
        return int(ck.evaluate(position.black, position.white, position.kings, position.black_to_move,
                               self.weights, np.zeros(ck.N_FEATURES, np.int64)))

    def win_probability(self, position: Position) -> float:
        """The fit's sigmoid(points / scale): the side to move's expected score."""
        return 1.0 / (1.0 + math.exp(-self.evaluate(position) / self.scale))


def eval_document(weights: dict[str, int], scale: float, meta: dict) -> dict:
    """The JSON document of a weights file (what the fit writes)."""
    return {"format": EVAL_FORMAT, "version": EVAL_VERSION,
            "weights": {name: int(weights[name]) for name in ck.FEATURES}, "scale": float(scale), **meta}


def load_eval(path: str | Path | None = None) -> ClassicalEval:
    """The weights file at `path` (default DEFAULT_EVAL), validated; EvalFileError says what is wrong."""
    path = Path(path) if path is not None else DEFAULT_EVAL
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise EvalFileError(f"{path}: no classical evaluation file (write it: checkers-zero classical fit)") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise EvalFileError(f"{path}: unreadable classical evaluation file ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or doc.get("format") != EVAL_FORMAT:
        raise EvalFileError(f"{path}: not a classical evaluation file")
    if doc.get("version") != EVAL_VERSION:
        raise EvalFileError(f"{path}: format version {doc.get('version')!r}, this code reads {EVAL_VERSION}")
    weights, scale = doc.get("weights"), doc.get("scale")
    if not isinstance(weights, dict) or list(weights) != list(ck.FEATURES):
        raise EvalFileError(f"{path}: its weights do not name the code's {len(ck.FEATURES)} features in order "
                            f"(refit: checkers-zero classical fit)")
    if not all(type(w) is int and abs(w) <= MAX_WEIGHT for w in weights.values()):
        raise EvalFileError(f"{path}: every weight must be an integer of at most {MAX_WEIGHT} in size")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < float("inf"):
        raise EvalFileError(f"{path}: scale must be a positive number, got {scale!r}")
    meta = {k: v for k, v in doc.items() if k not in ("format", "version", "weights", "scale")}
    return ClassicalEval(np.array(list(weights.values()), dtype=np.int64), float(scale), meta)


def features_of(position: Position) -> dict[str, int]:
    """The position's features for the side to move, by name (the kernel's values)."""
    out = np.zeros(ck.N_FEATURES, np.int64)
    ck.features(position.black, position.white, position.kings, position.black_to_move, out)
    return dict(zip(ck.FEATURES, out.tolist()))


def repetitions(game: Game, legal: list[Move]) -> np.ndarray:
    """For each legal move (1 or 0): whether it leads back to a position of the game since its last
    irreversible move (capture or man move), with the same side to move."""
    window = game.no_progress[-1]
    earlier = {game.positions[-1 - back] for back in range(1, window + 1, 2)}
    pos = game.position
    return np.array([int(not pos.is_irreversible(m) and pos.play(m) in earlier) for m in legal], dtype=np.int64)


class ClassicalPlayer(SearchingPlayer):
    """The classical engine as a player: to a fixed depth or on the clock (`seconds` a move), always by
    iterative deepening, each iteration searching the previous one's best move first (from the table).

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
    """

    def __init__(self, depth: int | None = None, seed: int = 0, seconds: float | None = None,
                 evaluation: ClassicalEval | None = None, egdb: Egdb | None = None, tt_bits: int = 18,
                 use_tt: bool = True, use_ordering: bool = True) -> None:
        if (depth is None) == (seconds is None):
            raise ValueError("the classical engine takes a depth or a time per move, not both")
        if depth is not None and not 1 <= depth <= ck.MAX_DEPTH:
            raise ValueError(f"classical depth must be 1 to {ck.MAX_DEPTH}, got {depth}")
        if seconds is not None and not 0 < seconds < float("inf"):
            raise ValueError(f"the classical engine needs a positive time per move, got {seconds}")
        self.name = f"classical:{depth}" if depth is not None else f"classical:t{seconds:g}"
        self.depth = depth
        self.seconds = seconds
        self.seed = seed
        self.evaluation = evaluation if evaluation is not None else load_eval()
        self.egdb = egdb
        self._tables = egdb.tables if egdb is not None else no_tables()
        self._rng = player_rng(seed, None)
        self._state = ck.new_state(tt_bits)
        counters = self._state["counters"]
        counters[ck.C_USE_TT] = int(use_tt)
        counters[ck.C_USE_ORDERING] = int(use_ordering)
        counters[ck.C_GENERATION] = 1
        self.last_score: int | None = None  # of the last searched move, for the side that moved
        self.last_nodes = 0
        self.last_depth = 0  # depth of the iteration the last move came from

    def reset(self, seed: int) -> None:
        self._rng = player_rng(self.seed, seed)

    def _iteration(self, pos: Position, depth: int, order: np.ndarray, max_nodes: int,
                   draws: np.ndarray | None = None) -> tuple[int, int, bool]:
        s = self._state
        s["counters"][ck.C_MAX_NODES] = min(s["counters"][ck.C_NODES] + max_nodes, _UNLIMITED_NODES)
        if draws is None:
            draws = np.zeros(len(order), dtype=np.int64)
        score, row, complete = ck.search_root(
            pos.black, pos.white, pos.kings, pos.black_to_move, depth, order, draws, s["frames"], s["moves"],
            s["order"], s["rows"], s["tt"], s["killers"], s["history"], s["counters"], self.evaluation.weights,
            s["scratch"], self._tables)
        return int(score), int(row), bool(complete)

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
        counters[ck.C_NODES] = 0
        s["killers"].fill(-1)
        s["history"] >>= 1
        if self.seconds is None:
            counters[ck.C_GENERATION] += 1  # an empty table: the move depends on the position and seed alone
        order = self._rng.permutation(len(legal)).astype(np.int64)
        start = time.perf_counter()
        deadline = start + (self.seconds or 0.0)
        best_row, best_score = -1, 0
        for depth in range(1, (self.depth or MAX_TIMED_DEPTH) + 1):
            budget = _UNLIMITED_NODES
            if self.seconds is not None and best_row >= 0:
                # The first iteration always finishes, so that there is a move; later ones stop on the node
                # budget the time left buys at the rate measured so far.
                now = time.perf_counter()
                if now >= deadline:
                    break
                budget = max(1, int((deadline - now) * counters[ck.C_NODES] / max(now - start, 1e-6)))
            score, row, complete = self._iteration(pos, depth, order, budget, draws)
            if row >= 0:
                best_row, best_score, self.last_depth = row, score, depth
            if self.seconds is not None and (not complete or abs(best_score) > ck.WIN_THRESHOLD):
                break  # out of time, or a forced result: a deeper search would only change its distance
        return legal[best_row], best_score, int(counters[ck.C_NODES])
