"""The classical evaluation's numba kernels, on plain integers and arrays: its features and their weighted sum,
one of the evaluations the alpha-beta search (zero.alphabeta.search) scores its leaves with
(zero.alphabeta.evaluations.ClassicalEvaluation).

zero.yardsticks.classical is their Python face (the weights file); zero.alphabeta.reference is their
plain-Python twin (the same features by their definitions), and tests/test_classical.py holds the two equal.

Features. Each is computed for a side in its own frame (the board turned round for White, so that every
side's men move towards row 7 and its back rank is row 0, squares 1-4) and enters the evaluation as the side
to move's value minus the opponent's. The `_end` features are that difference times END = 24 - pieces on
the board (0 at the start, 22 with two pieces left), so that the fit can give them another weight in the
endgame. The evaluation is the dot product of the features with integer weights (zero.yardsticks.classical's
fitted file): points for the side to move, P(win) ~ sigmoid(points / scale).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from zero.endgames.egdb import flip
from zero.rules.bitboard import FULL, ROW0, ROW7, lowest_bit_index, popcount, rc_square, square_rc, step, step_back

# ---- features -----------------------------------------------------------------------------------------

FEATURES = (
    "men",                  # men
    "kings",                # kings
    "men_end",              # men, times END
    "kings_end",            # kings, times END
    "has_king",             # 1 when the side has a king
    "back_rank",            # men on the back rank (squares 1-4 in the side's frame)
    "back_rank_end",        # the same, times END
    "bridge",               # 1 when men hold both bridge squares (1 and 3 in the side's frame)
    "dog_hole",             # 1 for a man on 28 with an opposing man on 32 (in the side's frame): stuck
    "centre_men",           # men on the four centre squares 14, 15, 18, 19
    "near_centre_men",      # men on 10, 11, 22, 23
    "centre_kings",         # kings on the eight central squares 10, 11, 14, 15, 18, 19, 22, 23
    "edge_kings",           # kings on the board's edge
    "double_corner_kings",  # kings in a double corner (1, 5, 28, 32)
    "advancement",          # rows the men have advanced, summed (the tempo count)
    "advancement_end",      # the same, times END
    "advanced_men",         # men on rows 5 and 6 (one or two steps from crowning)
    "runaway_men",          # men with no piece in the cone ahead of them up to the crowning row
    "trapped_kings",        # kings with no empty neighbouring square
    "stuck_men",            # men with no empty square ahead
    "men_mobility",         # forward steps of the men onto empty squares
    "king_mobility",        # steps of the kings onto empty squares
    "attacked",             # own pieces the opponent could jump if it were its move
    "backed_men",           # men whose two squares behind are own pieces or off the board
    "edge_men",             # men on the side columns (a and h files)
    "balance",              # |men on the left half - men on the right half|
)
N_FEATURES = len(FEATURES)
(F_MEN, F_KINGS, F_MEN_END, F_KINGS_END, F_HAS_KING, F_BACK_RANK, F_BACK_RANK_END, F_BRIDGE, F_DOG_HOLE,
 F_CENTRE_MEN, F_NEAR_CENTRE_MEN, F_CENTRE_KINGS, F_EDGE_KINGS, F_DOUBLE_CORNER_KINGS, F_ADVANCEMENT,
 F_ADVANCEMENT_END, F_ADVANCED_MEN, F_RUNAWAY_MEN, F_TRAPPED_KINGS, F_STUCK_MEN, F_MEN_MOBILITY,
 F_KING_MOBILITY, F_ATTACKED, F_BACKED_MEN, F_EDGE_MEN, F_BALANCE) = range(N_FEATURES)
# (feature, the one it is the END multiple of)
END_FEATURES = ((F_MEN_END, F_MEN), (F_KINGS_END, F_KINGS), (F_BACK_RANK_END, F_BACK_RANK),
                (F_ADVANCEMENT_END, F_ADVANCEMENT))
FULL_BOARD = 24  # pieces at the start: END = FULL_BOARD - pieces


def _squares(*numbers: int) -> int:
    return sum(1 << (s - 1) for s in numbers)


def _where(pred) -> int:
    return sum(1 << (s - 1) for s in range(1, 33) if pred(*square_rc(s)))


BRIDGE = _squares(1, 3)
DOG_HOLE, DOG_HOLE_BLOCKER = _squares(28), _squares(32)
CENTRE = _squares(14, 15, 18, 19)
NEAR_CENTRE = _squares(10, 11, 22, 23)
CENTRE8 = CENTRE | NEAR_CENTRE
EDGE = _where(lambda r, c: r in (0, 7) or c in (0, 7))
SIDE_COLUMNS = _where(lambda r, c: c in (0, 7))
DOUBLE_CORNERS = _squares(1, 5, 28, 32)
LEFT = _where(lambda r, c: c < 4)
RIGHT = _where(lambda r, c: c >= 4)
ADVANCED = _where(lambda r, c: r in (5, 6))
ROWS = np.array([_where(lambda r, c, row=row: r == row) for row in range(8)], dtype=np.int64)


def _cones() -> np.ndarray:
    """CONE[b]: the squares on the rows ahead of bit b (towards row 7) within one column more per row."""
    cone = np.zeros(32, dtype=np.int64)
    for b in range(32):
        r, c = square_rc(b + 1)
        cone[b] = _where(lambda r2, c2: r2 > r and abs(c2 - c) <= r2 - r)
    return cone


CONE = _cones()
assert ROW0 == int(ROWS[0]) and ROW7 == int(ROWS[7]) and rc_square(0, 1) == 1


@njit(cache=True)
def _side_features(own, opp, kings, sign, out):
    """Add sign times the features of `own` (in its own frame: men move towards row 7) to out."""
    occupied = own | opp
    empty = ~occupied & FULL
    men = own & ~kings
    kg = own & kings
    opp_men = opp & ~kings
    opp_kings = opp & kings
    out[F_MEN] += sign * popcount(men)
    out[F_KINGS] += sign * popcount(kg)
    out[F_HAS_KING] += sign * (1 if kg else 0)
    out[F_BACK_RANK] += sign * popcount(men & ROW0)
    out[F_BRIDGE] += sign * (1 if men & BRIDGE == BRIDGE else 0)
    out[F_DOG_HOLE] += sign * (1 if (men & DOG_HOLE) and (opp_men & DOG_HOLE_BLOCKER) else 0)
    out[F_CENTRE_MEN] += sign * popcount(men & CENTRE)
    out[F_NEAR_CENTRE_MEN] += sign * popcount(men & NEAR_CENTRE)
    out[F_CENTRE_KINGS] += sign * popcount(kg & CENTRE8)
    out[F_EDGE_KINGS] += sign * popcount(kg & EDGE)
    out[F_DOUBLE_CORNER_KINGS] += sign * popcount(kg & DOUBLE_CORNERS)
    advancement = 0
    for row in range(1, 7):
        advancement += row * popcount(men & ROWS[row])
    out[F_ADVANCEMENT] += sign * advancement
    out[F_ADVANCED_MEN] += sign * popcount(men & ADVANCED)
    runaway = 0
    rest = men
    while rest:
        b = lowest_bit_index(rest)
        rest &= rest - 1
        if CONE[b] & occupied == 0:
            runaway += 1
    out[F_RUNAWAY_MEN] += sign * runaway
    # Squares from which a step in direction d lands on an empty square: 0/1 forward, 2/3 backward.
    free0 = step_back(empty, 0)
    free1 = step_back(empty, 1)
    free2 = step_back(empty, 2)
    free3 = step_back(empty, 3)
    out[F_TRAPPED_KINGS] += sign * popcount(kg & ~(free0 | free1 | free2 | free3))
    out[F_STUCK_MEN] += sign * popcount(men & ~(free0 | free1))
    out[F_MEN_MOBILITY] += sign * (popcount(men & free0) + popcount(men & free1))
    out[F_KING_MOBILITY] += sign * (popcount(kg & free0) + popcount(kg & free1) + popcount(kg & free2)
                                    + popcount(kg & free3))
    # Own pieces the opponent could jump: its men move towards row 0 (directions 2, 3), its kings every way.
    attacked = 0
    for d in range(4):
        jumpers = opp if d >= 2 else opp_kings
        attacked |= step(jumpers, d) & own & step_back(empty, d)
    out[F_ATTACKED] += sign * popcount(attacked)
    backed = men
    for d in (2, 3):
        backed &= step_back(own, d) | (~step_back(FULL, d) & FULL)
    out[F_BACKED_MEN] += sign * popcount(backed)
    out[F_EDGE_MEN] += sign * popcount(men & SIDE_COLUMNS)
    out[F_BALANCE] += sign * abs(popcount(men & LEFT) - popcount(men & RIGHT))


@njit(cache=True)
def features(black, white, kings, black_to_move, out):
    """The features of a position for the side to move (its value minus the opponent's) into out."""
    for i in range(N_FEATURES):
        out[i] = 0
    if black_to_move:
        own, opp, k = black, white, kings
    else:
        own, opp, k = flip(white), flip(black), flip(kings)
    _side_features(own, opp, k, 1, out)
    _side_features(flip(opp), flip(own), flip(k), -1, out)
    end = FULL_BOARD - popcount(black | white)
    if end < 0:
        end = 0
    for pair in END_FEATURES:
        out[pair[0]] = out[pair[1]] * end


@njit(cache=True)
def evaluate(black, white, kings, black_to_move, weights, scratch):
    """The evaluation in points for the side to move: weights . features (scratch: N_FEATURES int64)."""
    features(black, white, kings, black_to_move, scratch)
    total = 0
    for i in range(N_FEATURES):
        total += weights[i] * scratch[i]
    return total


@njit(cache=True)
def features_batch(black, white, kings, black_to_move, out):
    """features() of many positions (arrays of one length) into the rows of out (int32 or int64)."""
    row = np.zeros(N_FEATURES, dtype=np.int64)
    for i in range(len(black)):
        features(black[i], white[i], kings[i], black_to_move[i], row)
        for j in range(N_FEATURES):
            out[i, j] = row[j]
