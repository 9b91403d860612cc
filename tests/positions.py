"""Positions the tests of the yardstick players share."""

from __future__ import annotations

import random

from zero.rules.game import Position


def random_position(seed: int, plies: int) -> Position:
    """A position reached by random play from the start (fewer than `plies` if the game ends first)."""
    rng = random.Random(seed)
    pos = Position.initial()
    for _ in range(plies):
        moves = pos.legal_moves()
        if not moves:
            break
        pos = pos.play(rng.choice(moves))
    return pos


# Small endgames, with kings, each side to move.
ENDGAMES = [
    "B:W21,28,32:BK4,14",
    "W:WK10,K19,27:BK14,23",
    "B:W12,14,15,29:B2,7,13",
    "W:W5,K30:BK6,K27,3",
]
