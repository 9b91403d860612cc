"""The evaluations the alpha-beta search scores its quiet leaves with, each its own value: a named tuple of its
arrays (ClassicalEvaluation, DistilledEvaluation), its own work arrays (ClassicalWork, DistilledWork), and three
small kernels: what it keeps of the root position (enter_root), how a move changes that for the child
(enter_child), and its score of a quiet leaf (leaf_score). The classical evaluation keeps nothing; the distilled
one keeps both views' accumulators, one pair a ply, updated by each move's pieces.

The search (zero.alphabeta.search) calls the three generic functions of this module. numba compiles it once for
each evaluation's type (a named tuple's type is its class and its fields' types), and each generic function
resolves, while that compiles, to the kernel its evaluation's class registered (EVALUATIONS): no branch on the
evaluation at run time, and nothing of one evaluation in the search compiled for another. Another evaluation is
its named tuples, its three kernels and its work arrays' maker, and one entry of EVALUATIONS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit
from numba.extending import overload

from zero.alphabeta.classical_kernels import N_FEATURES, evaluate
from zero.distilled import kernels as dk


@dataclass(frozen=True)
class EvaluationKernels:
    """An evaluation's part in the search: its three kernels (njit, the generic functions' signatures) and the
    maker of its work arrays, new_work(evaluation, plies)."""

    enter_root: Callable
    enter_child: Callable
    leaf_score: Callable
    new_work: Callable


# ---- the classical evaluation: fitted hand-made features ------------------------------------------------------

class ClassicalEvaluation(NamedTuple):
    """An integer weight (points) for each of the features (zero.alphabeta.classical_kernels); its score is in
    points, P(win) ~ sigmoid(points / the fit's scale)."""

    weights: np.ndarray  # int64 [N_FEATURES]


class ClassicalWork(NamedTuple):
    features: np.ndarray  # int64 [N_FEATURES]: the features of the leaf being scored


@njit(cache=True, inline="always")
def _classical_root(black, white, kings, evaluation, work):
    pass  # a leaf's features come from its board alone


@njit(cache=True, inline="always")
def _classical_child(ply, black, white, kings, child_black, child_white, child_kings, evaluation, work):
    pass


@njit(cache=True, inline="always")
def _classical_leaf(black, white, kings, btm, ply, evaluation, work):
    return evaluate(black, white, kings, btm, evaluation.weights, work.features)


def _classical_work(evaluation: ClassicalEvaluation, plies: int) -> ClassicalWork:
    return ClassicalWork(np.zeros(N_FEATURES, np.int64))


# ---- the distilled evaluation: a small network, its first layer kept as the moves go (zero.distilled) ---------

class DistilledEvaluation(NamedTuple):
    """The distilled network's arrays as its kernels take them (zero.distilled.model.DistilledEval.arrays); its
    score is in thousandths of a logit."""

    w1: np.ndarray  # int16 [INPUTS, H], in units of 1/QA
    b1: np.ndarray  # int16 [H]
    w2: np.ndarray  # float32 [buckets, hidden, 2 H], and so on (zero.distilled.model.DistilledShape.shapes)
    b2: np.ndarray
    w3: np.ndarray
    b3: np.ndarray
    w4: np.ndarray
    b4: np.ndarray


class DistilledWork(NamedTuple):
    accumulators: np.ndarray  # int16 [plies, 2, H]: both views' accumulators of the position at each ply
    x: np.ndarray  # float32: the dense layers' activations (zero.distilled.kernels.forward)
    y1: np.ndarray
    y2: np.ndarray
    out: np.ndarray


@njit(cache=True, inline="always")
def _distilled_root(black, white, kings, evaluation, work):
    dk.refresh(black, white, kings, evaluation.w1, evaluation.b1, work.accumulators[0])


@njit(cache=True, inline="always")
def _distilled_child(ply, black, white, kings, child_black, child_white, child_kings, evaluation, work):
    dk.update(black, white, kings, child_black, child_white, child_kings, evaluation.w1, work.accumulators[ply],
              work.accumulators[ply + 1])


@njit(cache=True, inline="always")
def _distilled_leaf(black, white, kings, btm, ply, evaluation, work):
    return dk.score(dk.forward(work.accumulators[ply], black, white, btm, evaluation.w2, evaluation.b2,
                               evaluation.w3, evaluation.b3, evaluation.w4, evaluation.b4, work.x, work.y1, work.y2,
                               work.out))


def _distilled_work(evaluation: DistilledEvaluation, plies: int) -> DistilledWork:
    units, hidden = evaluation.w1.shape[1], evaluation.w2.shape[1]
    return DistilledWork(np.zeros((plies, 2, units), np.int16), np.zeros(2 * units, np.float32),
                         np.zeros(hidden, np.float32), np.zeros(evaluation.w3.shape[1], np.float32),
                         np.zeros(1, np.float32))


EVALUATIONS: dict[type, EvaluationKernels] = {
    ClassicalEvaluation: EvaluationKernels(_classical_root, _classical_child, _classical_leaf, _classical_work),
    DistilledEvaluation: EvaluationKernels(_distilled_root, _distilled_child, _distilled_leaf, _distilled_work),
}


def new_work(evaluation: NamedTuple, plies: int) -> NamedTuple:
    """The evaluation's work arrays, for a search of at most `plies` plies."""
    return EVALUATIONS[type(evaluation)].new_work(evaluation, plies)


# ---- the generic functions the search calls: each one's evaluation's kernel, chosen while numba compiles --------

def _kernels(evaluation) -> EvaluationKernels | None:
    """The kernels of an evaluation's numba type (None for a type that is no evaluation: numba says so)."""
    return EVALUATIONS.get(getattr(evaluation, "instance_class", None))


def enter_root(black, white, kings, evaluation, work):
    """Take the search's root position into the evaluation's work arrays (ply 0)."""
    EVALUATIONS[type(evaluation)].enter_root(black, white, kings, evaluation, work)


def enter_child(ply, black, white, kings, child_black, child_white, child_kings, evaluation, work):
    """Take a move from the position at `ply` to its child (at ply + 1) into the evaluation's work arrays."""
    EVALUATIONS[type(evaluation)].enter_child(ply, black, white, kings, child_black, child_white, child_kings,
                                              evaluation, work)


def leaf_score(black, white, kings, btm, ply, evaluation, work):
    """The evaluation's whole-number score of the position at `ply` for the side to move (btm: Black's)."""
    return EVALUATIONS[type(evaluation)].leaf_score(black, white, kings, btm, ply, evaluation, work)


@overload(enter_root, inline="always")
def _enter_root(black, white, kings, evaluation, work):
    if (kernels := _kernels(evaluation)) is not None:
        kernel = kernels.enter_root
        return lambda black, white, kings, evaluation, work: kernel(black, white, kings, evaluation, work)


@overload(enter_child, inline="always")
def _enter_child(ply, black, white, kings, child_black, child_white, child_kings, evaluation, work):
    if (kernels := _kernels(evaluation)) is not None:
        kernel = kernels.enter_child
        return lambda ply, black, white, kings, child_black, child_white, child_kings, evaluation, work: kernel(
            ply, black, white, kings, child_black, child_white, child_kings, evaluation, work)


@overload(leaf_score, inline="always")
def _leaf_score(black, white, kings, btm, ply, evaluation, work):
    if (kernels := _kernels(evaluation)) is not None:
        kernel = kernels.leaf_score
        return lambda black, white, kings, btm, ply, evaluation, work: kernel(black, white, kings, btm, ply,
                                                                              evaluation, work)
