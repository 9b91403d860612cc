"""Positions, moves and games: the typed Python face of the numba rules kernels.

A Position is the board and the side to move; a Game adds the history the draw rules need (threefold
repetition and the no-progress count) and decides when the game is over.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from zero.rules import movegen
from zero.run.config import setting

INITIAL_BLACK = (1 << 12) - 1
INITIAL_WHITE = ((1 << 12) - 1) << 20


@dataclass(frozen=True, slots=True)
class Move:
    """A full move: the squares it visits (1-32, origin first) and the mask of captured pieces."""

    path: tuple[int, ...]
    captured: int = 0

    @property
    def from_square(self) -> int:
        return self.path[0]

    @property
    def to_square(self) -> int:
        return self.path[-1]

    @property
    def is_capture(self) -> bool:
        return self.captured != 0

    def __str__(self) -> str:
        return ("x" if self.captured else "-").join(str(s) for s in self.path)


@dataclass(frozen=True, slots=True)
class Position:
    """Board masks (bit s-1 = square s) and the side to move."""

    black: int
    white: int
    kings: int = 0
    black_to_move: bool = True

    @classmethod
    def initial(cls) -> "Position":
        return cls(INITIAL_BLACK, INITIAL_WHITE, 0, True)

    def legal_moves(self, count_paths: bool = False) -> list[Move]:
        """Legal moves in generation order; count_paths keeps duplicate king-capture paths apart."""
        buf = _buffer()
        n = movegen.generate(self.black, self.white, self.kings, self.black_to_move, not count_paths, buf)
        moves = []
        for row in buf[:n]:
            length = int(row[movegen.F_LEN])
            path = tuple(int(b) + 1 for b in row[movegen.F_PATH : movegen.F_PATH + length])
            moves.append(Move(path, int(row[movegen.F_CAPTURED])))
        return moves

    def play(self, move: Move) -> "Position":
        """The position after a move (which the caller took from legal_moves)."""
        b, w, k = movegen.make(
            self.black, self.white, self.kings, self.black_to_move,
            move.from_square - 1, move.to_square - 1, move.captured,
        )
        return Position(int(b), int(w), int(k), not self.black_to_move)

    def is_irreversible(self, move: Move) -> bool:
        """A capture or a man's move: it resets the no-progress count and ends repetition chains."""
        return move.is_capture or not (self.kings >> (move.from_square - 1)) & 1

    def piece_at(self, sq: int) -> str:
        """'b', 'B' (black king), 'w', 'W' or '' for square sq (1-32)."""
        bit = 1 << (sq - 1)
        king = bool(self.kings & bit)
        if self.black & bit:
            return "B" if king else "b"
        if self.white & bit:
            return "W" if king else "w"
        return ""

    def piece_count(self) -> int:
        return (self.black | self.white).bit_count()

    def mirrored(self) -> "Position":
        """The same position seen from the other side: colours swapped, square s -> 33 - s."""
        return Position(_reverse32(self.white), _reverse32(self.black), _reverse32(self.kings), not self.black_to_move)

    def fen(self) -> str:
        """PDN-style FEN, e.g. 'B:W21,22:B9,K14' (side to move, White's then Black's pieces, K for kings);
        zero.rules.notation reads it back."""
        def side(mask: int) -> str:
            return ",".join(
                ("K" if self.kings >> (s - 1) & 1 else "") + str(s) for s in range(1, 33) if mask >> (s - 1) & 1
            )

        return f"{'B' if self.black_to_move else 'W'}:W{side(self.white)}:B{side(self.black)}"

    def __str__(self) -> str:
        return self.fen()


def _reverse32(x: int) -> int:
    return int(f"{x:032b}"[::-1], 2)


_BUF = None


def _buffer():
    global _BUF
    if _BUF is None:
        _BUF = movegen.new_move_buffer()
    return _BUF


class Termination(str, Enum):
    NO_MOVES = "no-moves"  # the side to move has no legal move and loses
    REPETITION = "repetition"
    NO_PROGRESS = "no-progress"
    MAX_LENGTH = "max-length"  # RulesConfig.max_plies reached: a draw, flagged as cut short
    RESIGNATION = "resignation"
    AGREEMENT = "agreement"
    DATABASE = "database"  # self-play adjudicated at its first endgame-database position, by the database's value


# The most plies any count of a game's plies may be: far past any game the draw rules let go on (the
# no-progress window also sizes the repetition history every search tree holds).
MOST_PLIES = 10_000


@dataclass(frozen=True)
class RulesConfig:
    """Draw rules. The limits are settings because published rule sets and engines differ on them."""

    # The same position, same side to move, this many times.
    repetitions_for_draw: int = setting(3, low=2, high=MOST_PLIES)
    no_progress_plies: int = setting(80, low=1, high=MOST_PLIES)  # 40 moves each with no capture and no man moved
    # The one game-length cap of self-play, gating and matches: a game still going after this many plies is
    # a draw flagged max-length (it bounds a match's time; the other draw rules end nearly every game first).
    # 0 = no cap.
    max_plies: int = setting(300, low=0, high=MOST_PLIES)


@dataclass(frozen=True)
class Outcome:
    """Final result: +1 Black won, -1 White won, 0 draw; and why the game ended."""

    winner: int
    termination: Termination

    @property
    def pdn_result(self) -> str:
        return {1: "1-0", -1: "0-1", 0: "1/2-1/2"}[self.winner]


@dataclass
class Game:
    """A game in progress: start position, moves played, and the draw-rule state after each."""

    start: Position = field(default_factory=Position.initial)
    rules: RulesConfig = field(default_factory=RulesConfig)
    moves: list[Move] = field(default_factory=list)
    positions: list[Position] = field(init=False)
    no_progress: list[int] = field(init=False)  # plies since the last capture or man move, per position
    outcome: Outcome | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        played = self.moves
        self.moves = []
        self.positions = [self.start]
        self.no_progress = [0]
        self._legal: list[Move] | None = None
        self._update_outcome()
        for mv in played:
            self.play(mv)

    @property
    def position(self) -> Position:
        return self.positions[-1]

    @property
    def ply(self) -> int:
        return len(self.moves)

    def legal_moves(self) -> list[Move]:
        if self._legal is None:
            self._legal = self.position.legal_moves()
        return self._legal

    def repetitions(self) -> int:
        """How many times the current position has occurred (1 = first time)."""
        current = self.position
        count = 1
        # Only positions since the last irreversible move can repeat; same side to move means step 2.
        window = self.no_progress[-1]
        for back in range(2, window + 1, 2):
            if self.positions[-1 - back] == current:
                count += 1
        return count

    def play(self, move: Move) -> None:
        if self.outcome is not None:
            raise ValueError(f"the game is over ({self.outcome.termination.value})")
        if move not in self.legal_moves():
            raise ValueError(f"illegal move {move} in {self.position}")
        before = self.position
        self.moves.append(move)
        self.positions.append(before.play(move))
        self.no_progress.append(0 if before.is_irreversible(move) else self.no_progress[-1] + 1)
        self._legal = None
        self._update_outcome()

    def undo(self) -> Move:
        """Take back the last move (the outcome is recomputed, so a finished game can be reopened)."""
        if not self.moves:
            raise ValueError("no move to undo")
        move = self.moves.pop()
        self.positions.pop()
        self.no_progress.pop()
        self._legal = None
        self._update_outcome()
        return move

    def prefix(self, plies: int) -> "Game":
        """The game as it stood after its first `plies` moves, without replaying them (the positions are
        shared: they are immutable)."""
        if not 0 <= plies <= self.ply:
            raise ValueError(f"a game of {self.ply} plies has no prefix of {plies}")
        game = Game.__new__(Game)
        game.start, game.rules, game.moves = self.start, self.rules, self.moves[:plies]
        game.positions, game.no_progress = self.positions[:plies + 1], self.no_progress[:plies + 1]
        game._legal = None
        game._update_outcome()
        return game

    def finish(self, winner: int, termination: Termination) -> None:
        """End the game by a decision outside the rules (resignation, agreed draw)."""
        self.outcome = Outcome(winner, termination)

    def _update_outcome(self) -> None:
        self.outcome = None
        if not self.legal_moves():
            self.outcome = Outcome(-1 if self.position.black_to_move else 1, Termination.NO_MOVES)
        elif self.repetitions() >= self.rules.repetitions_for_draw:
            self.outcome = Outcome(0, Termination.REPETITION)
        elif self.no_progress[-1] >= self.rules.no_progress_plies:
            self.outcome = Outcome(0, Termination.NO_PROGRESS)
        elif self.rules.max_plies and self.ply >= self.rules.max_plies:
            self.outcome = Outcome(0, Termination.MAX_LENGTH)

