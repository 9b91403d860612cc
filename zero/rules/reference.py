"""A slow, plain-Python statement of the rules, used by the tests only to check the numba move generator.

It is written on its own (row, column) board and shares nothing with `zero.rules.bitboard` or `zero.rules.movegen`, so a
mistake in their bit tricks cannot be repeated here. Input and output use the same conventions as the rest
of the package: masks with bit s-1 for square s (1-32), Black starting on 1-12 and moving toward row 7.

Rules (English checkers): men step one square diagonally forward, kings one square in any diagonal direction;
a capture is compulsory, any capture may be chosen, and the chosen one is jumped to its end; a piece is never
jumped twice; a man reaching the far row is crowned and stops there. Two capture paths with the same origin,
destination and captured pieces are one move unless `count_paths` asks for every path.
"""

from __future__ import annotations

# Diagonal directions as (row step, column step); Black's men go to higher rows.
BLACK_MAN_DIRECTIONS = ((1, -1), (1, 1))
WHITE_MAN_DIRECTIONS = ((-1, -1), (-1, 1))
KING_DIRECTIONS = BLACK_MAN_DIRECTIONS + WHITE_MAN_DIRECTIONS


def square_to_rc(square: int) -> tuple[int, int]:
    """(row, column) of a square 1-32; the dark squares of row 0 are columns 1, 3, 5, 7."""
    row = (square - 1) // 4
    col = 2 * ((square - 1) % 4) + (1 if row % 2 == 0 else 0)
    return row, col


def rc_to_square(row: int, col: int) -> int | None:
    """Square 1-32 at (row, column), or None off the board or on a light square."""
    if 0 <= row < 8 and 0 <= col < 8 and (row + col) % 2 == 1:
        return row * 4 + col // 2 + 1
    return None


def _board(black: int, white: int, kings: int) -> dict[tuple[int, int], tuple[str, bool]]:
    """Occupied (row, column) -> (colour 'b'/'w', is_king)."""
    board = {}
    for square in range(1, 33):
        bit = 1 << (square - 1)
        if black & bit or white & bit:
            board[square_to_rc(square)] = ("b" if black & bit else "w", bool(kings & bit))
    return board


def _directions(colour: str, king: bool) -> tuple[tuple[int, int], ...]:
    if king:
        return KING_DIRECTIONS
    return BLACK_MAN_DIRECTIONS if colour == "b" else WHITE_MAN_DIRECTIONS


def _crown_row(colour: str) -> int:
    return 7 if colour == "b" else 0


def _capture_paths(board, origin, colour, king):
    """Every complete capture path of the piece on origin, as (list of (row, col), set of jumped (row, col))."""
    found = []

    def extend(path, jumped):
        row, col = path[-1]
        extended = False
        # A man that has just been crowned stops, even if it could jump on as a king.
        if king or row != _crown_row(colour):
            for dr, dc in _directions(colour, king):
                over = (row + dr, col + dc)
                land = (row + 2 * dr, col + 2 * dc)
                if rc_to_square(*land) is None or over in jumped:
                    continue
                victim = board.get(over)
                # The moving piece has left its origin, so the origin counts as empty.
                land_free = land not in board or land == origin
                if victim is not None and victim[0] != colour and land_free:
                    extended = True
                    extend(path + [land], jumped | {over})
        if not extended and len(path) > 1:
            found.append((path, jumped))

    extend([origin], frozenset())
    return found


def _mask(cells) -> int:
    return sum(1 << (rc_to_square(*rc) - 1) for rc in cells)


def reference_moves(
    black: int, white: int, kings: int, black_to_move: bool, count_paths: bool = False
) -> list[tuple[tuple[int, ...], int]]:
    """Legal moves of the side to move as (path of squares 1-32, mask of captured pieces)."""
    board = _board(black, white, kings)
    colour = "b" if black_to_move else "w"
    own = [(rc, king) for rc, (c, king) in sorted(board.items()) if c == colour]
    captures = []
    for rc, king in own:
        for path, jumped in _capture_paths(board, rc, colour, king):
            captures.append((tuple(rc_to_square(*p) for p in path), _mask(jumped)))
    if captures:
        if count_paths:
            return captures
        unique = {}
        for path, captured in captures:
            unique.setdefault((path[0], path[-1], captured), (path, captured))
        return list(unique.values())
    steps = []
    for (row, col), king in own:
        for dr, dc in _directions(colour, king):
            target = rc_to_square(row + dr, col + dc)
            if target is not None and (row + dr, col + dc) not in board:
                steps.append(((rc_to_square(row, col), target), 0))
    return steps


def reference_play(
    black: int, white: int, kings: int, black_to_move: bool, path: tuple[int, ...]
) -> tuple[int, int, int]:
    """(black, white, kings) after the move along `path`; captured pieces are the squares jumped over."""
    origin, target = path[0], path[-1]
    moving = 1 << (origin - 1)
    arriving = 1 << (target - 1)
    captured = 0
    for a, b in zip(path, path[1:]):
        (ra, ca), (rb, cb) = square_to_rc(a), square_to_rc(b)
        if abs(ra - rb) == 2:
            captured |= 1 << (rc_to_square((ra + rb) // 2, (ca + cb) // 2) - 1)
    was_king = bool(kings & moving)
    colour = "b" if black_to_move else "w"
    crowned = was_king or square_to_rc(target)[0] == _crown_row(colour)
    if black_to_move:
        black = (black & ~moving) | arriving
        white &= ~captured
    else:
        white = (white & ~moving) | arriving
        black &= ~captured
    kings &= ~(moving | captured)
    if crowned:
        kings |= arriving
    return black, white, kings


def reference_perft(
    black: int, white: int, kings: int, black_to_move: bool, depth: int, count_paths: bool = False
) -> int:
    """Leaves of the move tree `depth` plies deep (slow; small depths only)."""
    if depth == 0:
        return 1
    total = 0
    for path, _ in reference_moves(black, white, kings, black_to_move, count_paths):
        b, w, k = reference_play(black, white, kings, black_to_move, path)
        total += reference_perft(b, w, k, not black_to_move, depth - 1, count_paths)
    return total
