"""The solved-endgame mistake rate: how often a player throws away the value an endgame database proves.

A move is judged when it is played from a position the database holds and the player had a choice (a
forced move cannot be wrong, and counting the many forced captures would only dilute the rate). It is a
mistake when its value for the player who made it is below the position's: a win given up for a draw or a
loss, a draw for a loss. Distances are not judged: a slower win keeps the value. The database has no draw
by repetition or no-progress count (as the published ones have none), so a won ending shuffled into a
rules draw keeps the value at every move: such games are counted apart, per game. A side *held a database
win* when some position of the game is proven won for it, and *let it go* when it then did not win the game
(a draw by repetition, by the no-progress count or the length cap, or a loss after a later mistake).

Self-play, gating and rating games, and the `match` command, report this per player; a player that does
not consult the database shows whether its network has learnt endgames.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from zero.endgames.egdb import LOSS, UNKNOWN, WIN, Egdb
from zero.rules.game import Move, Position


@dataclass
class EndgameMistakes:
    """Moves judged against the database, and how many of them threw its value away."""

    moves: int = 0
    mistakes: int = 0
    wins_held: int = 0  # games in which a position was proven won for this side
    wins_let_go: int = 0  # of those, games this side did not win

    def __iadd__(self, other: "EndgameMistakes") -> "EndgameMistakes":
        self.moves += other.moves
        self.mistakes += other.mistakes
        self.wins_held += other.wins_held
        self.wins_let_go += other.wins_let_go
        return self

    @property
    def rate(self) -> float | None:
        return self.mistakes / self.moves if self.moves else None

    def __str__(self) -> str:
        moves = f"{self.mistakes} of {self.moves} moves ({100 * self.rate:.1f} %)" if self.moves else "no moves judged"
        if not self.wins_held:
            return moves
        return f"{moves}; database wins let go in {self.wins_let_go} of {self.wins_held} games"

    def to_json(self) -> list[int]:
        return [self.moves, self.mistakes, self.wins_held, self.wins_let_go]

    @classmethod
    def from_json(cls, data: Sequence[int]) -> "EndgameMistakes":
        """From to_json's list; a table written before wins were counted holds only moves and mistakes."""
        if len(data) not in (2, 4):
            raise ValueError(f"endgame mistakes {data!r}: need [moves, mistakes] or [moves, mistakes, wins "
                             f"held, wins let go]")
        moves, mistakes, held, let_go = (int(x) for x in [*data, 0, 0][:4])
        if not (0 <= mistakes <= moves and 0 <= let_go <= held):
            raise ValueError(f"endgame mistakes {data!r}: need 0 <= mistakes <= moves and 0 <= wins let go "
                             f"<= wins held")
        return cls(moves, mistakes, held, let_go)


def is_mistake(egdb: Egdb, position: Position, move: Move) -> bool | None:
    """Whether `move` (legal in `position`) throws away the database value; None when it is not judged."""
    if position.piece_count() > egdb.max_pieces or len(position.legal_moves()) < 2:
        return None
    return _gives_up(_value(egdb, position), _value(egdb, position.play(move)))


def _value(egdb: Egdb, position: Position) -> int:
    value = egdb.probe(position).value
    if value == UNKNOWN:
        raise ValueError(f"{position}: not in the {egdb.max_pieces}-piece database")
    return value


def _gives_up(before: int, after: int) -> bool:
    """A move from a position of value `before` (for the mover) to one of value `after` (for the opponent)."""
    return -after < before


def judge_game(egdb: Egdb, start: Position, moves: Sequence[Move],
               winner: int | None = None) -> tuple[EndgameMistakes, EndgameMistakes]:
    """Black's and White's judged moves and mistakes in one game; given the game's `winner` (+1 Black, -1
    White, 0 a draw), also whether each side held a database win and let it go."""
    black, white = EndgameMistakes(), EndgameMistakes()
    positions = [start]
    for move in moves:
        positions.append(positions[-1].play(move))
    # Pieces only go: once past the opening's crowd, most of a game's positions are skipped right here, and
    # each of the rest is probed once (a move's value after is the next position's value before).
    values = [_value(egdb, p) if p.piece_count() <= egdb.max_pieces else None for p in positions]
    held = set()  # the sides (+1 Black, -1 White) some position was proven won for
    for ply, (position, value) in enumerate(zip(positions, values)):
        if value is None:
            continue
        mover = 1 if position.black_to_move else -1
        if value in (WIN, LOSS):
            held.add(mover if value == WIN else -mover)
        if ply < len(moves) and len(position.legal_moves()) >= 2:
            side = black if mover == 1 else white
            side.moves += 1
            side.mistakes += _gives_up(value, values[ply + 1])
    if winner is not None:
        for colour, side in ((1, black), (-1, white)):
            if colour in held:
                side.wins_held += 1
                side.wins_let_go += winner != colour
    return black, white
