"""Reading standard numeric move notation and PDN-style FEN (Move and Position write themselves)."""

from __future__ import annotations

import re

from zero.rules.game import Move, Position


class NotationError(ValueError):
    """Text that is not a valid move or FEN, or a move that is not legal here (the message says which)."""


_MOVE_RE = re.compile(r"^\s*(\d{1,2})((?:\s*[-x:]\s*\d{1,2})+)\s*$")


def parse_squares(text: str) -> tuple[list[int], bool]:
    """Squares named by a move text and whether it is written as a capture ('x' or ':')."""
    m = _MOVE_RE.match(text)
    if not m:
        raise NotationError(f"not a move: {text!r} (expected e.g. 11-15, 22x15 or 26x17x10x1)")
    squares = [int(s) for s in re.findall(r"\d+", text)]
    for s in squares:
        if not 1 <= s <= 32:
            raise NotationError(f"square {s} out of range 1-32 in {text!r}")
    return squares, ("x" in m.group(2) or ":" in m.group(2))


def resolve_move(text: str, legal: list[Move], *, strict_capture_mark: bool = False) -> Move:
    """The legal move a text names.

    A full path must match exactly; a capture written with only its start and end squares (26x1) matches
    every legal capture between them and is an error naming the candidates when more than one does.
    With strict_capture_mark, '-' for a capture or 'x' for a step is refused instead of tolerated.
    """
    squares, marked_capture = parse_squares(text)
    exact = [mv for mv in legal if list(mv.path) == squares]
    candidates = exact or [
        mv for mv in legal if len(squares) == 2 and mv.from_square == squares[0] and mv.to_square == squares[1]
    ]
    if not candidates:
        shown = ", ".join(str(mv) for mv in legal) or "none"
        raise NotationError(f"illegal move {text.strip()}; legal moves: {shown}")
    if len(candidates) > 1:
        shown = ", ".join(str(mv) for mv in candidates)
        raise NotationError(f"ambiguous move {text.strip()}: it could be {shown}; write the full path")
    move = candidates[0]
    if strict_capture_mark and marked_capture != move.is_capture:
        raise NotationError(f"{text.strip()} is {'a capture' if move.is_capture else 'not a capture'}: write {move}")
    return move


def _squares_list(spec: str) -> list[tuple[int, bool]]:
    """Parse '1,2,K5,9-12' into (square, is_king) pairs."""
    out = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        king = item[0] in "Kk"
        body = item[1:] if king else item
        m = re.fullmatch(r"(\d{1,2})(?:-(\d{1,2}))?", body)
        if not m:
            raise NotationError(f"bad square {item!r} in FEN")
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        if not (1 <= lo <= hi <= 32):
            raise NotationError(f"square range {item!r} outside 1-32 in FEN")
        out.extend((s, king) for s in range(lo, hi + 1))
    return out


PIECES_A_SIDE = 12  # no game reaches more: pieces are only ever captured, never added


def fen_to_position(fen: str) -> Position:
    """Parse a PDN FEN such as 'B:W21-32:B1-12' or '[FEN "W:WK19,K23:B12,K28"]'-style content."""
    text = fen.strip().strip('"').strip()
    if text.endswith("."):
        text = text[:-1]
    parts = [p.strip() for p in text.split(":") if p.strip()]
    if not parts or parts[0].upper() not in ("B", "W"):
        raise NotationError(f"FEN must start with the side to move (B or W): {fen!r}")
    black = white = kings = 0
    seen_colours = set()
    for part in parts[1:]:
        colour = part[0].upper()
        if colour not in ("B", "W") or colour in seen_colours:
            raise NotationError(f"bad FEN field {part!r} in {fen!r}")
        seen_colours.add(colour)
        for sq, king in _squares_list(part[1:]):
            bit = 1 << (sq - 1)
            if (black | white) & bit:
                raise NotationError(f"square {sq} given twice in FEN {fen!r}")
            if colour == "B":
                black |= bit
            else:
                white |= bit
            if king:
                kings |= bit
    if black & ~kings & 0xF0000000:
        raise NotationError(f"a black man on White's back row cannot exist: {fen!r}")
    if white & ~kings & 0xF:
        raise NotationError(f"a white man on Black's back row cannot exist: {fen!r}")
    for name, side in (("Black", black), ("White", white)):
        if side.bit_count() > PIECES_A_SIDE:
            raise NotationError(f"{name} has {side.bit_count()} pieces, more than the {PIECES_A_SIDE} a side starts "
                                f"with: {fen!r}")
    return Position(black, white, kings, parts[0].upper() == "B")


INITIAL_FEN = Position.initial().fen()
