"""Opening ballots: the forced first moves that matches and self-play games start from.

A ballot file is .txt (the moves of one opening per line), .tsv (a `moves` column, optionally pieces
removed from the initial position and a FEN to check) or .pdn (one start position per `[FEN]` tag). Every
opening is replayed against the rules when it is loaded, so a bad ballot fails at once with its line.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zero.rules.game import INITIAL_BLACK, INITIAL_WHITE, Move, Position
from zero.rules.notation import NotationError, fen_to_position, resolve_move


class BallotError(ValueError):
    """A ballot file that cannot be read, or an opening in it that is not legal."""


@dataclass(frozen=True)
class Opening:
    """A ballot entry: the forced moves (as written) from a start position."""

    name: str
    moves: tuple[str, ...]
    start: Position = field(default_factory=Position.initial)

    def replay(self) -> list[Move]:
        """The opening's moves resolved against the legal moves (NotationError when one is illegal)."""
        pos = self.start
        played = []
        for text in self.moves:
            move = resolve_move(text, pos.legal_moves())
            played.append(move)
            pos = pos.play(move)
        return played


def ballot_plies(name: str, start: Position, moves: Sequence[Move]) -> int:
    """How many of a game's first moves were forced by its ballot, read from the opening's name as a match
    record's Opening tag gives it (the ballot's moves, after any pieces removed): the longest run of the
    game's first moves that the name ends with. 0 for a name that holds no moves (a named opening, a FEN)."""
    words = name.split()
    for plies in range(min(len(words), len(moves)), 0, -1):
        try:
            if Opening(name, tuple(words[-plies:]), start).replay() == list(moves[:plies]):
                return plies
        except NotationError:
            continue
    return 0


# ------------------------------------------------------------------------------------------------ ballots

def _checked(opening: Opening, where: str, fen_after: str | None = None) -> Opening:
    try:
        moves = opening.replay()
    except NotationError as exc:
        raise BallotError(f"{where}: opening {' '.join(opening.moves)!r}: {exc}") from None
    if fen_after:
        pos = opening.start
        for mv in moves:
            pos = pos.play(mv)
        if pos != fen_to_position(fen_after):
            raise BallotError(f"{where}: opening {' '.join(opening.moves)!r} does not reach its FEN {fen_after}")
    return opening


def _from_text(lines: list[str], path: Path) -> list[Opening]:
    """One opening per line, moves separated by spaces ('9-13 21-17 5-9'); '#' starts a comment."""
    out = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if text:
            moves = tuple(text.split())
            out.append(_checked(Opening(" ".join(moves), moves), f"{path}:{number}"))
    return out


def _squares_removed(start: Position, row: dict[str, str], where: str) -> Position:
    black, white = start.black, start.white
    for column, is_black in (("remove_black", True), ("remove_white", False)):
        for sq in re.findall(r"\d+", row.get(column) or ""):
            bit = 1 << (int(sq) - 1)
            if not (black if is_black else white) & bit:
                raise BallotError(f"{where}: {column} names square {sq}, which holds no such piece")
            if is_black:
                black &= ~bit
            else:
                white &= ~bit
    return Position(black, white, 0, True)


def _from_tsv(lines: list[str], path: Path) -> list[Opening]:
    """Tab-separated with a header: a `moves` column, optionally `remove_black`/`remove_white` (pieces taken
    off the initial position first, as in 11-man ballots) and `fen`/`fen_after` (checked after the moves).
    Rows whose `status`/`deck` is 'lost' or 'barred' are skipped: those openings are not played in matches."""
    reader = csv.DictReader(lines, delimiter="\t")
    if not reader.fieldnames or "moves" not in reader.fieldnames:
        raise BallotError(f"{path}: a .tsv ballot needs a header with a 'moves' column")
    out = []
    for number, row in enumerate(reader, 2):
        where = f"{path}:{number}"
        if (row.get("status") or row.get("deck") or "").strip() in ("lost", "barred"):
            continue
        moves = tuple((row.get("moves") or "").split())
        start = _squares_removed(Position(INITIAL_BLACK, INITIAL_WHITE), row, where)
        name = " ".join(moves)
        if start != Position.initial():
            name = f"-{row.get('remove_black')} -{row.get('remove_white')} {name}"
        out.append(_checked(Opening(name, moves, start), where, row.get("fen_after") or row.get("fen")))
    return out


_FEN_TAG = re.compile(r'\[FEN\s+"([^"]+)"\]')


def _from_fen_pdn(lines: list[str], path: Path) -> list[Opening]:
    """A PDN file of start positions (`[FEN "..."] *` per game): each FEN is an opening with no moves."""
    out = []
    for number, line in enumerate(lines, 1):
        for fen in _FEN_TAG.findall(line):
            try:
                out.append(Opening(fen, (), fen_to_position(fen)))
            except NotationError as exc:
                raise BallotError(f"{path}:{number}: {exc}") from None
    return out


def load_openings(path: str | Path) -> list[Opening]:
    """Openings from a ballot file: .txt (moves per line), .tsv (with a 'moves' column) or .pdn (FEN tags)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except OSError as exc:
        raise BallotError(f"cannot read ballot {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise BallotError(f"{path}: not a ballot: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    readers = {".txt": _from_text, ".tsv": _from_tsv, ".pdn": _from_fen_pdn}
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise BallotError(f"{path}: unknown ballot format (expected {', '.join(readers)})")
    openings = reader(lines, path)
    if not openings:
        raise BallotError(f"{path}: no openings found")
    return openings
