"""The classical engine: a yardstick and sparring partner above material alpha-beta, not the product.

Alpha-beta with a transposition table, move ordering and quiescence over an evaluation of a few dozen
hand-made features whose weights are fitted by logistic regression on the results of the OCA expert games
(`checkers-zero classical fit`, train/learner/classical_fit.py). The kernels are zero.alphabeta.classical_kernels
(their twin: zero.alphabeta.reference); this module holds the weights file and the player, the
alpha-beta search (zero.alphabeta.player) with this evaluation.

The weights file (checkpoints/classical_eval.json, in the repository) holds an integer weight (points)
for each feature, by name in the kernels' order, the scale (points per unit of logit: the fit's
P(win) = sigmoid(points / scale)), the sha256 of the data it was fitted on, the command that wrote it and
the fit's figures. Loading checks all of that against the code and refuses a damaged or mismatched file
with a one-line EvalFileError.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zero.alphabeta import classical_kernels as ck
from zero.alphabeta.evaluations import ClassicalEvaluation
from zero.alphabeta.player import AlphaBetaSearchPlayer, Selectivity
from zero.endgames.egdb import Egdb
from zero.rules.game import Position
from zero.run.data import REPOSITORY

DEFAULT_EVAL = REPOSITORY / "checkpoints" / "classical_eval.json"
EVAL_FORMAT = "checkers-zero-classical-eval"
EVAL_VERSION = 1
MAX_WEIGHT = 10**7  # points: far below the win score even summed over every feature



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


class ClassicalPlayer(AlphaBetaSearchPlayer):
    """The classical engine as a player: the alpha-beta search with the classical evaluation (the shipped
    weights file unless given another), to a fixed depth or on the clock (AlphaBetaSearchPlayer); a calibrated
    yardstick, so its search is the plain one unless told (Selectivity)."""

    def __init__(self, depth: int | None = None, seed: int = 0, seconds: float | None = None,
                 evaluation: ClassicalEval | None = None, egdb: Egdb | None = None, tt_bits: int = 18,
                 use_tt: bool = True, use_ordering: bool = True, selectivity: Selectivity | None = None) -> None:
        evaluation = evaluation if evaluation is not None else load_eval()
        super().__init__("classical", ClassicalEvaluation(np.asarray(evaluation.weights, np.int64)), depth, seed,
                         seconds, egdb, tt_bits, use_tt, use_ordering, selectivity=selectivity)
        self.evaluation = evaluation
