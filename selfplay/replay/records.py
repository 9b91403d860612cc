"""What an actor hands the replay buffer: one finished self-play game, its positions as column arrays.

This is the one definition of a self-play record. Each stored field carries its dtype and row shape in its
metadata (`column`); the replay store's arrays, the reader's games and the exporters derive from
POSITION_FIELDS and GAME_FIELDS, so a field is added here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

# Policy targets are stored sparsely: at most this many (action, visit share) pairs per position, -1 padded.
# English checkers positions have far fewer legal moves than this; the writer refuses more rather than truncate.
POLICY_SLOTS = 64
STRING = np.dtypes.StringDType()


def padded_policy(actions: np.ndarray, shares: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A policy as stored: its actions and shares in POLICY_SLOTS slots, the empty ones -1 and 0."""
    padded_actions = np.full(POLICY_SLOTS, -1, np.int16)
    padded_shares = np.zeros(POLICY_SLOTS, np.float32)
    padded_actions[:len(actions)] = actions
    padded_shares[:len(shares)] = shares
    return padded_actions, padded_shares


def column(dtype, shape: tuple[int, ...] = (), **kwargs):
    """A stored field: its numpy dtype and the shape of one row."""
    return field(metadata={"dtype": np.dtype(dtype), "shape": shape}, **kwargs)


@dataclass
class PositionRows:
    """One row per position where the player to move chose a move (ply 0 .. length-1)."""

    black: np.ndarray = column(np.uint32)  # board masks, bit s-1 = square s
    white: np.ndarray = column(np.uint32)
    kings: np.ndarray = column(np.uint32)
    black_to_move: np.ndarray = column(np.bool_)
    no_progress: np.ndarray = column(np.int16)  # plies since the last capture or man move
    repetitions: np.ndarray = column(np.int8)  # times this position had occurred (1 = first)
    ply: np.ndarray = column(np.int16)
    # perspective action index (zero.net.encoding), -1 = empty slot
    policy_actions: np.ndarray = column(np.int16, (POLICY_SLOTS,))
    # visit share per action, sums to 1 over the used slots
    policy_visits: np.ndarray = column(np.float32, (POLICY_SLOTS,))
    full_search: np.ndarray = column(np.bool_)  # a full search (policy target); False = cheap playout-cap search
    forced: np.ndarray = column(np.bool_)  # single legal move, played without search (no policy target)
    root_value: np.ndarray = column(np.float32)  # search value of the root for the side to move, in [-1, 1]

    def __len__(self) -> int:
        return len(self.ply)

    @classmethod
    def from_lists(cls, columns: dict[str, list]) -> "PositionRows":
        """Rows from one list per field, as a game is played (policy fields: one POLICY_SLOTS row per
        position, nested or flat), converted to the store's dtypes."""
        n = len(columns["ply"])
        return cls(**{name: np.asarray(columns[name], dtype).reshape((n, *shape))
                      for name, (dtype, shape) in POSITION_FIELDS.items()})


@dataclass
class GameRecord:
    positions: PositionRows | None  # None for a game read back without its rows
    winner: int = column(np.int8)  # +1 Black won, -1 White won, 0 draw (as decided, including by resignation)
    termination: str = column(STRING)  # zero.rules.game.Termination value
    length: int = column(np.int32)  # plies played
    opening: str = column(STRING)  # ballot moves or "start"
    pdn: str = column(STRING)  # the whole game as PDN text
    seed: int = column(np.int64)
    # Which game of its actor's seed stream this is (actor.game_seed); a restarted actor goes on after the
    # highest one committed, so no seed, and no game, is ever played twice.
    seed_index: int = column(np.int64)
    checkpoint: str = column(STRING)  # checkpoint file name (or id) the actor used
    model_version: int = column(np.int64)  # training step of that checkpoint
    # Resignation bookkeeping: in games that play on past a resignation (to measure wrong resignations),
    # the side that would have resigned (+1 Black, -1 White, 0 none) and when.
    would_resign_side: int = column(np.int8, default=0)
    would_resign_ply: int = column(np.int32, default=-1)

    def results_for_side_to_move(self) -> np.ndarray:
        """Per position: +1 if the side to move there went on to win, -1 lose, 0 draw."""
        sign = np.where(self.positions.black_to_move, 1, -1)
        return (sign * self.winner).astype(np.int8)


def _schema(cls) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    return {f.name: (f.metadata["dtype"], f.metadata["shape"]) for f in fields(cls) if "dtype" in f.metadata}


# name -> (dtype, shape of one row)
POSITION_FIELDS = _schema(PositionRows)
GAME_FIELDS = _schema(GameRecord)
