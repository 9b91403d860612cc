"""Plain-Python twin of zero.distilled.kernels, for tests: the evaluation of a position by its definition,
piece by piece and unit by unit, on Python numbers (see the kernels' module doc for what it computes)."""

from __future__ import annotations

from zero.distilled import kernels as dk
from zero.distilled.model import DistilledEval
from zero.rules.game import Position

KIND = {("own", False): 0, ("own", True): 1, ("opponent", False): 2, ("opponent", True): 3}


def active_features(position: Position, view_of_black: bool) -> list[int]:
    """The inputs that are on in one side's view: kind x square, White's view on the board turned round."""
    on = []
    for square in range(1, 33):
        bit = 1 << (square - 1)
        if not (position.black | position.white) & bit:
            continue
        owner = "own" if bool(position.black & bit) == view_of_black else "opponent"
        framed = square if view_of_black else 33 - square
        on.append(KIND[(owner, bool(position.kings & bit))] * 32 + framed - 1)
    return on


def accumulator(evaluation: DistilledEval, position: Position, view_of_black: bool) -> list[int]:
    """One view's accumulator in units of 1/QA: B1 plus the W1 row of every feature that is on."""
    w1, b1 = evaluation.arrays[0], evaluation.arrays[1]
    acc = [int(v) for v in b1]
    for f in active_features(position, view_of_black):
        acc = [a + int(w) for a, w in zip(acc, w1[f])]
    return acc


def logit(evaluation: DistilledEval, position: Position) -> float:
    """The side to move's logit: both views' accumulators clipped to [0, 1], then the bucket's layers."""
    mover = accumulator(evaluation, position, position.black_to_move)
    other = accumulator(evaluation, position, not position.black_to_move)
    x = [min(max(a / dk.QA, 0.0), 1.0) for a in mover + other]
    pieces = bin(position.black | position.white).count("1")
    k = min((dk.FULL_BOARD - pieces) * evaluation.shape.buckets // dk.FULL_BOARD, evaluation.shape.buckets - 1)
    _, _, w2, b2, w3, b3, w4, b4 = evaluation.arrays
    for w, b, hidden in ((w2, b2, True), (w3, b3, True), (w4, b4, False)):
        y = [sum(float(wi) * xi for wi, xi in zip(w[k][j], x)) + float(b[k][j]) for j in range(len(b[k]))]
        x = [min(max(v, 0.0), 1.0) for v in y] if hidden else y
    return x[0]
