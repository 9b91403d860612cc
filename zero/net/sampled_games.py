"""Positions from a network's own games, every move drawn from its raw policy over the legal moves.

The kind of position a search of that network meets, varied by the draws and cheap to make (one network
call a ply for many games at once, no search). The int8 model's calibration (zero.net.quantized) and
distillation's self-play positions (train.learner.distill) are made of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from zero.net.encoding import encode_game, move_action
from zero.rules.game import Game, Position


class SampledPosition(NamedTuple):
    position: Position
    no_progress: int
    repetitions: int


def sampled_positions(policy_logits: Callable[[np.ndarray], np.ndarray], count: int, seed: int,
                      games: int = 64) -> tuple[list[SampledPosition], np.ndarray]:
    """`count` positions (and their planes, float32 [count, NUM_PLANES, 8, 8]) from `games` games played at
    once from the start position; `policy_logits(planes)` gives the network's unmasked policy logits. A
    finished game is replaced by a new one."""
    rng = np.random.default_rng(seed)
    live = [Game() for _ in range(games)]
    positions: list[SampledPosition] = []
    batches = []
    while len(positions) < count:
        planes = np.stack([encode_game(game) for game in live])
        logits = policy_logits(planes)
        batches.append(planes)
        for i, game in enumerate(live):
            positions.append(SampledPosition(game.position, game.no_progress[-1], game.repetitions()))
            legal = game.legal_moves()
            scores = logits[i, [move_action(m, game.position.black_to_move) for m in legal]]
            probs = np.exp(scores - scores.max())
            game.play(legal[rng.choice(len(legal), p=probs / probs.sum())])
            if game.outcome is not None:
                live[i] = Game()
    return positions[:count], np.concatenate(batches)[:count]
