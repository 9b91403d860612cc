"""Move generation, move application and perft: numba kernels on plain integers and arrays.

A position is (black, white, kings, black_to_move): three 32-bit masks in int64 (bit s-1 = square s) and
the side to move. Moves are written into a caller-owned int64 array of shape (MAX_MOVES, MOVE_FIELDS):

    [F_FROM]     origin bit (0-31)
    [F_TO]       destination bit
    [F_CAPTURED] mask of the captured pieces
    [F_LEN]      number of squares on the path (2 for a step, 1 + jumps for a capture)
    [F_PATH...]  the path's bits, origin first

With dedup=True two capture paths with the same origin, destination and captured set (king loops run in
opposite directions) are one move, as the rules say they lead to the same position; dedup=False keeps every
path (the "duplicates counted" perft series).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from zero.rules.bitboard import FULL, JUMP, NEIGHBOUR, ROW0, ROW7, lowest_bit_index, popcount, step, step_back

MAX_MOVES = 256
MAX_PATH = 16
F_FROM, F_TO, F_CAPTURED, F_LEN, F_PATH = 0, 1, 2, 3, 4
MOVE_FIELDS = F_PATH + MAX_PATH
# The buffer's last rows are the capture walk's stack, so generation never allocates.
SCRATCH_ROWS = 4
BUFFER_ROWS = MAX_MOVES + SCRATCH_ROWS


def new_move_buffer() -> np.ndarray:
    """A move buffer for generate(): MAX_MOVES move rows plus the capture walk's scratch rows."""
    return np.zeros((BUFFER_ROWS, MOVE_FIELDS), dtype=np.int64)


@njit(cache=True, inline="always")
def _sides(black, white, black_to_move):
    if black_to_move:
        return black, white
    return white, black


@njit(cache=True, inline="always")
def _man_dirs(black_to_move):
    """First of the two forward directions of the side's men (0,1 for Black; 2,3 for White)."""
    return 0 if black_to_move else 2


@njit(cache=True, inline="always")
def _jumpers(own, opp, kings, empty, d0):
    """Mask of the side's pieces that have at least one capture (bitboard test, no move list)."""
    own_kings = own & kings
    result = 0
    for d in range(4):
        movers = own if (d == d0 or d == d0 + 1) else own_kings
        result |= step_back(step_back(empty, d) & opp, d) & movers
    return result


@njit(cache=True)
def can_capture(black, white, kings, black_to_move):
    """True when the side to move has at least one capture."""
    own, opp = _sides(black, white, black_to_move)
    return _jumpers(own, opp, kings, ~(black | white) & FULL, _man_dirs(black_to_move)) != 0


@njit(cache=True)
def _add_capture(moves, n, path, length, captured, dedup):
    frm = path[0]
    to = path[length - 1]
    if dedup:
        for k in range(n):
            if moves[k, F_FROM] == frm and moves[k, F_TO] == to and moves[k, F_CAPTURED] == captured:
                return n
    if n >= MAX_MOVES:
        raise ValueError("move buffer overflow")
    moves[n, F_FROM] = frm
    moves[n, F_TO] = to
    moves[n, F_CAPTURED] = captured
    moves[n, F_LEN] = length
    for k in range(length):
        moves[n, F_PATH + k] = path[k]
    return n + 1


@njit(cache=True, inline="always")
def _has_jump(x, is_king, d0, opp, empty):
    """Whether the piece on the single-bit mask x has a jump over opp onto empty."""
    for d in range(4):
        if (is_king or d == d0 or d == d0 + 1) and step(step(x, d) & opp, d) & empty:
            return True
    return False


@njit(cache=True)
def _continue_captures(frm, land, first_cap, is_king, d0, opp, empty, moves, n, dedup):
    """Depth-first walk of every maximal capture sequence that starts with the jump frm -> land.

    The mover's origin counts as empty (a king may pass over or end on it). A man never continues after
    reaching the far row because men have no forward jumps from there, so crowning ends the move for free.
    The walk's stack lives in the move buffer's scratch rows, so nothing is allocated.
    """
    scratch = moves[MAX_MOVES:]
    path = scratch[0]
    caps = scratch[1]
    next_dir = scratch[2]
    extended = scratch[3]
    path[0] = frm
    path[1] = land
    caps[1] = first_cap
    next_dir[1] = 0
    extended[1] = 0
    top = 1
    while top >= 1:
        d = next_dir[top]
        if d < 4:
            next_dir[top] = d + 1
            if not is_king and d != d0 and d != d0 + 1:
                continue
            sq = path[top]
            land = JUMP[sq, d]
            if land < 0:
                continue
            mid_bit = np.int64(1) << NEIGHBOUR[sq, d]
            if (opp & mid_bit) and not (caps[top] & mid_bit) and (empty >> land) & 1:
                extended[top] = 1
                top += 1
                path[top] = land
                caps[top] = caps[top - 1] | mid_bit
                next_dir[top] = 0
                extended[top] = 0
        else:
            if extended[top] == 0:
                n = _add_capture(moves, n, path, top + 1, caps[top], dedup)
            top -= 1
    return n


@njit(cache=True)
def generate(black, white, kings, black_to_move, dedup, moves):
    """Write the legal moves of the side to move into moves; return how many. Captures are compulsory."""
    own, opp = _sides(black, white, black_to_move)
    empty = ~(black | white) & FULL
    d0 = _man_dirs(black_to_move)
    own_kings = own & kings
    n = 0
    if _jumpers(own, opp, kings, empty, d0):
        # Most captures are single jumps: found with bitboards and written directly; only jumps that can
        # continue start the depth-first walk.
        for d in range(4):
            movers = own if (d == d0 or d == d0 + 1) else own_kings
            sources = step_back(step_back(empty, d) & opp, d) & movers
            while sources:
                f = lowest_bit_index(sources)
                sources &= sources - 1
                land = JUMP[f, d]
                cap = np.int64(1) << NEIGHBOUR[f, d]
                is_king = (kings >> f) & 1 == 1
                vacated = empty | (np.int64(1) << f)
                if _has_jump(np.int64(1) << land, is_king, d0, opp & ~cap, vacated):
                    n = _continue_captures(f, land, cap, is_king, d0, opp, vacated, moves, n, dedup)
                else:
                    if n >= MAX_MOVES:
                        raise ValueError("move buffer overflow")
                    moves[n, F_FROM] = f
                    moves[n, F_TO] = land
                    moves[n, F_CAPTURED] = cap
                    moves[n, F_LEN] = 2
                    moves[n, F_PATH] = f
                    moves[n, F_PATH + 1] = land
                    n += 1
        return n
    own_kings = own & kings
    for d in range(4):
        movers = own if (d == d0 or d == d0 + 1) else own_kings
        targets = step(movers, d) & empty
        while targets:
            t = lowest_bit_index(targets)
            targets &= targets - 1
            f = NEIGHBOUR[t, d ^ 3]
            moves[n, F_FROM] = f
            moves[n, F_TO] = t
            moves[n, F_CAPTURED] = 0
            moves[n, F_LEN] = 2
            moves[n, F_PATH] = f
            moves[n, F_PATH + 1] = t
            n += 1
    return n


@njit(cache=True)
def count_moves(black, white, kings, black_to_move, dedup, moves):
    """Number of legal moves; without captures it is a few popcounts (perft's leaf bulk-count)."""
    if can_capture(black, white, kings, black_to_move):
        return generate(black, white, kings, black_to_move, dedup, moves)
    own, _ = _sides(black, white, black_to_move)
    empty = ~(black | white) & FULL
    d0 = _man_dirs(black_to_move)
    own_kings = own & kings
    total = 0
    for d in range(4):
        movers = own if (d == d0 or d == d0 + 1) else own_kings
        total += popcount(step(movers, d) & empty)
    return total


@njit(cache=True, inline="always")
def make(black, white, kings, black_to_move, frm, to, captured):
    """Position after the move frm -> to capturing `captured`; returns (black, white, kings)."""
    f = np.int64(1) << frm
    t = np.int64(1) << to
    if black_to_move:
        black = black ^ f ^ t
        white = white & ~captured
        crown = ROW7
    else:
        white = white ^ f ^ t
        black = black & ~captured
        crown = ROW0
    if kings & f:
        kings = kings ^ f ^ t
    elif t & crown:
        kings = kings | t
    kings = kings & ~captured
    return black, white, kings


@njit(cache=True)
def is_irreversible(kings, frm, captured):
    """A capture or a man's move: resets the no-progress count and cuts the repetition history."""
    return captured != 0 or not (kings >> frm) & 1


@njit(cache=True)
def perft(black, white, kings, black_to_move, depth, dedup, bulk):
    """Leaf count of the move tree to `depth` plies (no draw rules, as published perft series assume).

    bulk=True counts the last ply's moves without listing them (popcounts when there is no capture);
    bulk=False lists every last-ply move and makes each leaf position.

    Iterative with an explicit stack: numba's self-recursion costs far more per call than the work per node.
    """
    if depth == 0:
        return 1
    moves = np.zeros((depth, BUFFER_ROWS, MOVE_FIELDS), dtype=np.int64)
    stack_b = np.zeros(depth + 1, dtype=np.int64)
    stack_w = np.zeros(depth + 1, dtype=np.int64)
    stack_k = np.zeros(depth + 1, dtype=np.int64)
    count = np.zeros(depth, dtype=np.int64)
    index = np.zeros(depth, dtype=np.int64)
    stack_b[0], stack_w[0], stack_k[0] = black, white, kings
    total = 0
    ply = 0
    btm = black_to_move
    count[0] = generate(black, white, kings, btm, dedup, moves[0])
    index[0] = 0
    while ply >= 0:
        if index[ply] == count[ply]:
            ply -= 1
            btm = not btm
            continue
        remaining = depth - ply - 1
        if bulk and remaining == 0:
            total += count[ply]
            index[ply] = count[ply]
            continue
        k = index[ply]
        index[ply] = k + 1
        b, w, kg = make(stack_b[ply], stack_w[ply], stack_k[ply], btm,
                        moves[ply, k, F_FROM], moves[ply, k, F_TO], moves[ply, k, F_CAPTURED])
        if remaining == 0:
            # Without bulk-counting every leaf position is actually made and stored.
            stack_b[depth], stack_w[depth], stack_k[depth] = b, w, kg
            total += 1
            continue
        if bulk and remaining == 1:
            total += count_moves(b, w, kg, not btm, dedup, moves[ply + 1])
            continue
        ply += 1
        btm = not btm
        stack_b[ply], stack_w[ply], stack_k[ply] = b, w, kg
        count[ply] = generate(b, w, kg, btm, dedup, moves[ply])
        index[ply] = 0
    return total


@njit(cache=True)
def random_playout_steps(black, white, kings, black_to_move, plies, seed):
    """Play `plies` random legal moves (restarting from the given position when a side has no move).

    Returns the number of positions generated; this is the inner loop a search uses (generate, pick, make).
    """
    np.random.seed(seed)
    moves = np.zeros((BUFFER_ROWS, MOVE_FIELDS), dtype=np.int64)
    b, w, kg, btm = black, white, kings, black_to_move
    done = 0
    for _ in range(plies):
        n = generate(b, w, kg, btm, True, moves)
        done += 1
        if n == 0:
            b, w, kg, btm = black, white, kings, black_to_move
            continue
        k = np.random.randint(n)
        b, w, kg = make(b, w, kg, btm, moves[k, F_FROM], moves[k, F_TO], moves[k, F_CAPTURED])
        btm = not btm
    return done


__all__ = [
    "MAX_MOVES", "MAX_PATH", "MOVE_FIELDS", "F_FROM", "F_TO", "F_CAPTURED", "F_LEN", "F_PATH",
    "new_move_buffer", "can_capture", "generate", "count_moves", "make", "is_irreversible", "perft",
    "random_playout_steps", "step_back", "popcount",
]
