"""Plain-Python twin of zero.alphabeta.classical_kernels and zero.alphabeta.search, for tests: every
feature by its definition, square by square on (row, column) coordinates, and a full-width minimax over any
evaluation (no pruning, no table, no ordering), with the search's leaf rules (see its module doc), and the
alpha-beta of the search's verified pruning, whose cuts depend on the windows.
tests/test_classical.py and tests/test_alphabeta.py hold the kernels equal to it.
"""

from __future__ import annotations

from collections.abc import Callable

from zero.alphabeta.classical_kernels import END_FEATURES, FEATURES, FULL_BOARD
from zero.alphabeta.search import VERIFY_MIN_DEPTH, VERIFY_PLIES, WIN_SCORE, WIN_THRESHOLD
from zero.endgames.egdb import DRAW, UNKNOWN, WIN, Egdb
from zero.rules.bitboard import square_rc
from zero.rules.game import Position

Square = tuple[int, int]  # (row, column) in a side's own frame: its men move towards row 7

BRIDGE = {1, 3}
CENTRE = {14, 15, 18, 19}
NEAR_CENTRE = {10, 11, 22, 23}
DOUBLE_CORNERS = {1, 5, 28, 32}


def _number(sq: Square) -> int:
    r, c = sq
    return 4 * r + c // 2 + 1


def _frame(mask: int, kings: int, black_side: bool) -> tuple[set[Square], set[Square]]:
    """(men, kings) of a mask in the frame of the side named: White's board is turned round (s -> 33 - s)."""
    men, kgs = set(), set()
    for s in range(1, 33):
        if mask >> (s - 1) & 1:
            r, c = square_rc(s)
            sq = (r, c) if black_side else (7 - r, 7 - c)
            (kgs if kings >> (s - 1) & 1 else men).add(sq)
    return men, kgs


def _on_board(sq: Square) -> bool:
    return 0 <= sq[0] < 8 and 0 <= sq[1] < 8


def side_features(men: set[Square], kings: set[Square], opp_men: set[Square], opp_kings: set[Square]) -> dict[str, int]:
    """The features of one side in its own frame (the `_end` ones are added by features())."""
    own = men | kings
    opp = opp_men | opp_kings
    occupied = own | opp

    def empty(sq: Square) -> bool:
        return _on_board(sq) and sq not in occupied

    forward = [(1, -1), (1, 1)]
    every_way = forward + [(-1, -1), (-1, 1)]
    numbers = {_number(sq) for sq in men}
    attacked = set()
    for jumper in opp:
        directions = every_way if jumper in opp_kings else [(-1, -1), (-1, 1)]  # opposing men move to row 0
        for dr, dc in directions:
            victim = (jumper[0] + dr, jumper[1] + dc)
            landing = (jumper[0] + 2 * dr, jumper[1] + 2 * dc)
            if victim in own and empty(landing):
                attacked.add(victim)

    def runaway(sq: Square) -> bool:
        r, c = sq
        return not any(r2 > r and abs(c2 - c) <= r2 - r for r2, c2 in occupied)

    def backed(sq: Square) -> bool:
        r, c = sq
        return all(not _on_board(b) or b in own for b in ((r - 1, c - 1), (r - 1, c + 1)))

    return {
        "men": len(men),
        "kings": len(kings),
        "has_king": int(bool(kings)),
        "back_rank": sum(r == 0 for r, _ in men),
        "bridge": int(BRIDGE <= numbers),
        "dog_hole": int(28 in numbers and 32 in {_number(sq) for sq in opp_men}),
        "centre_men": len(numbers & CENTRE),
        "near_centre_men": len(numbers & NEAR_CENTRE),
        "centre_kings": sum(_number(sq) in CENTRE | NEAR_CENTRE for sq in kings),
        "edge_kings": sum(r in (0, 7) or c in (0, 7) for r, c in kings),
        "double_corner_kings": sum(_number(sq) in DOUBLE_CORNERS for sq in kings),
        "advancement": sum(r for r, _ in men),
        "advanced_men": sum(r in (5, 6) for r, _ in men),
        "runaway_men": sum(runaway(sq) for sq in men),
        "trapped_kings": sum(not any(empty((r + dr, c + dc)) for dr, dc in every_way) for r, c in kings),
        "stuck_men": sum(not any(empty((r + dr, c + dc)) for dr, dc in forward) for r, c in men),
        "men_mobility": sum(empty((r + dr, c + dc)) for r, c in men for dr, dc in forward),
        "king_mobility": sum(empty((r + dr, c + dc)) for r, c in kings for dr, dc in every_way),
        "attacked": len(attacked),
        "backed_men": sum(backed(sq) for sq in men),
        "edge_men": sum(c in (0, 7) for _, c in men),
        "balance": abs(sum(c < 4 for _, c in men) - sum(c >= 4 for _, c in men)),
    }


def features(pos: Position) -> list[int]:
    """The features of a position for the side to move: its value minus the opponent's, in FEATURES order."""
    own_mask, opp_mask = (pos.black, pos.white) if pos.black_to_move else (pos.white, pos.black)
    mine = side_features(*_frame(own_mask, pos.kings, pos.black_to_move), *_frame(opp_mask, pos.kings, pos.black_to_move))
    theirs = side_features(*_frame(opp_mask, pos.kings, not pos.black_to_move),
                           *_frame(own_mask, pos.kings, not pos.black_to_move))
    values = {name: mine[name] - theirs[name] for name in mine}
    end = max(0, FULL_BOARD - pos.piece_count())
    for feature, base in END_FEATURES:
        values[FEATURES[feature]] = values[FEATURES[base]] * end
    return [values[name] for name in FEATURES]


def evaluate(pos: Position, weights) -> int:
    return sum(int(w) * f for w, f in zip(weights, features(pos)))


def database_value(pos: Position, ply: int, egdb: Egdb | None) -> int | None:
    """The database's score of a position where neither side can capture, at `ply`; None when not held."""
    if egdb is None or pos.piece_count() > egdb.max_pieces:
        return None
    other = Position(pos.black, pos.white, pos.kings, not pos.black_to_move)
    if any(m.is_capture for m in other.legal_moves()):
        return None
    value, distance = egdb.probe(pos)
    if value == UNKNOWN:
        return None
    if value == DRAW:
        return 0
    return WIN_SCORE - (ply + distance) if value == WIN else -(WIN_SCORE - (ply + distance))


def minimax(pos: Position, depth: int, leaf: Callable[[Position], int], egdb: Egdb | None = None,
            ply: int = 0, extensions: int = 0, threats: bool = False, recaptures: bool = False,
            after_capture: bool = False) -> int:
    """Full-width negamax score for the side to move, by the search's rules (no pruning at all); `leaf` scores
    a quiet leaf for its side to move. extensions: how many times a line may be searched a ply deeper than its
    depth (the search's MOST_EXTENSIONS), by looking past a leaf whose side to move is threatened with a capture
    (threats) or by a capture that answers a capture (recaptures: after_capture says the move that led here was
    one); none of them for the plain search."""
    moves = pos.legal_moves()
    if not moves:
        return -(WIN_SCORE - ply)
    if not moves[0].is_capture and ply > 0:
        value = database_value(pos, ply, egdb)
        if value is not None:
            return value
        threatened = Position(pos.black, pos.white, pos.kings, not pos.black_to_move).legal_moves()
        if depth == 0 and threats and extensions > 0 and threatened and threatened[0].is_capture:
            depth, extensions = 1, extensions - 1
        elif depth <= 0:
            return leaf(pos)
    extend = recaptures and after_capture and moves[0].is_capture and depth > 0 and extensions > 0
    return max(-minimax(pos.play(m), depth if extend else depth - 1, leaf, egdb, ply + 1,
                        extensions - 1 if extend else extensions, threats, recaptures, m.is_capture)
               for m in moves)


def verified_alphabeta(pos: Position, depth: int, leaf: Callable[[Position], int], margin: int,
                       root_order: list[int], alpha: int = -2 * WIN_SCORE, beta: int = 2 * WIN_SCORE,
                       ply: int = 0, verified: bool = False) -> int:
    """The search's verified pruning, spelt out: fail-soft principal-variation alpha-beta (the first move with
    the node's window, the others with a null window, searched again with the full one when they land inside
    it), the root's moves in root_order and the others as generated (the search with its table and ordering off),
    where a null-window node below the root, quiet, at least VERIFY_MIN_DEPTH deep, whose `leaf` value clears
    beta by `margin` is first searched VERIFY_PLIES less deep and returns that search's score if it clears
    beta too; otherwise it is searched at its depth (and not verified again)."""
    moves = pos.legal_moves()
    if not moves:
        return -(WIN_SCORE - ply)
    quiet = not moves[0].is_capture
    if ply > 0 and quiet and depth <= 0:
        return leaf(pos)
    if (margin and ply > 0 and quiet and not verified and depth >= VERIFY_MIN_DEPTH and beta - alpha == 1
            and -WIN_THRESHOLD < beta < WIN_THRESHOLD and leaf(pos) >= beta + margin):
        shallow = verified_alphabeta(pos, depth - VERIFY_PLIES, leaf, margin, root_order, alpha, beta, ply, True)
        if shallow >= beta:
            return shallow
    best = -2 * WIN_SCORE
    for k, move in enumerate([moves[i] for i in root_order] if ply == 0 else moves):
        child = pos.play(move)

        def searched(lo: int, hi: int) -> int:
            return -verified_alphabeta(child, depth - 1, leaf, margin, root_order, -hi, -lo, ply + 1)

        score = searched(alpha, beta) if k == 0 else searched(alpha, alpha + 1)
        if k > 0 and alpha < score < beta:
            score = searched(alpha, beta)
        if score > best:
            best = score
            alpha = max(alpha, score)
            if score >= beta:
                break
    return best
