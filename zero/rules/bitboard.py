"""Board geometry on 32-bit masks and the bit intrinsics the numba kernels use.

Square s (1-32, standard numbering) is bit s-1. Row r = (s-1)//4 counts from Black's side (squares 1-4,
row 0) to White's (29-32, row 7); within a row the index i = (s-1)%4 runs left to right, and the square's
column on the 8x8 board is 2i+1 on even rows and 2i on odd rows. Black men move to higher rows ("down"),
White men to lower rows ("up").

Masks are held in int64 everywhere: numba promotes mixed uint32/int64 arithmetic to float, so unsigned
types would silently cost exactness.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

FULL = (1 << 32) - 1

# Direction indices shared by every kernel: 0/1 lead to higher rows (Black's forward), 2/3 to lower rows.
DOWN_LEFT, DOWN_RIGHT, UP_LEFT, UP_RIGHT = 0, 1, 2, 3


def _mask(pred) -> int:
    return sum(1 << b for b in range(32) if pred(b // 4, b % 4))


EVEN_ROWS = _mask(lambda r, i: r % 2 == 0)
ODD_ROWS = _mask(lambda r, i: r % 2 == 1)
NOT_I0 = _mask(lambda r, i: i != 0)
NOT_I3 = _mask(lambda r, i: i != 3)
ROW0 = _mask(lambda r, i: r == 0)
ROW7 = _mask(lambda r, i: r == 7)


def square_rc(sq: int) -> tuple[int, int]:
    """(row, column) on the 8x8 board of square sq (1-32)."""
    r, i = divmod(sq - 1, 4)
    return r, 2 * i + 1 if r % 2 == 0 else 2 * i


def rc_square(r: int, c: int) -> int:
    """Square number (1-32) at (row, column), or 0 for a light square or off the board."""
    if not (0 <= r < 8 and 0 <= c < 8) or (r + c) % 2 == 0:
        return 0
    return r * 4 + c // 2 + 1


def _build_tables() -> tuple[np.ndarray, np.ndarray]:
    neighbour = np.full((32, 4), -1, dtype=np.int64)
    jump = np.full((32, 4), -1, dtype=np.int64)
    steps = {DOWN_LEFT: (1, -1), DOWN_RIGHT: (1, 1), UP_LEFT: (-1, -1), UP_RIGHT: (-1, 1)}
    for b in range(32):
        r, c = square_rc(b + 1)
        for d, (dr, dc) in steps.items():
            n = rc_square(r + dr, c + dc)
            j = rc_square(r + 2 * dr, c + 2 * dc)
            if n:
                neighbour[b, d] = n - 1
            if n and j:
                jump[b, d] = j - 1
    return neighbour, jump


# NEIGHBOUR[b, d]: the bit one diagonal step from bit b in direction d; JUMP[b, d]: two steps (-1 = off board).
NEIGHBOUR, JUMP = _build_tables()


@intrinsic
def popcount(typingctx, x):
    """Number of set bits of an int64 (LLVM ctpop: one instruction on x86-64 with popcnt)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        fn = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(fn, [args[0]])

    return types.int64(types.int64), codegen


@intrinsic
def lowest_bit_index(typingctx, x):
    """Index of the least significant set bit of a non-zero int64 (LLVM cttz)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        fn = builder.module.declare_intrinsic("llvm.cttz", [ir.IntType(64), ir.IntType(1)])
        return builder.call(fn, [args[0], ir.Constant(ir.IntType(1), 1)])

    return types.int64(types.int64), codegen


@njit(cache=True, inline="always")
def step(x, d):
    """Masks of the squares one diagonal step from each set square of x in direction d (off-board dropped)."""
    if d == DOWN_LEFT:
        return (((x & EVEN_ROWS) << 4) | ((x & ODD_ROWS & NOT_I0) << 3)) & FULL
    if d == DOWN_RIGHT:
        return (((x & EVEN_ROWS & NOT_I3) << 5) | ((x & ODD_ROWS) << 4)) & FULL
    if d == UP_LEFT:
        return ((x & EVEN_ROWS) >> 4) | ((x & ODD_ROWS & NOT_I0) >> 5)
    return ((x & EVEN_ROWS & NOT_I3) >> 3) | ((x & ODD_ROWS) >> 4)


@njit(cache=True, inline="always")
def step_back(x, d):
    """Inverse of step: the squares from which a step in direction d lands on a set square of x."""
    return step(x, d ^ 3)


def bits(mask: int) -> list[int]:
    """Bit indices set in mask, ascending (pure Python helper)."""
    return [b for b in range(32) if mask >> b & 1]
