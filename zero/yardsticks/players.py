"""The simplest yardstick players: a uniformly random player and an alpha-beta over material, to a fixed depth
or on the clock (players of zero.rules.player's interface). Players that need the network or the search are
built elsewhere; `train.arena.player_specs` turns a spec such as "alphabeta:6" or "mcts:PATH:64" into any of
them.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from zero.rules.bitboard import popcount
from zero.rules.game import Game, Move
from zero.rules.movegen import (
    BUFFER_ROWS, F_CAPTURED, F_FROM, F_TO, MOVE_FIELDS, can_capture, count_moves, generate, make,
)
from zero.rules.player import MAX_TIMED_DEPTH, SearchingPlayer, player_rng


class RandomPlayer:
    """Plays a uniformly random legal move."""

    def __init__(self, seed: int = 0) -> None:
        self.name = "random"
        self.seed = seed
        self._rng = player_rng(seed, None)

    def reset(self, seed: int) -> None:
        self._rng = player_rng(self.seed, seed)

    def choose(self, game: Game) -> Move:
        legal = game.legal_moves()
        return legal[int(self._rng.integers(len(legal)))]


# Material evaluation, in points from the side to move's view.
MAN_VALUE = 100
KING_VALUE = 140
# A side with no legal move has lost; the loss scores -(WIN_SCORE - plies from the root), so of two wins
# the search prefers the nearer one and of two losses the farther one.
WIN_SCORE = 1_000_000
_INFINITY = 2 * WIN_SCORE
# At the nominal depth the search goes on while the side to move has a capture (captures are compulsory,
# so a leaf in mid-exchange would be scored wrongly); every such ply removes a piece, which bounds it.
MAX_CAPTURE_EXTENSION = 24

# Columns of the search's per-ply stack.
S_BLACK, S_WHITE, S_KINGS, S_ALPHA, S_BETA, S_BEST, S_BEST_ROW, S_COUNT, S_INDEX, S_DEPTH = range(10)
S_KILLER_FROM, S_KILLER_TO = 10, 11
STACK_FIELDS = 12


@njit(cache=True, inline="always")
def material(black, white, kings, black_to_move):
    """Material balance for the side to move: men MAN_VALUE, kings KING_VALUE."""
    own = black if black_to_move else white
    opp = white if black_to_move else black
    return (MAN_VALUE * popcount(own & ~kings) + KING_VALUE * popcount(own & kings)
            - MAN_VALUE * popcount(opp & ~kings) - KING_VALUE * popcount(opp & kings))


@njit(cache=True, inline="always")
def _killer_first(moves, n, killer_from, killer_to):
    """Move the killer (a move that refuted a sibling node) to the front if it is legal here.

    Only the fields the search reads are swapped; the path columns of the two rows are left as they were.
    """
    for k in range(1, n):
        if moves[k, F_FROM] == killer_from and moves[k, F_TO] == killer_to:
            for f in (F_FROM, F_TO, F_CAPTURED):
                moves[0, f], moves[k, f] = moves[k, f], moves[0, f]
            return


@njit(cache=True)
def alphabeta_search(black, white, kings, black_to_move, depth, root_order, moves, stack, max_nodes):
    """Negamax alpha-beta to `depth` plies plus capture extension over the material evaluation, stopping
    early once it has visited `max_nodes` nodes (how a search on the clock keeps its time).

    root_order lists the root moves (rows of generate()'s output) in the order to search them: among equally
    good root moves the first one searched is kept, so a shuffled order breaks ties at random. moves is a
    (plies, BUFFER_ROWS, MOVE_FIELDS) buffer and stack a (plies, STACK_FIELDS) array, plies >= depth +
    MAX_CAPTURE_EXTENSION + 1; both are the caller's, so the search allocates nothing. Draw rules
    (repetition, no progress) are not seen inside the tree.

    Iterative with an explicit stack, as numba's self-recursion costs more than the work per node.
    Returns (score for the side to move, row of the best root move or -1 without moves, nodes visited,
    whether the search completed). A search stopped early returns the best of the root moves it finished
    (row -1 when it finished none): each of them was searched to the full depth.
    """
    n = generate(black, white, kings, black_to_move, True, moves[0])
    if n == 0:
        return -WIN_SCORE, -1, 1, True
    for p in range(stack.shape[0]):
        stack[p, S_KILLER_FROM] = -1
        stack[p, S_KILLER_TO] = -1
    stack[0, S_BLACK] = black
    stack[0, S_WHITE] = white
    stack[0, S_KINGS] = kings
    stack[0, S_ALPHA] = -_INFINITY
    stack[0, S_BETA] = _INFINITY
    stack[0, S_BEST] = -_INFINITY
    stack[0, S_BEST_ROW] = -1
    stack[0, S_COUNT] = n
    stack[0, S_INDEX] = 0
    stack[0, S_DEPTH] = depth
    nodes = 1
    ply = 0
    btm = black_to_move
    while True:
        if nodes >= max_nodes:
            return stack[0, S_BEST], stack[0, S_BEST_ROW], nodes, False
        index = stack[ply, S_INDEX]
        if index < stack[ply, S_COUNT]:
            stack[ply, S_INDEX] = index + 1
            row = root_order[index] if ply == 0 else index
            b, w, kg = make(stack[ply, S_BLACK], stack[ply, S_WHITE], stack[ply, S_KINGS], btm,
                            moves[ply, row, F_FROM], moves[ply, row, F_TO], moves[ply, row, F_CAPTURED])
            child = ply + 1
            child_btm = not btm
            child_depth = stack[ply, S_DEPTH] - 1
            nodes += 1
            if child_depth <= 0 and not can_capture(b, w, kg, child_btm):
                if count_moves(b, w, kg, child_btm, True, moves[child]) == 0:
                    score = WIN_SCORE - child
                else:
                    score = -material(b, w, kg, child_btm)
            else:
                child_n = generate(b, w, kg, child_btm, True, moves[child])
                if child_n == 0:
                    score = WIN_SCORE - child
                else:
                    _killer_first(moves[child], child_n, stack[child, S_KILLER_FROM], stack[child, S_KILLER_TO])
                    stack[child, S_BLACK] = b
                    stack[child, S_WHITE] = w
                    stack[child, S_KINGS] = kg
                    stack[child, S_ALPHA] = -stack[ply, S_BETA]
                    stack[child, S_BETA] = -stack[ply, S_ALPHA]
                    stack[child, S_BEST] = -_INFINITY
                    stack[child, S_BEST_ROW] = -1
                    stack[child, S_COUNT] = child_n
                    stack[child, S_INDEX] = 0
                    stack[child, S_DEPTH] = child_depth
                    ply = child
                    btm = child_btm
                    continue
        else:
            if ply == 0:
                break
            score = -stack[ply, S_BEST]
            ply -= 1
            btm = not btm
            index = stack[ply, S_INDEX] - 1
            row = root_order[index] if ply == 0 else index
        if score > stack[ply, S_BEST]:
            stack[ply, S_BEST] = score
            stack[ply, S_BEST_ROW] = row
            if score > stack[ply, S_ALPHA]:
                stack[ply, S_ALPHA] = score
                if score >= stack[ply, S_BETA]:
                    stack[ply, S_INDEX] = stack[ply, S_COUNT]
                    stack[ply, S_KILLER_FROM] = moves[ply, row, F_FROM]
                    stack[ply, S_KILLER_TO] = moves[ply, row, F_TO]
    return stack[0, S_BEST], stack[0, S_BEST_ROW], nodes, True


_UNLIMITED_NODES = 1 << 62


class AlphaBetaPlayer(SearchingPlayer):
    """Negamax alpha-beta over material (see alphabeta_search), ties broken at random (seeded): to a fixed
    depth, or on the clock with `seconds` per move by iterative deepening.

    On the clock, each iteration searches the previous one's best move first and may visit as many nodes
    as the time left allows at the rate measured so far; the move is the best of the deepest iteration
    that finished a root move (the best move so far). Such a player is as reproducible as the clock: its
    depth depends on the machine and its load.
    """

    def __init__(self, depth: int | None = None, seed: int = 0, seconds: float | None = None) -> None:
        if (depth is None) == (seconds is None):
            raise ValueError("alpha-beta takes a depth or a time per move, not both")
        if depth is not None and depth < 1:
            raise ValueError(f"alpha-beta depth must be at least 1, got {depth}")
        if seconds is not None and not seconds > 0:
            raise ValueError(f"alpha-beta needs a positive time per move, got {seconds}")
        self.name = f"alphabeta:{depth}" if depth is not None else f"alphabeta:t{seconds:g}"
        self.depth = depth
        self.seconds = seconds
        self.seed = seed
        self._rng = player_rng(seed, None)
        plies = (depth or MAX_TIMED_DEPTH) + MAX_CAPTURE_EXTENSION + 1
        self._moves = np.zeros((plies, BUFFER_ROWS, MOVE_FIELDS), dtype=np.int64)
        self._stack = np.zeros((plies, STACK_FIELDS), dtype=np.int64)
        self.last_score: int | None = None  # of the last searched move, for the side that moved
        self.last_nodes = 0
        self.last_depth = 0  # depth of the iteration the last move came from

    def reset(self, seed: int) -> None:
        self._rng = player_rng(self.seed, seed)

    def search(self, game: Game) -> tuple[Move, int, int]:
        """(best move, its score for the side to move, nodes visited)."""
        legal = game.legal_moves()
        if not legal:
            raise ValueError(f"no legal move in {game.position}")
        pos = game.position
        order = self._rng.permutation(len(legal)).astype(np.int64)
        args = (pos.black, pos.white, pos.kings, pos.black_to_move)
        if self.seconds is None:
            score, row, nodes, _ = alphabeta_search(*args, self.depth, order, self._moves, self._stack,
                                                    _UNLIMITED_NODES)
            self.last_depth = self.depth
            return legal[row], int(score), int(nodes)
        return self._search_on_the_clock(legal, args, order)

    def _search_on_the_clock(self, legal: list[Move], args: tuple, order: np.ndarray) -> tuple[Move, int, int]:
        start = time.perf_counter()
        deadline = start + self.seconds
        best_row, best_score, total = -1, 0, 0
        for depth in range(1, MAX_TIMED_DEPTH + 1):
            now = time.perf_counter()
            if best_row >= 0 and now >= deadline:
                break
            # The first iteration always finishes, so that there is a move; later ones stop on the node
            # budget the time left buys at the rate measured so far.
            rate = total / max(now - start, 1e-6)
            budget = _UNLIMITED_NODES if best_row < 0 else max(1, int((deadline - now) * rate))
            score, row, nodes, complete = alphabeta_search(*args, depth, order, self._moves, self._stack, budget)
            total += nodes
            if row >= 0:
                best_row, best_score, self.last_depth = int(row), int(score), depth
                first = int(np.flatnonzero(order == row)[0])  # search it first in the next iteration
                order[0], order[first] = order[first], order[0]
            if not complete or abs(best_score) >= WIN_SCORE - MAX_TIMED_DEPTH - MAX_CAPTURE_EXTENSION:
                break  # out of time, or a forced result no deeper search changes
        return legal[best_row], best_score, total
