"""What an actor hands the replay buffer: one finished self-play game, its positions as column arrays.

This is the contract between search/actors (producers) and the replay store (consumer); the store's
on-disk schema mirrors these fields.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Policy targets are stored sparsely: at most this many (action, visit share) pairs per position, -1 padded.
# English checkers positions have far fewer legal moves than this; the writer refuses more rather than truncate.
POLICY_SLOTS = 64


@dataclass
class PositionRows:
    """One row per position where the player to move chose a move (ply 0 .. length-1)."""

    black: np.ndarray  # uint32 [n] board masks, bit s-1 = square s
    white: np.ndarray  # uint32 [n]
    kings: np.ndarray  # uint32 [n]
    black_to_move: np.ndarray  # bool [n]
    no_progress: np.ndarray  # int16 [n] plies since the last capture or man move
    repetitions: np.ndarray  # int8 [n] times this position had occurred (1 = first)
    ply: np.ndarray  # int16 [n]
    policy_actions: np.ndarray  # int16 [n, POLICY_SLOTS] perspective action index (zero.encoding), -1 = empty slot
    policy_visits: np.ndarray  # float32 [n, POLICY_SLOTS] visit share per action, sums to 1 over used slots
    full_search: np.ndarray  # bool [n] a full search (policy target); False = cheap playout-cap search
    forced: np.ndarray  # bool [n] single legal move, played without search (no policy target)
    root_value: np.ndarray  # float32 [n] search value of the root for the side to move, in [-1, 1]

    def __len__(self) -> int:
        return len(self.ply)

    @classmethod
    def from_lists(cls, columns: dict[str, list]) -> "PositionRows":
        """Rows from one list per field, as a game is played (policy fields: one POLICY_SLOTS row per
        position, nested or flat), converted to the store's dtypes."""
        n = len(columns["ply"])
        return cls(**{
            name: np.asarray(columns[name], dtype).reshape((n, POLICY_SLOTS) if name.startswith("policy_") else n)
            for name, dtype in _DTYPES.items()
        })


_DTYPES = {
    "black": np.uint32, "white": np.uint32, "kings": np.uint32, "black_to_move": np.bool_,
    "no_progress": np.int16, "repetitions": np.int8, "ply": np.int16, "policy_actions": np.int16,
    "policy_visits": np.float32, "full_search": np.bool_, "forced": np.bool_, "root_value": np.float32,
}


@dataclass
class GameRecord:
    positions: PositionRows
    winner: int  # +1 Black won, -1 White won, 0 draw (as decided, including by resignation)
    termination: str  # zero.game.Termination value
    length: int  # plies played
    opening: str  # ballot moves or "start"
    pdn: str  # the whole game as PDN text
    seed: int
    checkpoint: str  # checkpoint file name (or id) the actor used
    model_version: int  # training step of that checkpoint
    # Resignation bookkeeping: in games that play on past a resignation (to measure wrong resignations),
    # the side that would have resigned (+1 Black, -1 White, 0 none) and when.
    would_resign_side: int = 0
    would_resign_ply: int = -1

    def results_for_side_to_move(self) -> np.ndarray:
        """Per position: +1 if the side to move there went on to win, -1 lose, 0 draw."""
        sign = np.where(self.positions.black_to_move, 1, -1)
        return (sign * self.winner).astype(np.int8)
