"""The distilled evaluation's numba kernels, on plain integers and arrays: the accumulator (the first layer,
kept from the pieces on the board and updated by the pieces a move adds and removes) and the forward pass of
the small dense layers above it.

The inputs, for each side's view ("perspective"): a piece kind (own man, own king, opposing man, opposing
king) times its square in that side's frame (the board turned round for White, so that both sides' men move
towards higher squares), 4 x 32 = 128 features, at most 24 of them on. The first layer sums the rows of W1 of
the features that are on, and B1, into a side's accumulator: int16, in units of 1/QA. Both sides'
accumulators are kept, so that a move updates both whatever side made it. The evaluation reads them as [side
to move's, opponent's], clipped to [0, 1], through two small dense layers with clipped ReLUs to one number:
the side to move's logit of its expected score. The dense layers may come in buckets by the pieces on the
board (the phase of the game): a position uses its bucket's layers.

The dense layers run in float32: numba widens every integer product to int64, so that int8 and int16
layers ran 1.6 times slower than float32 ones with fastmath on this CPU (benchmarks/distilled_bench.py). The accumulator stays in integers, so that it is exact.

zero.distilled.model holds the torch twin these arrays come from and the evaluation's file;
zero.distilled.reference is the readable plain-Python twin of these kernels (tests/test_distilled.py holds
them equal).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from zero.rules.bitboard import lowest_bit_index, popcount

SQUARES = 32
KINDS = 4  # own men, own kings, opposing men, opposing kings (in the perspective's frame)
INPUTS = KINDS * SQUARES
# The accumulator's unit: 1.0 is QA. Its rows are whole multiples of 1/QA, so that the sum of a position's
# rows is exact in int16 whatever order they came in (an updated accumulator equals a recomputed one, bit for
# bit); the training keeps W1 within MAX_W1 and B1 within MAX_B1 so that no sum of a board's rows overflows.
QA = 1024
INV_QA = np.float32(1.0 / QA)
MAX_W1 = 1.0
MAX_B1 = 4.0
FULL_BOARD = 24
# A search's scores are whole numbers: the logit times SCORE_UNITS, clipped to MAX_LOGIT (far below a proven
# win's score).
SCORE_UNITS = 1000
MAX_LOGIT = 30.0


@njit(cache=True, inline="always")
def feature(perspective, own, king, bit):
    """The input index of a piece: perspective 0 is Black's view, 1 White's (its board turned round)."""
    kind = (0 if own else 2) + (1 if king else 0)
    return kind * SQUARES + (bit if perspective == 0 else 31 - bit)


@njit(cache=True, inline="always")
def bucket_of(black, white, buckets):
    """The bucket of the layers above the accumulator: by the pieces on the board, fewest last."""
    return min((FULL_BOARD - popcount(black | white)) * buckets // FULL_BOARD, buckets - 1)


@njit(cache=True, inline="always")
def _add_pieces(mask, colour, king, sign, w1, acc):
    """acc[perspective] += sign * W1's row of every piece in mask (of colour 0 Black, 1 White), both views."""
    rest = mask
    while rest:
        bit = lowest_bit_index(rest)
        rest &= rest - 1
        for perspective in range(2):
            row = w1[feature(perspective, colour == perspective, king, bit)]
            a = acc[perspective]
            if sign > 0:
                for i in range(a.shape[0]):
                    a[i] += row[i]
            else:
                for i in range(a.shape[0]):
                    a[i] -= row[i]


@njit(cache=True)
def refresh(black, white, kings, w1, b1, acc):
    """Both views' accumulators (acc int16 [2, H]) of a position, from every piece on the board."""
    # Element by element, as in update: a slice assignment needs numba's reference counting, which the search
    # that calls these kernels is compiled without (zero.alphabeta.search's module doc).
    for perspective in range(2):
        for i in range(acc.shape[1]):
            acc[perspective, i] = b1[i]
    _add_pieces(black & ~kings, 0, False, 1, w1, acc)
    _add_pieces(black & kings, 0, True, 1, w1, acc)
    _add_pieces(white & ~kings, 1, False, 1, w1, acc)
    _add_pieces(white & kings, 1, True, 1, w1, acc)


@njit(cache=True)
def update(black, white, kings, child_black, child_white, child_kings, w1, acc, child_acc):
    """child_acc = acc of the position (black, white, kings) moved on to (child_...): the parent's accumulators
    plus the rows of the pieces the move added, minus those it removed (the mover's from and to squares, a
    crowning, every captured piece)."""
    for perspective in range(2):
        for i in range(acc.shape[1]):
            child_acc[perspective, i] = acc[perspective, i]
    for colour in range(2):
        before = black if colour == 0 else white
        after = child_black if colour == 0 else child_white
        for king in (False, True):
            was = before & kings if king else before & ~kings
            now = after & child_kings if king else after & ~child_kings
            _add_pieces(was & ~now, colour, king, -1, w1, child_acc)
            _add_pieces(now & ~was, colour, king, 1, w1, child_acc)


@njit(cache=True, inline="always", fastmath=True)
def _dense(x, w, b, out, clip):
    """out = w @ x + b (w [outputs, inputs], as torch's Linear), clipped to [0, 1] for a hidden layer."""
    for j in range(w.shape[0]):
        total = np.float32(0)
        row = w[j]
        for i in range(x.shape[0]):
            total += x[i] * row[i]
        total += b[j]
        out[j] = min(max(total, np.float32(0)), np.float32(1)) if clip else total


@njit(cache=True, fastmath=True)
def forward(acc, black, white, black_to_move, w2, b2, w3, b3, w4, b4, x, y1, y2, out):
    """The side to move's logit of its expected score, from the position's accumulators: [its own view's,
    the opponent's] clipped to [0, 1] in units of QA, then the bucket's dense layers. x float32 [2 H],
    y1 and y2 float32 [hidden], out float32 [1]: work arrays (separate, so that the loops vectorise)."""
    h = acc.shape[1]
    mover = 0 if black_to_move else 1
    for i in range(h):
        x[i] = min(max(np.float32(acc[mover, i]) * INV_QA, np.float32(0)), np.float32(1))
        x[h + i] = min(max(np.float32(acc[1 - mover, i]) * INV_QA, np.float32(0)), np.float32(1))
    k = bucket_of(black, white, w2.shape[0])
    _dense(x, w2[k], b2[k], y1, True)
    _dense(y1, w3[k], b3[k], y2, True)
    _dense(y2, w4[k], b4[k], out, False)
    return out[0]


@njit(cache=True, inline="always")
def score(logit):
    """The search's whole-number score of a logit."""
    return np.int64(round(min(max(logit, -MAX_LOGIT), MAX_LOGIT) * SCORE_UNITS))


@njit(cache=True)
def evaluate(black, white, kings, black_to_move, w1, b1, w2, b2, w3, b3, w4, b4, acc, x, y1, y2, out):
    """forward() of a position whose accumulators are computed from scratch (refresh)."""
    refresh(black, white, kings, w1, b1, acc)
    return forward(acc, black, white, black_to_move, w2, b2, w3, b3, w4, b4, x, y1, y2, out)


@njit(cache=True)
def evaluate_batch(black, white, kings, black_to_move, w1, b1, w2, b2, w3, b3, w4, b4, out):
    """evaluate() of many positions into out (float32)."""
    acc = np.zeros((2, w1.shape[1]), dtype=np.int16)
    x = np.zeros(2 * w1.shape[1], dtype=np.float32)
    y1 = np.zeros(w2.shape[1], dtype=np.float32)
    y2 = np.zeros(w3.shape[1], dtype=np.float32)
    last = np.zeros(1, dtype=np.float32)
    for i in range(len(black)):
        out[i] = evaluate(np.int64(black[i]), np.int64(white[i]), np.int64(kings[i]), bool(black_to_move[i]),
                          w1, b1, w2, b2, w3, b3, w4, b4, acc, x, y1, y2, last)


@njit(cache=True)
def inputs_batch(black, white, kings, black_to_move, buckets, out, bucket):
    """The torch twin's inputs of many positions: out uint8 [N, 2, INPUTS], the side to move's view's features
    then the opponent's (1 where on), and bucket int64 [N], each position's bucket of `buckets`."""
    out[:] = 0
    for n in range(len(black)):
        b, w, k = np.int64(black[n]), np.int64(white[n]), np.int64(kings[n])
        mover = 0 if black_to_move[n] else 1
        for colour in range(2):
            rest = b if colour == 0 else w
            while rest:
                bit = lowest_bit_index(rest)
                rest &= rest - 1
                king = (k >> bit) & 1 == 1
                for perspective in range(2):
                    out[n, 0 if perspective == mover else 1, feature(perspective, colour == perspective, king, bit)] = 1
        bucket[n] = bucket_of(b, w, buckets)
