"""The 32 playable squares and their diagonal neighbours: the geometry of the square tower
(zero.net.network, NetworkConfig.tower = "squares").

A piece moves and captures only along diagonals, so a playable square's neighbours that matter are the (up
to) four diagonal ones, all playable. The board tower's 3x3 convolutions reach them too, but spend half their
positions on the 32 light squares and four of their nine taps on orthogonal neighbours, which are light
squares. The square tower keeps only the 32 playable squares, in bit order, and mixes each with its diagonal
neighbours: a gather of five features per square (itself, then the four directions of DIRECTIONS), with zero
where a direction leaves the board, then a matrix product. That is 5/18 of a 3x3 convolution's multiply-adds
at the same width.

The tower's activations are [N, 32, C], a square's channels side by side, so that the gather copies whole rows
(ONNX Runtime's Gather along an inner axis copies element by element, 10x slower than the rest of the network),
and the product is a Gemm. NEIGHBOURS is the gather's index table, [32, 5] (a square's five sources in a row);
`gather_reference` is its plain-Python twin, which a test holds equal to the network's gather.
"""

from __future__ import annotations

import numpy as np

from zero.rules.bitboard import rc_square, square_rc

# (row step, column step) of each gathered feature: the square itself, then its four diagonal neighbours. Rows
# and columns are the real board's; the encoding turns the board for White, so these are the mover's too.
DIRECTIONS = ((0, 0), (-1, -1), (-1, 1), (1, -1), (1, 1))
MISSING = 32  # the index a neighbour off the board reads: a zero square appended after the 32 real ones


def neighbour(bit: int, direction: tuple[int, int]) -> int:
    """The bit of the square one step from `bit` in `direction`, or MISSING off the board."""
    row, col = square_rc(bit + 1)
    square = rc_square(row + direction[0], col + direction[1])
    return square - 1 if square else MISSING


NEIGHBOURS = np.array([[neighbour(bit, d) for d in DIRECTIONS] for bit in range(32)], dtype=np.int64)


def gather_reference(features: list[list[float]]) -> list[list[float]]:
    """The square tower's gather in plain Python: features[bit][c] of C channels on each of the 32 squares ->
    for each square 5C values, value d * C + c holding channel c of its neighbour in DIRECTIONS[d] (0.0 off
    the board)."""
    out = []
    for bit in range(32):
        row = []
        for direction in DIRECTIONS:
            other = neighbour(bit, direction)
            row.extend([0.0] * len(features[bit]) if other == MISSING else features[other])
        out.append(row)
    return out
