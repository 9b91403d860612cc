"""An opening book from expert games: the moves masters played in the first plies of the Open Checkers
Archive, by position, so that a player on the clock plays the experts' main line at once and banks the time
for the middlegame, as the endgame database does at the other end of the game.

A book holds, for every position reached within `max_plies` of a game's start in at least two games, each
move played there: how many games played it and the mover's score in them (1 win, 1/2 draw). Positions
merge across games and move orders (transpositions). `move` answers only where the experts' evidence is
broad: at least `min_games` games through the position, and then their most played move (ties to the
better score, then to the lower from-, to- and captured squares).

Built from the PDN in seconds (`build_book`), saved once under the cache (`ensure_book`) and checked when
loaded: a damaged or foreign file is refused with a clear message and `ensure_book` builds it again.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zero.corpus.pdn import PdnGame, read_pdn
from zero.rules.game import Move, Position
from zero.run.config import atomic_write_bytes, notify
from zero.run.data import OCA_FILE, require_data_file

ENV_VAR = "CHECKERS_ZERO_BOOK"
FORMAT = "checkers-zero-opening-book"
VERSION = 1
MAX_PLIES = 30  # deep enough for the 3-move ballot's main lines; deeper, few positions recur
MIN_GAMES = 10  # games through a position before the book answers there
_COLUMNS = ("black", "white", "kings", "black_to_move", "move_from", "move_to", "captured", "games", "score")
_SCORES = {"1-0": 1.0, "0-1": 0.0, "1/2-1/2": 0.5}


class BookFileError(ValueError):
    """A book file that cannot be read, is of another format or version, or whose columns disagree."""


@dataclass(frozen=True)
class BookMove:
    """A move of the book at a position, with its games and the mover's score in them (0 .. 1)."""

    move_from: int  # square 1-32
    move_to: int
    captured: int  # mask of the captured pieces
    games: int
    score: float


class OpeningBook:
    """Expert moves by position (see the module docstring). `source` names the games it was built from."""

    def __init__(self, columns: dict[str, np.ndarray], source: str, max_plies: int,
                 min_games: int = MIN_GAMES) -> None:
        self.columns = columns
        self.min_games = min_games
        self.source = source
        self.max_plies = max_plies
        self._moves: dict[tuple[int, int, int, bool], list[BookMove]] = defaultdict(list)
        for b, w, k, btm, frm, to, cap, games, score in zip(*(columns[name].tolist() for name in _COLUMNS)):
            self._moves[(b, w, k, bool(btm))].append(BookMove(frm, to, cap, games, score))
        for moves in self._moves.values():
            moves.sort(key=lambda m: (-m.games, -m.score))  # stable: equal ones stay in the rows' order

    def __len__(self) -> int:
        """Positions in the book."""
        return len(self._moves)

    def entries(self, position: Position) -> list[BookMove]:
        """The book's moves at `position`, most played first (empty when it is not in the book)."""
        return list(self._moves.get((position.black, position.white, position.kings, position.black_to_move), []))

    def move(self, position: Position, min_games: int | None = None) -> Move | None:
        """The experts' most played legal move at `position` when at least `min_games` (default the book's)
        games went through it, else None (the search decides)."""
        entries = self.entries(position)
        if sum(m.games for m in entries) < (self.min_games if min_games is None else min_games):
            return None
        legal = {(m.from_square, m.to_square, m.captured): m for m in position.legal_moves()}
        for entry in entries:
            move = legal.get((entry.move_from, entry.move_to, entry.captured))
            if move is not None:
                return move
        return None


def build_book(games: Iterable[PdnGame], source: str, max_plies: int = MAX_PLIES) -> OpeningBook:
    """The book of `games` (games without a result, and unreadable ones, are skipped)."""
    counts: dict[tuple, list[float]] = defaultdict(lambda: [0, 0.0])
    for game in games:
        if not isinstance(game, PdnGame) or game.result not in _SCORES:
            continue
        black_score = _SCORES[game.result]
        position = game.start
        for move in game.moves[:max_plies]:
            key = (position.black, position.white, position.kings, position.black_to_move,
                   move.from_square, move.to_square, move.captured)
            entry = counts[key]
            entry[0] += 1
            entry[1] += black_score if position.black_to_move else 1.0 - black_score
            position = position.play(move)
    at_position: dict[tuple, int] = defaultdict(int)
    for key, (games_played, _) in counts.items():
        at_position[key[:4]] += games_played
    # A position one game reached tells nothing about what experts prefer there: left out, which keeps the
    # book a tenth of the size.
    rows = sorted((key, entry) for key, entry in counts.items() if at_position[key[:4]] >= 2)
    columns = {name: np.zeros(len(rows), dtype=np.float64 if name == "score" else np.int64) for name in _COLUMNS}
    for i, (key, (games_played, points)) in enumerate(rows):
        for name, value in zip(_COLUMNS[:7], key):
            columns[name][i] = value
        columns["games"][i] = games_played
        columns["score"][i] = points / games_played
    return OpeningBook(columns, source, max_plies)


def default_path() -> Path:
    """Where the book lives unless told otherwise: $CHECKERS_ZERO_BOOK, else ~/.cache/checkers-zero/book.npz."""
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else Path.home() / ".cache" / "checkers-zero" / "book.npz"


def save_book(book: OpeningBook, path: Path) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, format=np.array(FORMAT), version=np.array(VERSION), source=np.array(book.source),
             max_plies=np.array(book.max_plies), **book.columns)
    atomic_write_bytes(Path(path), buffer.getvalue())


def load_book(path: Path) -> OpeningBook:
    """The book saved at `path`; BookFileError when it is missing, damaged or not a book of this version."""
    try:
        with np.load(path, allow_pickle=False) as data:
            fields = {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise BookFileError(f"{path}: no opening book there (it is built from the OCA games on first use)") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise BookFileError(f"{path}: not a readable opening book ({exc})") from None
    if str(fields.get("format", "")) != FORMAT:
        raise BookFileError(f"{path}: not a {FORMAT} file")
    if int(fields.get("version", -1)) != VERSION:
        raise BookFileError(f"{path}: book format version {int(fields.get('version', -1))}, this code reads {VERSION}")
    missing = [name for name in _COLUMNS if name not in fields]
    lengths = {fields[name].shape for name in _COLUMNS if name in fields}
    if missing or len(lengths) != 1 or len(next(iter(lengths))) != 1 or "source" not in fields:
        raise BookFileError(f"{path}: damaged opening book (columns missing or of different lengths)")
    columns = {name: fields[name] for name in _COLUMNS}
    if columns["games"].size and (columns["games"].min() < 1 or not np.all((columns["score"] >= 0) & (columns["score"] <= 1))):
        raise BookFileError(f"{path}: damaged opening book (games or scores out of range)")
    return OpeningBook(columns, str(fields["source"]), int(fields["max_plies"]))


def book_from_pdn(pdn: Path, max_plies: int = MAX_PLIES) -> OpeningBook:
    """The book of a PDN file, named by the file's name and sha256."""
    digest = hashlib.sha256(Path(pdn).read_bytes()).hexdigest()
    return build_book(read_pdn(pdn), f"{Path(pdn).name} sha256 {digest}", max_plies)


def ensure_book(path: Path | None = None) -> OpeningBook:
    """The saved book, built from the data folder's OCA file on first use (seconds) or when the saved one is
    damaged."""
    path = Path(path) if path is not None else default_path()
    try:
        return load_book(path)
    except BookFileError:
        if path.exists():
            path.unlink()
    games = require_data_file(OCA_FILE)
    # Some seconds of silence read as a hang to a person starting `play` for the first time.
    notify(f"building the opening book from {games} into {path} (once, some seconds) ...")
    book = book_from_pdn(games)
    save_book(book, path)
    return book
