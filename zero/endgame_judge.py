"""The solved-endgame mistake rate: how often a player throws away the value an endgame database proves.

A move is judged when it is played from a position the database holds and the player had a choice (a
forced move cannot be wrong, and counting the many forced captures would only dilute the rate). It is a
mistake when its value for the player who made it is below the position's: a win given up for a draw or a
loss, a draw for a loss. Distances are not judged: a slower win keeps the value. The database has no draw
by repetition or no-progress count (as the published ones have none), so a won ending shuffled into a
rules draw shows in the game's result, not here.

Self-play, gating and rating games, and the `match` command, report this per player; a player that does
not consult the database shows whether its network has learnt endgames.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from zero.egdb import UNKNOWN, Egdb
from zero.game import Move, Position


@dataclass
class EndgameMistakes:
    """Moves judged against the database, and how many of them threw its value away."""

    moves: int = 0
    mistakes: int = 0

    def __iadd__(self, other: "EndgameMistakes") -> "EndgameMistakes":
        self.moves += other.moves
        self.mistakes += other.mistakes
        return self

    @property
    def rate(self) -> float | None:
        return self.mistakes / self.moves if self.moves else None

    def __str__(self) -> str:
        if not self.moves:
            return "no moves judged"
        return f"{self.mistakes} of {self.moves} moves ({100 * self.rate:.1f} %)"

    def to_json(self) -> list[int]:
        return [self.moves, self.mistakes]

    @classmethod
    def from_json(cls, data: Sequence[int]) -> "EndgameMistakes":
        moves, mistakes = (int(x) for x in data)
        if not 0 <= mistakes <= moves:
            raise ValueError(f"endgame mistakes {data!r}: need 0 <= mistakes <= moves")
        return cls(moves, mistakes)


def is_mistake(egdb: Egdb, position: Position, move: Move) -> bool | None:
    """Whether `move` (legal in `position`) throws away the database value; None when it is not judged."""
    if position.piece_count() > egdb.max_pieces or len(position.legal_moves()) < 2:
        return None
    before = egdb.probe(position).value
    after = egdb.probe(position.play(move)).value
    if UNKNOWN in (before, after):
        raise ValueError(f"{position}: not in the {egdb.max_pieces}-piece database")
    return -after < before


def judge_game(egdb: Egdb, start: Position, moves: Sequence[Move]) -> tuple[EndgameMistakes, EndgameMistakes]:
    """Black's and White's judged moves and mistakes in one game."""
    black, white = EndgameMistakes(), EndgameMistakes()
    position = start
    for move in moves:
        # Pieces only go: once past the opening's crowd, most of a game's plies are skipped right here.
        if position.piece_count() <= egdb.max_pieces:
            verdict = is_mistake(egdb, position, move)
            if verdict is not None:
                side = black if position.black_to_move else white
                side.moves += 1
                side.mistakes += verdict
        position = position.play(move)
    return black, white
